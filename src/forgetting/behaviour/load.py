"""What a behaviour analysis reads: a trajectory of either agent (parsed by
:func:`forgetting.records.read_trajectory`) as tool-call events, and the deletions of a
proxy call log. What is at a path — a run directory of ours, a trajectory, a call log — is
decided by :mod:`forgetting.records.locate`.

Deletions come from the proxy's call log: each call record's ``deleted`` lists the parts
newly rewritten at that call (:class:`forgetting.records.PartDeletion`, parsed by the
call-log reader), and a rewritten part stays rewritten in every later call. A record of part
``tool_output`` marks that turn's tool output as deleted from that call on. The deletion engine rewrites a turn's scoped
content as a whole — turn-level selects whole turns, token-level thins every eligible
turn — so the turn is the unit: every tool output of the turn counts as deleted. Any
rewrite counts (a placeholder or a share of the tokens).

Turns are numbered as the proxy numbers them (:func:`forgetting.prompt.messages.segment`: one per
assistant message of the history). A call whose prompt holds ``n`` assistant messages is
the call that issues turn ``n + 1``; so a deletion recorded at that call is visible from
turn ``n + 1`` on. This is the model-call index itself unless a reply was dropped from
the history (mini-swe-agent 2.x keeps no assistant message for a reply it rejected as a
format error): counting assistant messages keeps the two numberings aligned.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from forgetting.behaviour.events import Trajectory
from forgetting.behaviour.mini_trajectory import mini_events
from forgetting.behaviour.trae_trajectory import trae_events
from forgetting.foundation.errors import RunOutputError, UserError
from forgetting.records import TraeTrajectory, read_trajectory
from forgetting.records.calllog import read_call_log

AGENTS = ("mini", "mini-text", "trae")
_FAMILY = {"mini": "mini", "mini-text": "mini", "trae": "trae"}


def load_trajectory(path: str | os.PathLike[str], agent: str | None = None) -> Trajectory:
    """A mini-swe-agent ``*.traj.json`` (either format) or a Trae agent trajectory file.

    ``agent`` (mini, mini-text, trae) is checked against the file's format; None infers it.
    """
    p = Path(path)
    if agent is not None and agent not in AGENTS:
        raise UserError(f"--agent {agent!r}: expected one of {', '.join(AGENTS)}")
    parsed = read_trajectory(p)
    traj = trae_events(parsed) if isinstance(parsed, TraeTrajectory) else mini_events(parsed)
    if agent is not None:
        if _FAMILY[agent] != _FAMILY[traj.agent]:
            raise RunOutputError(f"{p}: a {traj.format} trajectory, but the agent was given as {agent!r}")
        traj = Trajectory(
            traj.source, traj.format, agent, traj.events, traj.turns, traj.exit_status, traj.turn_cap
        )
    return traj


@dataclass(frozen=True)
class Deletions:
    """When each turn's tool output was first rewritten: turn → the first turn whose
    issuing call saw it rewritten."""

    rewritten_from: Mapping[int, int] = field(default_factory=dict)
    source: Path | None = None
    calls: int = 0  # model calls read from the call log
    torn_line: int | None = None  # the line a torn log was cut at (read with ``allow_torn``)

    def deleted_by(self, turn: int, at_turn: int) -> bool:
        """Whether turn ``turn``'s tool output was rewritten in the prompt of the call that
        issued turn ``at_turn``."""
        at = self.rewritten_from.get(turn)
        return at is not None and at <= at_turn

    def ever(self, turn: int) -> bool:
        return turn in self.rewritten_from


def load_deletions(path: str | os.PathLike[str], *, allow_torn: bool = False) -> Deletions:
    """The tool-output deletions recorded in a proxy call log. A torn log is an error
    (:class:`forgetting.records.calllog.TornCallLog`) unless ``allow_torn``: then the calls before
    the torn line are read."""
    log = read_call_log(path, allow_torn=allow_torn)
    at: dict[int, int] = {}
    for call in log.calls:
        turns = [d.turn for d in call.deleted if d.part == "tool_output"]
        if not turns:
            continue
        issues = 1 + sum(1 for m in log.messages(call) if m.get("role") == "assistant")
        for turn in turns:
            at[turn] = min(at.get(turn, issues), issues)
    return Deletions(at, log.path, len(log.calls), log.torn_line)
