"""Cost reconstruction (SPEC §5): flat and caching-aware pricing of a run's prompts.

Modules, in the order data flows:

* :mod:`~forgetting.cost.prompts` — a run's prompts as block sequences (call log);
  :mod:`~forgetting.cost.trajectory` — the same from a mini-swe-agent trajectory
  (read by :mod:`forgetting.records.mini`); :mod:`~forgetting.cost.sources` — either, from
  what is at a path (:func:`load_run`);
* :mod:`~forgetting.cost.prefix_tree` — the radix tree that gives each prompt's longest
  common prefix with every earlier prompt without comparing whole prompts;
* :mod:`~forgetting.cost.pricing` — price sheets (``resources/pricing/*.yaml``);
* :mod:`~forgetting.cost.cache_model` — the cache rules a profile parameterizes;
* :mod:`~forgetting.cost.accounting` — cached / new / re-billed per call;
* :mod:`~forgetting.cost.result` — tables and totals; :func:`cost_run` is the entry point.

The definitions taken literally, for tests and benchmarks, are the testkit's ``forgetting_testkit.naive_cost``.
"""

from __future__ import annotations

from forgetting.cost.pricing import DEFAULT_PRICING_DIR, PricingProfile, load_profile, load_profiles
from forgetting.cost.prompts import RunPrompts
from forgetting.cost.result import SUMMARY_COLUMNS, CostResult, cost_prompts, cost_run
from forgetting.cost.sources import load_run

__all__ = [
    "DEFAULT_PRICING_DIR",
    "SUMMARY_COLUMNS",
    "CostResult",
    "PricingProfile",
    "RunPrompts",
    "cost_prompts",
    "cost_run",
    "load_profile",
    "load_profiles",
    "load_run",
]
