"""Behaviour analysis of agent trajectories (SPEC §3–§4).

Tool-call labels from a rules table (:mod:`.rules`, ``forgetting/data/label_rules.yaml``),
re-fetch detection (:mod:`.refetch`), looping and capped (:mod:`.outcome`), for
mini-swe-agent trajectories in both formats, Trae agent trajectories and the project's own
run directories (read by :mod:`forgetting.records`; tool-call events: :mod:`.load`). Entry
point: :func:`label_run`.
"""

from forgetting.behaviour.api import (
    SUMMARY_COLUMNS,
    BehaviourResult,
    label_run,
    label_trajectory,
)
from forgetting.behaviour.events import ToolCallEvent, Trajectory
from forgetting.behaviour.load import load_deletions, load_trajectory
from forgetting.behaviour.rules import load_rules

__all__ = [
    "SUMMARY_COLUMNS",
    "BehaviourResult",
    "ToolCallEvent",
    "Trajectory",
    "label_run",
    "label_trajectory",
    "load_deletions",
    "load_rules",
    "load_trajectory",
]
