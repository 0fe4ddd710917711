"""``forgetting dataset fetch``: download SWE-bench Verified rows as JSONL (needs network).

The file is what ``dataset.instances`` points at: the problem statements the agents see and
the tests, image and eval script the evaluation uses. Fetch it once on a machine with access
to the Hugging Face hub and copy it to the cluster.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from forgetting.instances.dataset_file import DEFAULT_DATASET, DEFAULT_OUT, DEFAULT_SPLIT, fetch_instances


def add_parser(sub: Any) -> None:
    p = sub.add_parser("dataset", help="SWE-bench dataset rows: fetch", description=__doc__)
    dsub = p.add_subparsers(dest="dataset_command", required=True, metavar="ACTION")
    f = dsub.add_parser("fetch", help="download the dataset rows as JSONL (needs network)")
    f.add_argument("--out", default=DEFAULT_OUT,
                   help=f"output file: Parquet if it ends in .parquet, else JSONL (default: {DEFAULT_OUT})")
    f.add_argument(
        "--name", default=DEFAULT_DATASET, help=f"Hugging Face dataset (default: {DEFAULT_DATASET})"
    )
    f.add_argument("--split", default=DEFAULT_SPLIT, help=f"dataset split (default: {DEFAULT_SPLIT})")
    f.set_defaults(func=run_fetch)


def run_fetch(args: argparse.Namespace) -> int:
    from forgetting.foundation.inputs import check_output_file

    out = check_output_file(Path(args.out), "--out")
    count, lacking = fetch_instances(out, name=args.name, split=args.split)
    print(f"{count} instances of {args.name} ({args.split}) -> {out}")
    if lacking:
        print(
            f"note: rows lack {', '.join(lacking)}: the agents can use them, the docker and apptainer "
            "evaluation backends cannot (SWE-bench/SWE-bench_Verified carries them)"
        )
    return 0
