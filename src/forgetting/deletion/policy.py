"""The policy interface: which eligible parts of a history are rewritten, and how.

A *policy* looks at the history of one call (a :class:`HistoryView`) and returns the
:class:`Rewrite` decisions for it; the engine (:mod:`forgetting.deletion.engine`) applies
them. The engine owns every random draw that changes text (keyed by run seed, turn, part
and message), so a rewrite decided twice comes out byte-identical.

The contract every policy keeps — the stability that makes prefix-cache accounting
meaningful (SPEC §2):

* ``decide`` is a pure function of the view (its messages, the run seed and the policy's
  own parameters); no state carried between calls.
* monotone: if history ``h`` is a prefix of ``h'`` (a later call of the same run), every
  rewrite decided for ``h`` is decided, unchanged, for ``h'``. A part once rewritten stays
  rewritten the same way. The engine checks this on every call against the history of the
  previous call and raises :class:`PolicyError` if a policy breaks it.
* the preamble (system prompt, task) and actions are out of reach: a rewrite names only a
  turn and a part (``reasoning`` / ``tool_output``).

Adding a policy is one module: subclass :class:`Policy`, set ``name``, implement
``decide`` and ``configure`` (config entry → :class:`~forgetting.grid.Deletion`), and for
its names ``canonical_name`` (configuration → name) and ``name_entry`` (name → config entry;
the scheme is in :mod:`forgetting.deletion.names`); then add one line to
:data:`forgetting.deletion.registry.POLICIES` (its name → the class's dotted path).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

from forgetting.deletion.parts import Editable, decompose
from forgetting.deletion.settings import DeletionSettings
from forgetting.foundation import config_schema
from forgetting.foundation.errors import ConfigError
from forgetting.grid import PARTS, Deletion, timing_of
from forgetting.prompt import tokenizer
from forgetting.prompt.messages import ActionSyntax, Segmented, Turn, detect_style, segment
from forgetting.records.deletion_record import MODES


@dataclass(frozen=True)
class PolicyContext:
    """What a policy's ``configure`` may read from the rest of the study config: the turn cap
    (``agent.turn_cap``) and the price sheets (``pricing.dir``, ``pricing.primary``)."""

    turn_cap: int
    pricing_dir: Path
    pricing_primary: str

    @classmethod
    def from_filled(cls, cfg: Mapping[str, Any], root: Path) -> PolicyContext:
        """From a checked study config (``agent`` and ``pricing`` filled); a relative
        ``pricing.dir`` against ``root`` (the study's root). A loaded study holds its own
        (``study.policy_context``)."""
        pricing = cfg["pricing"]
        directory = Path(pricing["dir"])
        if not directory.is_absolute():
            directory = root / directory
        return cls(turn_cap=int(cfg["agent"]["turn_cap"]), pricing_dir=directory,
                   pricing_primary=str(pricing["primary"]))

    @classmethod
    def from_parts(
        cls, cfg: Mapping[str, Any] | None = None, root: Path = config_schema.PROJECT_ROOT
    ) -> PolicyContext:
        """From part of a study config handed in apart from a study (a test's, a command line's
        without ``--config``): its ``agent`` and ``pricing`` checked, every default the schema's."""
        part = cfg or {}
        checked = {key: config_schema.section(key, part.get(key)) for key in ("agent", "pricing")}
        return cls.from_filled(checked, root)


def whole_tool_outputs(policy: str, keep_last: int, amount: float | None, **params: Any) -> Deletion:
    """A configuration that replaces whole tool outputs (turn level) before the last
    ``keep_last`` turns; ``amount``: the share of them, None where the policy decides which."""
    return Deletion(name="", policy=policy, scope="tool_output", granularity="turn", amount=amount,
                    keep_last=keep_last, timing=timing_of(keep_last), params=params)


class PolicyError(RuntimeError):
    """A policy broke the contract (a bug in the policy, not a user error)."""


class _RewriteFields(NamedTuple):
    turn: int
    part: str
    mode: str
    amount: float | None = None
    placeholder: str | None = None


class Rewrite(_RewriteFields):
    """Rewrite one part of one turn.

    ``mode="turn"``: each message's text of the part is replaced by one placeholder
    (``placeholder`` or the configured one; ``{lines}`` and ``{tokens}`` in it are filled
    with the original text's line and token counts). ``mode="token"``: ``amount`` percent
    of the part's tokens are removed, per message, the rest kept in order.

    A named tuple, checked when made: immutable, ordered by its fields, and hashed and
    compared in C (the engine looks every rewrite of a long history up at every call).
    """

    __slots__ = ()

    def __new__(
        cls, turn: int, part: str, mode: str, amount: float | None = None, placeholder: str | None = None
    ) -> Rewrite:
        if part not in PARTS:
            raise PolicyError(f"rewrite of unknown part {part!r}")
        if mode not in MODES:
            raise PolicyError(f"rewrite with unknown mode {mode!r}")
        if mode == "token" and not (amount is not None and 0 < amount <= 100):
            raise PolicyError(f"token-level rewrite needs an amount in (0, 100], got {amount!r}")
        return super().__new__(cls, turn, part, mode, amount, placeholder)


class HistoryView:
    """One call's history as a policy sees it: turns, their parts, their sizes."""

    def __init__(
        self,
        messages: Sequence[Mapping[str, Any]],
        seed: int,
        *,
        actions: ActionSyntax | None,
        segmented: Segmented | None = None,
        counter: Callable[[str], int] | None = None,
    ) -> None:
        """``actions``: how the run's agent writes actions into its text (None: tool calls only)."""
        self.messages = messages
        self.seed = seed
        self.actions = actions
        self.segmented = segmented or segment(messages)
        self._counter = counter

    @property
    def style(self) -> str:
        return self.segmented.style

    @property
    def turns(self) -> tuple[Turn, ...]:
        return self.segmented.turns

    @property
    def n_turns(self) -> int:
        return len(self.segmented.turns)

    def eligible(self, keep_last: int) -> range:
        """Indices (1-based) of the turns before the most recent ``keep_last``."""
        return range(1, max(0, self.n_turns - keep_last) + 1)

    def turn(self, index: int) -> Turn:
        return self.segmented.turns[index - 1]

    def message_indices(self, turn: int, part: str) -> tuple[int, ...]:
        t = self.turn(turn)
        return (t.assistant,) if part == "reasoning" else t.observations

    def editable(self, message_index: int, part: str) -> Editable | None:
        return decompose(self.messages[message_index], part, self.actions)

    def part_texts(self, turn: int, part: str) -> list[str]:
        """The deletable texts (cores) of a part, in message order."""
        out: list[str] = []
        for i in self.message_indices(turn, part):
            ed = self.editable(i, part)
            if ed is not None:
                out += ed.cores
        return out

    def count(self, text: str) -> int:
        """Tokens of ``text`` (the engine's tokenizer, cached per text; tests may pass another)."""
        if self._counter is None:
            return tokenizer.count(text)
        return self._counter(text)

    def part_tokens(self, turn: int, part: str) -> int:
        """Tokens of a part's deletable text."""
        return sum(self.count(t) for t in self.part_texts(turn, part))

    def before_last_turn(self) -> HistoryView | None:
        """The history of the previous call: everything before the last assistant message."""
        if not self.turns:
            return None
        cut = self.turns[-1].assistant
        head = self.messages[:cut]
        seg = Segmented(detect_style(head), self.segmented.preamble, self.turns[:-1])
        return HistoryView(head, self.seed, actions=self.actions, segmented=seg, counter=self._counter)


class Policy:
    """Base class of deletion policies. One instance serves one run."""

    name: ClassVar[str] = ""
    #: whether a ``configurations.policies`` entry may select it (the baseline's may not)
    configurable: ClassVar[bool] = True
    #: its naming scheme, as documented (``batch{k}-{retention}-{granularity}-{scope}-{amount}``)
    name_scheme: ClassVar[str] = ""

    def __init__(self, deletion: Deletion, settings: DeletionSettings) -> None:
        self.deletion = deletion
        self.settings = settings

    def decide(self, view: HistoryView) -> list[Rewrite]:
        """The rewrites for this history (see the module's contract)."""
        raise PolicyError(f"policy {self.name!r} does not implement decide()")

    @classmethod
    def configure(cls, entry: Mapping[str, Any], key: str, context: PolicyContext) -> Deletion:
        """A :class:`Deletion` from one ``configurations.policies`` entry (ConfigError if bad).
        Its ``name`` is the entry's, or :meth:`canonical_name` when the entry gives none."""
        raise ConfigError(f"{key}: policy {cls.name!r} cannot be configured")

    @classmethod
    def canonical_name(cls, deletion: Deletion) -> str:
        """The configuration's stable readable name (the policy's naming scheme)."""
        return deletion.name

    @classmethod
    def named(cls, deletion: Deletion, entry: Mapping[str, Any]) -> Deletion:
        """``deletion`` under its config entry's ``name``, else its :meth:`canonical_name`."""
        return replace(deletion, name=str(entry.get("name") or cls.canonical_name(deletion)))

    @classmethod
    def name_entry(cls, name: str, key: str) -> dict[str, Any] | None:
        """The config entry a name of this policy's scheme stands for; None when ``name`` is
        not of its scheme; ConfigError (one line) when it starts like one but is malformed."""
        return None

    @classmethod
    def label(cls, entry: Mapping[str, Any]) -> str:
        """A short label for tables and figures from the entry a name stands for
        (:meth:`name_entry`), e.g. ``batched ×4 · delayed``."""
        return str(entry.get("name", cls.name))


class NoDeletion(Policy):
    """The baseline: nothing is ever rewritten."""

    name = "none"
    configurable = False

    def decide(self, view: HistoryView) -> list[Rewrite]:
        return []
