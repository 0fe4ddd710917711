"""Task lists: which instances a study runs, checked against the dataset's known ids.

The paper ran a fixed 100-instance subset of SWE-bench Verified (the one AgentDiet used).
That list is not published; :func:`stratified_sample` draws the documented stand-in shipped
in ``resources/tasks/swe-bench-verified-100.txt`` (see ``resources/tasks/README.md``). A
user with the paper's list points ``tasks.ids_file`` at it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from forgetting.demo.tasks import demo_task_ids
from forgetting.foundation.errors import ConfigError, ResourceError
from forgetting.foundation.inputs import read_text
from forgetting.foundation.seeds import text_hex


def read_id_file(path: Path, *, key: str) -> list[str]:
    """One id per line; blank lines and ``#`` comments are skipped."""
    if not path.is_file() and not path.is_dir():
        raise ConfigError(f"{key}: file not found: {path}")
    ids = []
    for line in read_text(path, what=f"{key} file", error=ConfigError).splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            ids.append(line)
    return ids


def known_task_ids(cfg: Mapping[str, Any], *, root: Path, source: str) -> set[str]:
    """Every id the configured dataset holds."""
    dataset = cfg["dataset"]
    if dataset["kind"] == "demo":
        instances = dataset["instances"]
        path = Path(instances) if Path(instances).is_absolute() else root / instances
        if not path.is_dir():
            raise ConfigError(f"{source}: dataset.instances: demo task directory not found: {path}")
        return set(demo_task_ids(path))
    known = dataset.get("known_ids")
    if not known:
        raise ConfigError(f"{source}: dataset.known_ids: required for dataset.kind swebench (a file of valid ids)")
    path = Path(known) if Path(known).is_absolute() else root / known
    return set(read_id_file(path, key=f"{source}: dataset.known_ids"))


def load_task_ids(cfg: Mapping[str, Any], *, root: Path, source: str) -> list[str]:
    """The configured task ids, in file order; duplicates and unknown ids are errors."""
    tasks = cfg["tasks"]
    if "ids" in tasks and "ids_file" in tasks:
        raise ConfigError(f"{source}: tasks: give either ids or ids_file, not both")
    if "ids" in tasks:
        ids, key = list(tasks["ids"]), "tasks.ids"
    elif "ids_file" in tasks:
        path = Path(tasks["ids_file"])
        path = path if path.is_absolute() else root / path
        ids, key = read_id_file(path, key=f"{source}: tasks.ids_file"), f"tasks.ids_file ({path})"
    else:
        raise ConfigError(f"{source}: tasks: give ids (a list) or ids_file (a file with one id per line)")
    if not ids:
        raise ConfigError(f"{source}: {key}: no task ids")
    dupes = sorted(t for t, n in Counter(ids).items() if n > 1)
    if dupes:
        raise ConfigError(f"{source}: {key}: duplicate task id(s): {', '.join(dupes)}")
    known = known_task_ids(cfg, root=root, source=source)
    unknown = [t for t in ids if t not in known]
    if unknown:
        more = f" (and {len(unknown) - 3} more)" if len(unknown) > 3 else ""
        raise ConfigError(
            f"{source}: {key}: unknown task id(s) {', '.join(unknown[:3])}{more}, "
            f"not in the {cfg['dataset']['kind']} dataset"
        )
    return ids


def repository_of(instance_id: str) -> str:
    """``django__django-11099`` → ``django/django``."""
    head, sep, _ = instance_id.rpartition("-")
    if not sep or "__" not in head:
        raise ResourceError(f"{instance_id!r} is not a SWE-bench instance id (owner__repo-number)")
    owner, repo = head.split("__", 1)
    return f"{owner}/{repo}"


def _largest_remainder(counts: Mapping[str, int], n: int) -> dict[str, int]:
    total = sum(counts.values())
    quotas = {k: n * c / total for k, c in counts.items()}
    alloc = {k: int(q) for k, q in quotas.items()}
    rest = n - sum(alloc.values())
    # ties broken by repository name, so the allocation is deterministic
    order = sorted(counts, key=lambda k: (-(quotas[k] - alloc[k]), k))
    for k in order[:rest]:
        alloc[k] += 1
    return alloc


def _rank(seed: int, instance_id: str) -> str:
    return text_hex(f"{seed}:{instance_id}")


def stratified_sample(ids: Iterable[str], n: int, seed: int) -> list[str]:
    """A seeded sample of ``n`` ids, stratified by repository (largest-remainder allocation).

    Within a repository the ids with the smallest ``sha256(seed:id)`` are taken, so the
    sample does not depend on the order of ``ids`` or on any library's RNG. Returned sorted.
    """
    pool = sorted(set(ids))
    if n > len(pool):
        raise ValueError(f"cannot sample {n} of {len(pool)} ids")
    by_repo: dict[str, list[str]] = {}
    for i in pool:
        by_repo.setdefault(repository_of(i), []).append(i)
    alloc = _largest_remainder({r: len(v) for r, v in by_repo.items()}, n)
    out: list[str] = []
    for repo, members in by_repo.items():
        out.extend(sorted(members, key=lambda i: _rank(seed, i))[: alloc[repo]])
    return sorted(out)


def per_repository(ids: Sequence[str]) -> dict[str, int]:
    return dict(sorted(Counter(repository_of(i) for i in ids).items(), key=lambda kv: (-kv[1], kv[0])))
