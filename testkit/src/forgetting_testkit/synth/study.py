"""A whole synthetic study on disk: its config, its runs, its plan and batch manifests.

:func:`synthesize` turns a study config into a *synthetic* study under ``--out``:

* ``study.yaml`` — the config, with ``study.synthetic: true``, ``results_dir`` pointing at
  the directory and every resource path absolute (narrowed by ``--runs``: fewer tasks,
  then fewer configurations, the baseline always kept);
* ``runs/…`` — every planned run in the exact on-disk format of a real run
  (:mod:`forgetting_testkit.synth.run`), generated in parallel, finished runs kept on a rerun;
* ``plan/runs.parquet`` and per batch ``batches/…/runs.json`` and ``eval.json`` — the
  manifests the run and evaluation stages leave, so the workflow analyses the study with
  ``snakemake --cores 2 --configfile DIR/study.yaml --config regenerate=true``;
* ``synth.json`` — how it was generated (source config, generator seed, counts, size).

It refuses to write into a directory that holds anything but a synthetic study of the same
source and seed, and into the results directory of a real study.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from forgetting.foundation.atomic import write_json, write_text
from forgetting.foundation.errors import UserError
from forgetting.foundation.layout import EVAL_JSON, RUN_JSON, Layout
from forgetting.records import is_finished, read_run_record
from forgetting.study.config import Study, load_study, read_yaml
from forgetting.study.plan import Run, plan_batches, plan_runs, summarize, write_run_table
from forgetting_testkit.synth.run import EVAL_BACKEND, SYNTH_FORMAT, RunResult, synthesize_run

STUDY_FILE = "study.yaml"
RECORD_FILE = "synth.json"
#: keys of a config that only narrow one invocation; a synthetic study's config has none
_INVOCATION_KEYS = ("only", "only_agents", "only_tasks", "regenerate", "force_rerun")


@dataclass
class SynthReport:
    out: Path
    study: Study
    planned: int
    generated: int = 0
    kept: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    resolved: int = 0
    bytes: int = 0
    seconds: float = 0.0


def _is_synthetic(raw: dict[str, Any]) -> bool:
    return bool((raw.get("study") or {}).get("synthetic"))


def _inside(a: Path, b: Path) -> bool:
    """Whether ``a`` is ``b`` or lies under it."""
    try:
        a.relative_to(b)
        return True
    except ValueError:
        return False


def check_out_dir(out: Path, source: Study, record: dict[str, Any]) -> None:
    """Refuse a directory holding anything but this synthetic study (see the module docstring)."""
    out = out.resolve()
    real = source.results_dir.resolve()
    if not _is_synthetic(source.as_config()) and (_inside(out, real) or _inside(real, out)):
        raise UserError(
            f"--out {out}: that is (or holds) the results directory of the study {source.source} "
            f"({real}); synthetic runs are never written among real results, choose another directory"
        )
    if not out.exists() or not any(out.iterdir()):
        return
    study_file = out / STUDY_FILE
    if not study_file.is_file():
        raise UserError(
            f"--out {out}: the directory is not empty and holds no synthetic study ({STUDY_FILE}); "
            "choose an empty or new directory"
        )
    existing = read_yaml(study_file)
    if not _is_synthetic(existing):
        raise UserError(
            f"{study_file}: a study without study.synthetic: true lives here; synthetic runs are never "
            "written among real results, choose another directory"
        )
    try:
        old = json.loads((out / RECORD_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        old = {}
    for key in ("source", "generator_seed", "runs_option"):
        if old.get(key) != record.get(key):
            raise UserError(
                f"{out / RECORD_FILE}: this synthetic study was generated with {key} {old.get(key)!r}, "
                f"not {record.get(key)!r}; delete {out} or choose another --out"
            )


def _absolute(root: Path, value: str) -> str:
    p = Path(value).expanduser()
    return str(p if p.is_absolute() else (root / p).resolve())


def _evenly(items: Sequence[Any], k: int) -> list[Any]:
    if k >= len(items):
        return list(items)
    return [items[round(i * (len(items) - 1) / max(1, k - 1))] for i in range(k)] if k > 1 else [items[0]]


def synthetic_config(source: Study, config: dict[str, Any], out: Path, runs: int | None) -> dict[str, Any]:
    """The synthetic study's config: ``config`` (as read) marked synthetic, pointed at ``out``,
    with absolute resource paths and narrowed to at most ``runs`` runs."""
    root = source.root
    cfg = {k: v for k, v in config.items() if k not in _INVOCATION_KEYS}
    cfg["study"] = {**cfg["study"], "results_dir": str(out.resolve()), "synthetic": True}
    tasks = dict(cfg.get("tasks") or {})
    if "ids_file" in tasks:
        tasks["ids_file"] = _absolute(root, tasks["ids_file"])
    cfg["tasks"] = tasks
    dataset = dict(cfg["dataset"])
    for key in ("known_ids", "instances"):
        if key in dataset:
            dataset[key] = _absolute(root, dataset[key])
    cfg["dataset"] = dataset
    pricing = dict(cfg.get("pricing") or {})
    pricing["dir"] = _absolute(root, source.raw["pricing"]["dir"])
    cfg["pricing"] = pricing
    analysis = dict(cfg.get("analysis") or {})
    if analysis.get("label_rules"):
        analysis["label_rules"] = _absolute(root, analysis["label_rules"])
        cfg["analysis"] = analysis
    if runs is None:
        return cfg
    n_agents, confs = len(source.agents), list(source.deletion_configurations)
    br, dr = source.baseline_repeats, source.deletion_repeats

    def size(t: int, k: int) -> int:
        return n_agents * t * (k * dr + br)

    if size(len(source.tasks), len(confs)) <= runs:
        return cfg
    smallest = size(1, 1 if confs else 0)
    if runs < smallest:
        raise UserError(f"--runs {runs}: the smallest study of {source.source} has {smallest} runs "
                        "(one task, the baseline and one configuration)")
    t = min(len(source.tasks), max(1, runs // size(1, len(confs))))
    k = len(confs)
    if t < 2:
        t = min(len(source.tasks), 2 if size(2, 1 if confs else 0) <= runs else 1)
        k = min(len(confs), max(1 if confs else 0, (runs // (n_agents * t) - br) // dr))
    cfg["tasks"] = {"ids": list(source.tasks[:t])}
    if k < len(confs):
        cfg["configurations"] = {"names": [d.name for d in _evenly(confs, k)] if k else "none"}
    return cfg


def _config_text(cfg: dict[str, Any], source: str, seed: int) -> str:
    head = (
        f"# A SYNTHETIC study, generated by `forgetting-synth {source}` (generator seed {seed}).\n"
        "# Its runs come from a probabilistic stand-in for agent and model (src/forgetting/synth):\n"
        "# for benchmarks and tests only, never measured data. Analyse it with\n"
        f"#   snakemake --cores 2 --configfile {cfg['study']['results_dir']}/{STUDY_FILE} --config regenerate=true\n"
    )
    return head + yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True)


# -- generation, in worker processes ---------------------------------------------------------
_WORKER: dict[str, Any] = {}


def _init_worker(study_file: str, gen_seed: int) -> None:
    _WORKER["study"] = load_study(study_file)
    _WORKER["seed"] = gen_seed
    _WORKER["runs"] = {r.run_id: r for r in plan_runs(_WORKER["study"])}


def _remove_stale(run_dir: Path) -> None:
    parent = run_dir.parent
    if parent.is_dir():
        for p in parent.iterdir():
            if p.name.startswith(f".{run_dir.name}.tmp-synth-") and p.is_dir():
                shutil.rmtree(p, ignore_errors=True)


def _generate_one(run_id: str) -> RunResult:
    study: Study = _WORKER["study"]
    run: Run = _WORKER["runs"][run_id]
    _remove_stale(Layout(study.results_dir).run_dir(run_id))
    return synthesize_run(study, run, _WORKER["seed"])


def _by_task(runs: Sequence[Run]) -> list[str]:
    """Run ids grouped by task (a worker builds each task's repository once)."""
    return [r.run_id for r in sorted(runs, key=lambda r: (r.task, r.agent, r.configuration, r.repeat))]


def _generate(study_file: Path, gen_seed: int, todo: Sequence[Run], workers: int) -> Iterator[RunResult]:
    ids = _by_task(todo)
    if workers <= 1 or len(ids) < 2:
        _init_worker(str(study_file), gen_seed)
        for rid in ids:
            yield _generate_one(rid)
        return
    with ProcessPoolExecutor(max_workers=workers, initializer=_init_worker,
                             initargs=(str(study_file), gen_seed)) as pool:
        yield from pool.map(_generate_one, ids, chunksize=8)


# -- manifests ------------------------------------------------------------------------------
def _read(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def write_manifests(study: Study) -> None:
    """The run table and every batch's ``runs.json`` and ``eval.json``, from the run directories
    (written in that order, so each manifest is newer than what it summarizes)."""
    layout = Layout(study.results_dir)
    write_run_table(study, layout.plan_table)
    for batch in plan_batches(study):
        runs: dict[str, dict[str, Any]] = {}
        evals: dict[str, dict[str, Any]] = {}
        for run in batch.runs:
            run_dir = layout.run_dir(run.run_id)
            record, report = read_run_record(run_dir / RUN_JSON), _read(run_dir / EVAL_JSON)
            runs[run.run_id] = {"status": record.status, "turns": record.turns, "resolved": None}
            evals[run.run_id] = {"status": report["status"], "resolved": bool(report["resolved"])}
        batch_dir = layout.batch_dir(batch.key)
        statuses = Counter(e["status"] for e in runs.values())
        write_json(batch_dir / "runs.json", {
            "batch": batch.key, "synthetic": True, "runs": runs,
            "summary": {"runs": len(runs), "statuses": dict(sorted(statuses.items()))},
        })
        eval_statuses = Counter(e["status"] for e in evals.values())
        write_json(batch_dir / "eval.json", {
            "batch": batch.key, "backend": EVAL_BACKEND, "synthetic": True, "runs": evals,
            "summary": {"runs": len(evals), "resolved": sum(e["resolved"] for e in evals.values()),
                        "statuses": dict(sorted(eval_statuses.items()))},
        })


def _dir_bytes(path: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.stat(os.path.join(dirpath, name)).st_size
    return total


def synthesize(
    config: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    runs: int | None = None,
    seed: int | None = None,
    workers: int = 2,
    progress: Callable[[str], None] | None = None,
) -> SynthReport:
    """Generate (or complete) the synthetic study of ``config`` under ``out``; see the module docstring."""
    say = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    if runs is not None and runs < 1:
        raise UserError(f"--runs {runs}: must be at least 1")
    config_path = Path(config)
    source = load_study(config_path)
    raw = read_yaml(config_path)
    gen_seed = int(source.seed if seed is None else seed)
    out_dir = Path(out).expanduser().resolve()
    record: dict[str, Any] = {
        "format": SYNTH_FORMAT,
        "synthetic": True,
        "source": str(config_path.resolve()),
        "generator_seed": gen_seed,
        "runs_option": runs,
    }
    check_out_dir(out_dir, source, record)
    cfg = synthetic_config(source, raw, out_dir, runs)
    out_dir.mkdir(parents=True, exist_ok=True)
    study_file = out_dir / STUDY_FILE
    write_text(study_file, _config_text(cfg, str(config_path), gen_seed))
    write_json(out_dir / RECORD_FILE, record)
    study = load_study(study_file)
    planned = plan_runs(study)
    layout = Layout(study.results_dir)
    todo = [r for r in planned if not is_finished(layout.run_dir(r.run_id))]
    report = SynthReport(out_dir, study, len(planned), kept=len(planned) - len(todo))
    say(f"synthetic study: {summarize(study, planned).line()} → {out_dir}")
    if report.kept:
        say(f"{report.kept} runs already generated are kept")
    started = time.perf_counter()
    step = max(1, len(todo) // 20)
    for n, _ in enumerate(_generate(study_file, gen_seed, todo, workers), start=1):
        report.generated += 1
        if n % step == 0 or n == len(todo):
            rate = n / max(1e-9, time.perf_counter() - started)
            say(f"  {n}/{len(todo)} runs generated ({rate:.1f} runs/s)")
    write_manifests(study)
    for run in planned:
        run_dir = layout.run_dir(run.run_id)
        report.statuses[read_run_record(run_dir / RUN_JSON).status] += 1
        report.resolved += bool(_read(run_dir / EVAL_JSON)["resolved"])
    report.seconds = time.perf_counter() - started
    report.bytes = _dir_bytes(out_dir)
    write_json(out_dir / RECORD_FILE, {
        **record,
        "plan": summarize(study, planned).line(),
        "runs": len(planned),
        "statuses": dict(sorted(report.statuses.items())),
        "resolved": report.resolved,
        "bytes": report.bytes,
    })
    return report
