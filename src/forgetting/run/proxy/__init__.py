"""The deletion proxy (SPEC §2): an OpenAI-compatible server that deletes from old turns.

Public API::

    start_proxy(upstream, deletion, seed, log_dir, run_id, *, actions, host="127.0.0.1", port=0,
                settings) -> ProxyHandle             # .url, .stop(), a context manager
    study.proxy                              # a loaded study's ProxySettings (its settings=)

Command line: ``forgetting proxy`` (:mod:`forgetting.commands.proxy`); by hand: docs/proxy.md.
"""

from forgetting.run.proxy.server import RUN_HEADER, SEED_HEADER, ProxyHandle, start_proxy
from forgetting.study.proxy import ProxySettings

__all__ = ["RUN_HEADER", "SEED_HEADER", "ProxyHandle", "ProxySettings", "start_proxy"]
