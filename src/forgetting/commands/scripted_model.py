"""``forgetting scripted-model``: serve the scripted model, a deterministic stand-in for the
LLM, as an OpenAI-compatible Chat Completions server on loopback.

Endpoints: ``POST /v1/chat/completions``, ``GET /v1/models``, ``GET /health``. Runs until
interrupted (Ctrl-C or SIGTERM). Its answers describe this stand-in, not a language model.
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
from typing import Any

from forgetting.commands import arg_types
from forgetting.foundation.atomic import write_text
from forgetting.foundation.errors import UserError


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "scripted-model",
        help="serve the scripted stand-in model (OpenAI-compatible, for the demo and tests)",
        description=__doc__,
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=arg_types.port, default=0, help="port (default 0: a free port, printed on start)")
    p.add_argument("--tasks", default=None, help="demo tasks directory (default resources/demo/tasks)")
    p.add_argument(
        "--seed", type=arg_types.seed, default=None, help="server seed (default: model.scripted.seed, else 0)"
    )
    p.add_argument("--config", default=None, help="study config whose model.scripted settings to use")
    p.add_argument(
        "--settings", default=None, metavar="JSON",
        help="model.scripted settings as a JSON object (how a batch job passes its config's section)",
    )
    p.add_argument(
        "--served-name", default=None, help="model name to report (default: model.served_name or scripted)"
    )
    p.add_argument("--port-file", default=None, help="write the bound port to this file once listening")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from forgetting.demo.scripted import ScriptedModelServer, ScriptedSettings
    from forgetting.foundation import config_schema
    from forgetting.foundation.inputs import check_output_file
    from forgetting.study.config import PROJECT_ROOT, load_study

    settings = ScriptedSettings.from_mapping()
    served_name = "scripted"
    tasks = args.tasks
    if args.config:
        study = load_study(args.config)
        model = study.model.section
        settings = ScriptedSettings.from_mapping(model["scripted"], f"{args.config}: model.scripted")
        served_name = study.runner.served_name
        if tasks is None and study.dataset.kind == "demo":
            tasks = str(study.dataset.path)
    if args.settings is not None:
        try:
            raw = json.loads(args.settings)
        except (ValueError, RecursionError) as exc:
            raise UserError(f"--settings: not a JSON object ({exc})") from None
        if not isinstance(raw, dict):
            raise UserError("--settings: expected a JSON object of model.scripted keys")
        settings = ScriptedSettings.from_mapping(raw, "--settings")
    if args.seed is not None:
        settings = settings.replace(seed=args.seed)
    if args.port_file:
        check_output_file(args.port_file, "--port-file")
    tasks = tasks or str(PROJECT_ROOT / config_schema.filled({"dataset": {"kind": "demo"}})["dataset"]["instances"])
    try:
        server = ScriptedModelServer(
            tasks,
            host=args.host,
            port=args.port,
            settings=settings,
            served_name=args.served_name or served_name,
        )
    except OSError as exc:
        raise UserError(
            f"--host {args.host} --port {args.port}: cannot listen ({exc.strerror or exc})"
        ) from None
    if args.port_file:
        write_text(args.port_file, f"{server.port}\n")
    print(
        f"scripted model (a deterministic stand-in for an LLM): {len(server.model.book.tasks)} task(s), "
        f"{server.url}, seed {settings.seed}",
        flush=True,
    )

    def _stop(signum: int, frame: Any) -> None:
        threading.Thread(target=server.stop, daemon=True).start()

    signal.signal(signal.SIGTERM, _stop)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0
