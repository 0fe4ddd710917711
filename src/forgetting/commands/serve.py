"""``forgetting serve CONFIG``: the study's model server as a job of its own, publishing its
address for batches on other nodes (route C of docs/cluster.md).

    forgetting serve config/config.yaml config/route-c.yaml              # vLLM, as a GPU job

Starts ``vllm serve`` from ``model.vllm`` (``--backend scripted``: the scripted stand-in),
waits until it answers, writes ``model.endpoint.address_file`` (host, port, model, started,
job id) and serves until SIGTERM / Ctrl-C or until the server dies, then withdraws the
address and stops the server. Batches of a study with ``model.backend: endpoint`` and the same
``address_file`` wait for the file and connect to it.
"""

from __future__ import annotations

import argparse
from typing import Any

from forgetting.commands import arg_types
from forgetting.commands.study_args import add_study_arguments, study_from_args


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "serve", help="serve the study's model as a job of its own, publishing its address (cluster route C)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_study_arguments(p)
    p.add_argument("--backend", default="vllm", choices=["vllm", "scripted"],
                   help="the server to start (default vllm; scripted: the demo's stand-in)")
    p.add_argument("--host", default="0.0.0.0", help="address to listen on (default 0.0.0.0: every interface)")
    p.add_argument("--port", type=arg_types.port, default=0, help="port (default 0: a free one, published)")
    p.add_argument("--advertise", default=None,
                   help="the host name batches connect to (default: this machine's name, or --host when it is one)")
    p.add_argument("--log", default=None, help="the server's log (default: model_server.log beside the address file)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from forgetting.endpoint.serve import serve
    from forgetting.foundation.errors import UserError

    if not 0 <= args.port <= 65535:
        raise UserError(f"--port {args.port}: expected 0–65535")
    study = study_from_args(args)
    return serve(study, backend=args.backend, host=args.host, port=args.port, advertise=args.advertise,
                 log_path=Path(args.log) if args.log else None, say=lambda m: print(m, flush=True))
