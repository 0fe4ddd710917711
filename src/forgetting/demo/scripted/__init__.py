"""The scripted model: a deterministic stand-in for the LLM, behind an OpenAI-compatible API.

It lets the whole pipeline run without a GPU (the embedded demo and the tests). Its results
describe this stand-in, not any language model, and every response says so.

* :mod:`.knowledge` — what it knows per demo task (``solution.yaml``)
* :mod:`.history` — the conversation as it reconstructs it on every call (stateless)
* :mod:`.observations` — tool outputs as it sees them: intact, deleted or in fragments
* :mod:`.policy` — what a careful agent does next; :mod:`.reasoning` — what it says
* :mod:`.commands` — the shell commands it issues and recognises
* :mod:`.draws` — seeded randomness; :mod:`.settings` — config ``model.scripted``
* :mod:`.prefix_cache` — vLLM prefix-cache emulation for ``cached_tokens``
* :mod:`.model` — request → response; :mod:`.server` — HTTP server, in-process API
"""

from forgetting.demo.scripted.knowledge import TaskBook, TaskKnowledge
from forgetting.demo.scripted.model import FINGERPRINT, SEED_HEADER, STAND_IN, ScriptedModel
from forgetting.demo.scripted.server import ScriptedModelServer
from forgetting.demo.scripted.settings import ScriptedSettings

__all__ = [
    "FINGERPRINT",
    "SEED_HEADER",
    "STAND_IN",
    "ScriptedModel",
    "ScriptedModelServer",
    "ScriptedSettings",
    "TaskBook",
    "TaskKnowledge",
]
