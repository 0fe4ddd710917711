"""Agent histories for the deletion tests, in both message styles the agents use.

``tool_calls``: mini-swe-agent 2.x / Trae through Chat Completions — ``assistant`` messages
with ``tool_calls`` (sometimes two in parallel), one ``tool`` message per call.
``text``: mini-swe-agent 2.x text mode — its fenced ``mswea_bash_command`` block in the
assistant text (the reasoning sometimes quotes a ``bash`` / ``sh`` snippet too, which that
agent never runs), the observation as a ``user`` message.

:data:`ACTIONS` gives each style's action pattern as the runner hands it to the proxy: none
for tool calls, mini-swe-agent's own ``action_regex`` for text mode (read from its config).
"""

from __future__ import annotations

import json
import random
from typing import Any

from hypothesis import strategies as st

from forgetting.agents import action_syntax
from forgetting.prompt.messages import ActionSyntax, detect_style, segment, split_text_actions

#: what counts as an action in each style's reply text: mini (tool calls) has none; mini-text
#: has mini-swe-agent's own action_regex, read from the config the runner uses
TEXT_ACTIONS: ActionSyntax = action_syntax("mini-text")  # type: ignore[assignment]
ACTIONS: dict[str, ActionSyntax | None] = {"tool_calls": None, "text": TEXT_ACTIONS}


def actions_of(messages: list[dict[str, Any]]) -> ActionSyntax | None:
    """The action pattern of the agent that wrote a test history (by its style)."""
    return ACTIONS[detect_style(messages)]


SYSTEM = {"role": "system", "content": "You are a helpful assistant that can interact with a computer."}
TASK = {
    "role": "user",
    "content": "<pr_description>\nFix the off-by-one error in utils.count().\n</pr_description>",
}

# no backticks: reasoning text must not contain fences of its own
_ALPHABET = st.sampled_from(
    [*list("abcdefghij klmnop XYZ 0123 \n\t.,:;()[]{}=_-+*/<>'\""), "é", "中", "文", "🙂", "→"]
)
texts = st.text(alphabet=_ALPHABET, min_size=0, max_size=120)


def observation(rc: int, output: str) -> str:
    return f"<returncode>{rc}</returncode>\n<output>\n{output}\n</output>"


def build(style: str, turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A history from turn specs: ``reasoning``, ``outputs`` (one per action), optional
    ``reasoning_content``, ``commands``."""
    msgs: list[dict[str, Any]] = [dict(SYSTEM), dict(TASK)]
    for t, spec in enumerate(turns, start=1):
        commands = spec.get("commands") or [f"cat file_{t}_{k}.py" for k in range(len(spec["outputs"]))]
        if style == "tool_calls":
            a: dict[str, Any] = {
                "role": "assistant",
                "content": spec["reasoning"],
                "tool_calls": [
                    {
                        "id": f"call_{t}_{k}",
                        "type": "function",
                        "function": {"name": "bash", "arguments": json.dumps({"command": c})},
                    }
                    for k, c in enumerate(commands)
                ],
            }
        else:
            a = {"role": "assistant", "content": f"{spec['reasoning']}\n\n```mswea_bash_command\n{commands[0]}\n```"}
        if spec.get("reasoning_content") is not None:
            a["reasoning_content"] = spec["reasoning_content"]
        msgs.append(a)
        if style == "tool_calls":
            for k, out in enumerate(spec["outputs"]):
                msgs.append({"role": "tool", "tool_call_id": f"call_{t}_{k}", "content": out})
        else:
            msgs.append({"role": "user", "content": spec["outputs"][0]})
    return msgs


#: commands over a small pool of files, so that later turns re-read and edit earlier ones
COMMAND_POOL = [
    "cat a.py",
    "nl -ba src/a.py | sed -n '1,20p'",
    "sed -i 's/x/y/' /testbed/src/a.py",
    "cat b.py",
    "grep -n count b.py",
    "python -m pytest tests/test_c.py -q",
    "ls -la",
    "cat c.txt && cat a.py",
]


@st.composite
def turn_specs(draw: Any, style: str, pooled: bool = False) -> dict[str, Any]:
    n_out = draw(st.integers(1, 2)) if style == "tool_calls" else 1
    reasoning = draw(texts)
    if style == "text" and draw(st.booleans()) and draw(st.booleans()):
        # reasoning that quotes a shell snippet: mini-swe-agent 2.x runs only its own block
        fence = draw(st.sampled_from(["bash", "sh"]))
        reasoning = f"{reasoning}\nI could run\n```{fence}\n{draw(st.sampled_from(COMMAND_POOL))}\n```\n{draw(texts)}"
    spec: dict[str, Any] = {
        "reasoning": reasoning,
        "outputs": [observation(draw(st.integers(0, 2)), draw(texts)) for _ in range(n_out)],
    }
    if pooled:
        spec["commands"] = [draw(st.sampled_from(COMMAND_POOL)) for _ in range(n_out)]
    if draw(st.booleans()) and draw(st.booleans()):
        spec["reasoning_content"] = draw(texts)
    return spec


@st.composite
def histories(
    draw: Any, min_turns: int = 0, max_turns: int = 9, pooled: bool = False
) -> tuple[str, list[dict[str, Any]]]:
    """A history in either style; ``pooled``: its commands name files of :data:`COMMAND_POOL`."""
    style = draw(st.sampled_from(["tool_calls", "text"]))
    specs = draw(st.lists(turn_specs(style, pooled), min_size=min_turns, max_size=max_turns))
    return style, build(style, specs)


def realistic(style: str, n_turns: int, *, seed: int = 0, output_lines: int = 40) -> list[dict[str, Any]]:
    """A longer, code-like history (for the proxy tests and the benchmark)."""
    rng = random.Random(seed)
    words = [
        "def",
        "return",
        "self",
        "value",
        "count",
        "index",
        "items",
        "len",
        "if",
        "else",
        "for",
        "in",
        "range",
        "None",
        "True",
        "raise",
        "ValueError",
        "assert",
        "+",
        "-",
        "==",
        "(",
        ")",
        ":",
        "0",
        "1",
    ]
    specs = []
    for t in range(1, n_turns + 1):
        lines = [
            f"{i:>6}\t" + " ".join(rng.choice(words) for _ in range(rng.randint(3, 12)))
            for i in range(1, output_lines + 1)
        ]
        specs.append(
            {
                "reasoning": f"THOUGHT: step {t}. The count is off by one near line {rng.randint(1, 400)}; "
                + " ".join(rng.choice(words) for _ in range(rng.randint(15, 60))),
                "outputs": [observation(0, "\n".join(lines))],
                "commands": [f"nl -ba src/utils_{t}.py | sed -n '1,{output_lines}p'"],
            }
        )
    return build(style, specs)


def action_spans(message: dict[str, Any]) -> list[str]:
    """The action blocks of a text-style message (mini-swe-agent's own pattern), verbatim."""
    content = message.get("content")
    if not isinstance(content, str) or message.get("tool_calls"):
        return []
    return [s for kind, s in split_text_actions(content, TEXT_ACTIONS) if kind == "action"]


def request_history(msgs: list[dict], k: int) -> list[dict]:
    """The history an agent sends at call k + 1: its first k turns, complete."""
    turns = segment(msgs).turns
    return msgs[: turns[k].assistant] if k < len(turns) else list(msgs)


def messages_of_turn(msgs: list[dict], turn: int) -> list[int]:
    t = segment(msgs).turns[turn - 1]
    return [t.assistant, *t.observations]
