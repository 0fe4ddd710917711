"""A synthetic study at paper scale, in the exact on-disk format of real runs.

``forgetting-synth CONFIG --out DIR`` writes every planned run of a study — call log with
token ids (the prompts reduced by the real deletion engine), the agent's own trajectory,
patch, evaluation report and run record — as a probabilistic stand-in for agent and model
would have produced them, plus the plan and batch manifests, so the analysis stages run on
it unchanged. It exists for benchmarks and tests: every run says ``model_backend:
synthetic``, the study's config ``study.synthetic: true``, and the tables say SYNTHETIC DATA.

Modules: :mod:`.world` (a task's repository and difficulty), :mod:`.agent` (the policy and
how deletion bends it), :mod:`.render` (its steps as each agent's messages),
:mod:`.trajectories` (the agents' trajectory files), :mod:`.run` (one run directory),
:mod:`.study` (the study, its manifests, the guard against real results).
"""

from forgetting_testkit.synth.study import SynthReport, synthesize

__all__ = ["SynthReport", "synthesize"]
