"""Facts of the agents the study runs, stated once.

mini-swe-agent's own benchmark configs and its submission marker; Trae agent's pinned commit
and the prefix its self-contained install lives under inside a container. The runner, the
scripted stand-in model and the synthetic study read them from here.
"""

from __future__ import annotations

#: mini-swe-agent's own benchmark configs: tool calling (the study's) and text actions
MINI_CONFIGS: dict[str, str] = {"mini": "swebench.yaml", "mini-text": "swebench_backticks.yaml"}
MINI_AGENTS: tuple[str, ...] = tuple(MINI_CONFIGS)
#: the first output line that ends a mini-swe-agent run as submitted (its environments check
#: it; what follows is the submission). Its SWE-bench configs submit with
#: ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && cat patch.txt``.
MINI_SUBMIT_MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
#: Trae agent's commit the study pins (containers/trae-agent.def builds it)
TRAE_COMMIT = "e839e559ac61bdd0e057c375dd1dee391fee797d"
#: where the Trae agent's self-contained install lives inside the instance container
TRAE_PREFIX = "/opt/trae-agent"
#: Trae agent's default tools (its ``TraeAgentConfig.tools`` at that commit; the runner names
#: them in the config so a change of defaults cannot change the study)
TRAE_TOOLS: tuple[str, ...] = ("bash", "str_replace_based_edit_tool", "sequentialthinking", "task_done")
#: Trae's file viewer and editor (``view``, ``create``, ``str_replace``, ``insert``; absolute paths)
TRAE_EDIT_TOOL = "str_replace_based_edit_tool"
#: the tool call that ends a Trae run: never executed; Trae accepts it as the run's end
#: (``success``) unless ``--must-patch`` finds an empty ``git diff``, when it answers
#: :data:`TRAE_EMPTY_PATCH` and the run goes on
TRAE_FINISH_TOOL = "task_done"
TRAE_EMPTY_PATCH = "ERROR! Your Patch is empty. Please provide a patch that fixes the problem."
#: how Trae's user message names the project root, which its edit tool needs absolute paths under
TRAE_ROOT_HEADER = "[Project root path]:"
