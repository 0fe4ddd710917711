"""How a run ended: the agent-level statuses of SPEC §3, and infrastructure failures.

An *agent-level* outcome is a result of the study and finishes the run: ``submitted`` (the
agent submitted, possibly an empty patch), ``capped`` (it reached the turn cap),
``context_exceeded`` (its history no longer fit the model's context window) or ``error``
(the agent stopped otherwise: repeated format errors, its wall-time limit, a crash of the
agent itself, a model request the server refused as malformed).

An *infrastructure failure* is not a result: the model server died or could not be
reached, the proxy or the workspace could not be made, the run process was killed. Such a
run is not finalized; the batch goes on with its other runs and then fails naming it, so
the next invocation redoes exactly those runs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

SUBMITTED = "submitted"
CAPPED = "capped"
CONTEXT_EXCEEDED = "context_exceeded"
ERROR = "error"
STATUSES = (SUBMITTED, CAPPED, CONTEXT_EXCEEDED, ERROR)

#: mini-swe-agent exit statuses with a status of their own
_MINI_STATUS = {"Submitted": SUBMITTED, "LimitsExceeded": CAPPED, "ContextWindowExceededError": CONTEXT_EXCEEDED}

#: exceptions (by class name, litellm's and openai's) that mean the model server failed or
#: could not be reached: not the agent's doing, so the run is redone rather than recorded
MODEL_UNAVAILABLE = frozenset(
    {
        "APIConnectionError",
        "APITimeoutError",
        "Timeout",
        "InternalServerError",
        "ServiceUnavailableError",
        "BadGatewayError",
        "RateLimitError",
        "APIError",
    }
)
#: phrases of a context-window overflow in an error message (vLLM, OpenAI, litellm)
_CONTEXT_PHRASES = ("context window", "context length", "context_length_exceeded", "maximum context", "too many tokens")


class InfraFailure(Exception):
    """The run could not be carried out for a reason outside the agent (one line)."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))


@dataclass
class AgentOutcome:
    """What a run's process reports back (``.outcome.json`` in the run's temporary directory)."""

    status: str  # one of STATUSES, or "infra" for an infrastructure failure
    exit_status: str = ""  # the agent's own word (Submitted, LimitsExceeded, …)
    turns: int = 0
    error: str | None = None
    agent_exit_code: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def infra(self) -> bool:
        return self.status == "infra"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AgentOutcome:
        return cls(**{k: data[k] for k in ("status", "exit_status", "turns", "error", "agent_exit_code", "extra")
                      if k in data})


def is_context_overflow(message: str) -> bool:
    low = message.lower()
    return any(p in low for p in _CONTEXT_PHRASES)


def classify_mini(exit_status: str, exception: BaseException | None = None) -> tuple[str, str | None]:
    """mini-swe-agent's exit status (and the exception that ended the run, if one did) →
    (status, error). Status ``infra`` when the model server failed or was unreachable."""
    if exit_status in _MINI_STATUS:
        return _MINI_STATUS[exit_status], None
    name = type(exception).__name__ if exception is not None else exit_status
    message = str(exception) if exception is not None else ""
    if name == "ContextWindowExceededError" or (name == "BadRequestError" and is_context_overflow(message)):
        return CONTEXT_EXCEEDED, None
    if name in MODEL_UNAVAILABLE:
        return "infra", f"model unavailable: {name}: {message}"[:500]
    if exit_status == "TimeExceeded":
        return ERROR, "TimeExceeded: the run reached execution.run_timeout_s"
    reason = f"{name}: {message}" if message else (exit_status or "the agent stopped without an exit status")
    return ERROR, reason[:500]
