"""Trajectory deletion (SPEC §2): reduce an agent's history before it reaches the model.

Public API::

    reduce_history(messages, deletion, seed, *, actions, placeholders=None, token_draw=None) -> Reduction
    Reducer(deletion, seed, *, actions, settings).reduce(messages) -> Reduction   # memoized, one per run

``actions`` is the run's agent's :class:`~forgetting.prompt.messages.ActionSyntax` (what counts as an
action in its reply text, never deleted; :func:`forgetting.agents.action_syntax`), or
None for an agent that acts by tool calls.
    study.deletion   # a loaded study's DeletionSettings (a part of a section: DeletionSettings.from_section)

Modules: :mod:`~forgetting.deletion.parts` (what a part's text is, in both message
styles), :mod:`~forgetting.deletion.draws` (keyed draws), :mod:`~forgetting.deletion.tokens`
(token-level removal), :mod:`~forgetting.deletion.policy` (the policy interface),
:mod:`~forgetting.deletion.registry` (the policies by name),
:mod:`~forgetting.deletion.random_policy` (the paper's policy),
:mod:`~forgetting.deletion.engine` (applying a policy's decisions; what a rewrite did is a
:class:`~forgetting.records.PartDeletion`, the call log's ``deleted`` records).
"""

from forgetting.deletion.engine import Reducer, Reduction, reduce_history
from forgetting.deletion.policy import HistoryView, Policy, PolicyError, Rewrite
from forgetting.deletion.registry import configurable_policies, make_policy, policies
from forgetting.deletion.settings import DEFAULT_PLACEHOLDERS, DeletionSettings
from forgetting.deletion.tokens import TOKEN_DRAWS
from forgetting.grid import PARTS

__all__ = [
    "DEFAULT_PLACEHOLDERS",
    "PARTS",
    "TOKEN_DRAWS",
    "DeletionSettings",
    "HistoryView",
    "Policy",
    "PolicyError",
    "Reducer",
    "Reduction",
    "Rewrite",
    "configurable_policies",
    "make_policy",
    "policies",
    "reduce_history",
]
