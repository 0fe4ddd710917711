"""``forgetting proxy --upstream URL --deletion NAME --seed N --log DIR --agent AGENT``: run the
deletion proxy.

Serves an OpenAI-compatible API (``/v1/chat/completions``, ``/v1/models``, ``/health``) that
deletes from old turns of each request's history by configuration NAME, forwards it to the
upstream server and logs every call to DIR/calls.jsonl. AGENT (mini, mini-text, trae) is the
agent in front of it: what counts as an action in its replies — never deleted — is taken from
that agent's own configuration (mini-text: mini-swe-agent's ``action_regex``; with --config,
the study's ``agent.mini-text.config_file``). Prints its URL, then serves until interrupted
(Ctrl-C or SIGTERM). See docs/proxy.md.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any

from forgetting.commands import arg_types
from forgetting.commands.common import add_command
from forgetting.commands.study_args import noted


def add_parser(sub: Any) -> None:
    p = add_command(sub, "proxy", help="run the deletion proxy in front of an OpenAI-compatible server", doc=__doc__)
    p.add_argument("--upstream", required=True, help="the model server's base URL, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--deletion", required=True, metavar="NAME",
                   help="configuration name, e.g. delayed-turn-tool_output-50, or baseline")
    p.add_argument("--seed", required=True, type=arg_types.seed, help="the run's seed (keys every deletion draw)")
    p.add_argument("--log", required=True, metavar="DIR", help="directory of the call log (calls.jsonl)")
    p.add_argument("--agent", required=True, choices=["mini", "mini-text", "trae"],
                   help="the agent in front of the proxy: its own config says what an action is")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=arg_types.port, default=0, help="port to listen on (default 0: a free port)")
    p.add_argument("--run-id", default="manual", help="run id written to the log and sent upstream")
    p.add_argument("--config", metavar="STUDY.yaml",
                   help="resolve NAME and the deletion/proxy settings from this study config")
    p.add_argument("--api-key-env", metavar="NAME",
                   help="send the key in this environment variable upstream (a hosted API), never the client's")
    p.set_defaults(func=run)


def resolve_deletion(name: str, study: Any | None) -> Any:
    """A configuration by name: from the study when given (its policies included), else the paper's
    grid or a name of another policy's scheme (config/README.md; the study's turn cap and prices)."""
    from forgetting.deletion.names import parse_configuration_name
    from forgetting.deletion.policy import PolicyContext

    if study is not None:
        try:
            return study.configuration(name)
        except KeyError:
            pass
    context = study.policy_context if study is not None else PolicyContext.from_parts()  # no --config: the schema's
    return parse_configuration_name(name, "--deletion", context)


def agent_actions(agent: str, study: Any | None) -> Any:
    """The agent's action pattern, from the study's agent settings when a study is given."""
    from forgetting.agents import action_syntax

    files = study.runner.mini_config_files if study is not None else {}
    return action_syntax(agent, files.get(agent))


def run(args: argparse.Namespace) -> int:
    from forgetting.foundation.inputs import check_output_dir
    from forgetting.run.proxy import ProxySettings, start_proxy
    from forgetting.study.config import load_study

    study = noted(args, load_study(args.config)) if args.config else None
    deletion = resolve_deletion(args.deletion, study)
    settings = study.proxy if study is not None else ProxySettings.from_parts()  # no --config: the schema's
    check_output_dir(args.log, "--log")
    actions = agent_actions(args.agent, study)
    access = None
    if args.api_key_env:
        from forgetting.run.proxy.upstream import Access
        from forgetting.study.endpoint import read_api_key

        key = read_api_key(args.api_key_env, what="--api-key-env")
        access = Access(api_key=key, key_name=args.api_key_env)
    handle = start_proxy(args.upstream, deletion, args.seed, args.log, args.run_id, actions=actions,
                         host=args.host, port=args.port, settings=settings, access=access)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    print(f"forgetting proxy: {handle.url} -> {handle.server.upstream.url} "
          f"(deletion {deletion.name}, seed {args.seed}, log {handle.log_path})", flush=True)
    try:
        while not done.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        stopped = handle.stop()  # bounded: a stuck thread does not keep the process alive
    if not stopped:
        print("forgetting proxy: a thread did not stop in time; every answered call is on disk", file=sys.stderr,
              flush=True)
    print(f"forgetting proxy: stopped after {handle.calls} calls", flush=True)
    return 0
