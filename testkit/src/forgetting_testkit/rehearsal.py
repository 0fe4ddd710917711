"""The launch rehearsal: the real ``profiles/slurm`` with a site's values, through the real
Snakemake and the real Slurm executor plugin's submission code, each job checked against a
declarative model of the site (``sites/*.yaml``: partitions with architecture, GPUs, CPUs and
memory per node, time limit; the architecture Snakemake runs on).

How submissions are captured: ``snakemake -n`` with the rendered profile resolves every job of
the DAG with the resources Snakemake would hand the executor (default-resources, the rule's
own, set-resources, in Snakemake's order); each job's ``sbatch`` line is then built by the
plugin's own ``get_submit_command`` and ``set_gres_string``
(snakemake_executor_plugin_slurm/submit_string.py, utils.py) and read back. The account and
partition arguments are formatted as the plugin's ``get_account_arg``/``get_partition_arg``
format them (``-A``/``-p``), without their ``sacctmgr``/``sinfo`` look-ups, which would ask the
machine's own Slurm about the model's partitions. Group jobs get the resources Snakemake's
``GroupResources.basic_layered`` gives a group of parallel levels (snakemake/resources.py:
each level's jobs side by side within ``cores``, the levels' runtimes added up).
"""

from __future__ import annotations

import re
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import yaml
import yte

from forgetting_testkit.checkout import ROOT, bin_path, cli_env
from forgetting_testkit.dryrun import PROFILE
from forgetting_testkit.submissions import local_rules, workflow_files

SITES_DIR = Path(__file__).parent / "sites"
_JOB = re.compile(r"^(?P<indent>[ \t]*)(?P<local>local)?(?:rule|checkpoint) (?P<rule>\w+):\s*$")
_GROUP = re.compile(r"^(?:\[[^\]]*\]\s*)?Group job (?P<group>\S+) \(jobs in")


@dataclass(frozen=True)
class Partition:
    name: str
    arch: str
    gpus_per_node: int
    cpus_per_node: int
    mem_mb: int
    time_limit_min: int
    emulates: tuple[str, ...] = ()


@dataclass(frozen=True)
class Site:
    name: str
    snakemake_arch: str
    partitions: dict[str, Partition]
    profile: dict[str, Any]


def site_names() -> list[str]:
    return sorted(p.stem for p in SITES_DIR.glob("*.yaml"))


def load_site(name: str) -> Site:
    raw = yaml.safe_load((SITES_DIR / f"{name}.yaml").read_text())
    parts = {n: Partition(n, p["arch"], p["gpus_per_node"], p["cpus_per_node"], p["mem_mb"], p["time_limit_min"],
                          tuple(p.get("emulates", ()))) for n, p in raw["partitions"].items()}
    return Site(name, raw["snakemake_arch"], parts, dict(raw["profile"]))


#: site values a profile may lack (an older profile states no partition architecture)
_OPTIONAL = {"cpu_partition_arch", "gpu_partition_arch"}


def render_profile(site: Site, dest: Path, source: Path = PROFILE) -> Path:
    """``source``'s profile with the site block's values set as a user sets them (each
    ``x-site`` line's value replaced, its anchor kept); returns the profile directory."""
    text = (source / "config.yaml").read_text()
    for key, value in {"account": "proj", **site.profile}.items():
        literal = f'"{value}"' if isinstance(value, str) else str(value)
        pattern = re.compile(rf"^(\s+{key}:\s*(?:&\w+\s+)?)(\"[^\"]*\"|\S+)", re.MULTILINE)
        found = pattern.search(text)
        if found is None:
            assert key in _OPTIONAL, f"the profile has no x-site line {key}:"
            continue
        text = text[: found.start(2)] + literal + text[found.end(2):]
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "config.yaml").write_text(text)
    return dest


@dataclass
class DryJob:
    rule: str
    local: bool
    group: str | None
    input: tuple[str, ...]
    output: tuple[str, ...]
    resources: dict[str, Any]
    threads: int = 1


def _value(text: str) -> Any:
    return int(text) if re.fullmatch(r"-?\d+", text) else text


def parse_dry_jobs(text: str) -> list[DryJob]:
    jobs: list[DryJob] = []
    group: str | None = None
    for line in text.splitlines():
        g = _GROUP.match(line)
        if g:
            group = g.group("group")
            continue
        m = _JOB.match(line)
        if m:
            if not m.group("indent"):
                group = None
            jobs.append(DryJob(m.group("rule"), bool(m.group("local")), group, (), (), {}))
            continue
        if not jobs:
            continue
        key, _, value = line.strip().partition(": ")
        job = jobs[-1]
        if key in ("input", "output"):
            setattr(job, key, tuple(v for v in value.split(", ") if v))
        elif key == "threads":
            job.threads = int(value)
        elif key == "resources":
            job.resources = {k: _value(v) for k, v in (kv.split("=", 1) for kv in value.split(", ") if "=" in kv)}
    return jobs


class _Resources(dict):
    """A job's resources as the plugin reads them: ``.get`` and attribute access."""

    def __getattr__(self, name: str) -> Any:
        return self.get(name)


@dataclass
class _PluginJob:
    name: str
    resources: _Resources
    threads: int
    group: bool

    def is_group(self) -> bool:
        return self.group


@dataclass
class Submission:
    """One ``sbatch`` the plugin would issue, and what its jobs read and write."""

    name: str
    rules: tuple[str, ...]
    sbatch: str
    input: tuple[str, ...]
    output: tuple[str, ...]
    fields: dict[str, str] = field(default_factory=dict)

    @property
    def partition(self) -> str:
        return self.fields.get("-p", "")

    def number(self, flag: str) -> int:
        value = self.fields.get(flag)
        return int(re.match(r"\d+", value).group()) if value else 0


def sbatch_line(name: str, resources: dict[str, Any], threads: int, group: bool) -> str:
    from snakemake_executor_plugin_slurm.submit_string import get_submit_command
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    job = _PluginJob(name, _Resources(resources), threads, group)
    account, partition = resources.get("slurm_account"), resources.get("slurm_partition")
    params = {"run_uuid": "rehearsal", "slurm_logfile": f".snakemake/slurm_logs/{name}/%j.log",
              "comment_str": f"rule_{name}", "account": f"-A {shlex.quote(str(account))}" if account else "",
              "partition": f"-p {shlex.quote(str(partition))}" if partition else "", "workdir": str(ROOT)}
    settings = SimpleNamespace(requeue=True, no_requeue=False, qos=None, reservation=None)
    return get_submit_command(job, params, settings=settings) + set_gres_string(job)


def read_sbatch(line: str) -> dict[str, str]:
    words = shlex.split(line)
    out: dict[str, str] = {}
    i = 1
    while i < len(words):
        w = words[i]
        if w.startswith("--") and "=" in w:
            k, v = w.split("=", 1)
            out[k] = v
        elif w in ("-p", "-A", "-t", "--mem", "-D", "--job-name", "--output", "--comment", "-C"):
            out[w] = words[i + 1]
            i += 1
        else:
            out[w] = ""
        i += 1
    return out


def _group_resources(members: list[DryJob], cores: int) -> tuple[dict[str, Any], int]:
    """Snakemake's layered group resources for levels of parallel jobs (evaluate, then analyze)."""
    levels: dict[str, list[DryJob]] = {}
    for j in members:
        levels.setdefault(j.rule, []).append(j)
    runtime = mem = threads = 0
    for level in levels.values():
        layer: list[DryJob] = []
        layers = []
        for j in level:
            if layer and sum(x.threads for x in layer) + j.threads > cores:
                layers.append(layer)
                layer = []
            layer.append(j)
        layers.append(layer)
        for lay in layers:
            runtime += max(int(x.resources.get("runtime", 0)) for x in lay)
            mem = max(mem, sum(int(x.resources.get("mem_mb", 0)) for x in lay))
            threads = max(threads, sum(x.threads for x in lay))
    first = members[0].resources
    res = {k: v for k, v in first.items() if k in ("slurm_partition", "slurm_account", "partition_arch")}
    res.update(runtime=runtime, mem_mb=mem)
    return res, threads


def submissions(dry_text: str, cores: int) -> list[Submission]:
    local = local_rules(workflow_files(ROOT))
    jobs = [j for j in parse_dry_jobs(dry_text) if not j.local and j.rule not in local]
    out = []
    for j in jobs:
        if j.group is None:
            line = sbatch_line(j.rule, j.resources, j.threads, False)
            out.append(Submission(j.rule, (j.rule,), line, j.input, j.output, read_sbatch(line)))
    # Snakemake lists each group job's members together; split them at every new header
    for name, member_lists in _group_jobs(dry_text, jobs).items():
        for members in member_lists:
            res, threads = _group_resources(members, cores)
            line = sbatch_line(name, res, threads, True)
            out.append(Submission(f"group {name}", tuple(sorted({m.rule for m in members})), line,
                                  tuple(p for m in members for p in m.input),
                                  tuple(p for m in members for p in m.output), read_sbatch(line)))
    return out


def _group_jobs(text: str, jobs: list[DryJob]) -> dict[str, list[list[DryJob]]]:
    """The members of each group job, in the listing's order."""
    grouped = iter([j for j in jobs if j.group is not None])
    out: dict[str, list[list[DryJob]]] = {}
    current: list[DryJob] | None = None
    for line in text.splitlines():
        g = _GROUP.match(line)
        if g:
            current = []
            out.setdefault(g.group("group"), []).append(current)
            continue
        m = _JOB.match(line)
        if m and m.group("indent") and current is not None and not m.group("local"):
            current.append(next(grouped))
        elif m and not m.group("indent"):
            current = None
    return {k: [lst for lst in v if lst] for k, v in out.items()}


def image_arch_of(subs: list[Submission], site: Site) -> dict[str, str]:
    """Which architecture each image file the DAG builds is for: its builder's partition's."""
    out = {}
    for s in subs:
        part = site.partitions.get(s.partition)
        for path in s.output:
            if path.endswith(".sif") and part is not None:
                out[path] = part.arch
    return out


def check(subs: list[Submission], site: Site, instance_arch: str | None) -> list[str]:
    """Every way a submission would fail or go wrong on ``site``, one line each."""
    problems = []
    built = image_arch_of(subs, site)
    for s in subs:
        part = site.partitions.get(s.partition)
        if part is None:
            problems.append(f"{s.name}: partition {s.partition!r} does not exist on {site.name}")
            continue
        gpus = s.number("--gpus")
        if gpus and not part.gpus_per_node:
            problems.append(f"{s.name}: asks for {gpus} GPU(s) on {part.name}, which has none")
        elif gpus > part.gpus_per_node:
            problems.append(f"{s.name}: asks for {gpus} GPUs, {part.name}'s nodes have {part.gpus_per_node}")
        if s.number("--cpus-per-task") > part.cpus_per_node:
            problems.append(f"{s.name}: {s.number('--cpus-per-task')} CPUs > {part.cpus_per_node} on {part.name}")
        if s.number("--mem") > part.mem_mb:
            problems.append(f"{s.name}: --mem {s.number('--mem')} > {part.mem_mb} on {part.name}")
        if s.number("-t") > part.time_limit_min:
            problems.append(f"{s.name}: -t {s.number('-t')} > {part.name}'s limit {part.time_limit_min} min")
        if part.arch != site.snakemake_arch:
            problems.append(f"{s.name}: runs Snakemake's {site.snakemake_arch} Python and conda env on "
                            f"{part.name} ({part.arch})")
        for path in s.input:
            if path in built and built[path] != part.arch:
                problems.append(f"{s.name}: reads {Path(path).name} built for {built[path]} on {part.name} "
                                f"({part.arch})")
            if "/.pulled/" in path:
                if instance_arch is None:
                    problems.append(f"{s.name}: instance images of no stated architecture (each job its host's)")
                elif instance_arch != part.arch and instance_arch not in part.emulates:
                    problems.append(f"{s.name}: {instance_arch} instance images on {part.name} ({part.arch})")
    return problems


@dataclass
class Rehearsal:
    returncode: int
    log: str
    subs: list[Submission]
    problems: list[str]

    @property
    def workflow_warnings(self) -> list[str]:
        """The placement problems the workflow itself printed before any job."""
        return [ln for ln in self.log.splitlines() if ln.startswith("warning: ") and "placeholder" not in ln]


def rehearse(site: Site, profile_dir: Path, argv: list[str], instance_arch: str | None, cwd: Path = ROOT) -> Rehearsal:
    """``snakemake ARGV -n`` with ``profile_dir`` as the profile (as written: argv names it),
    on a machine of the site's login architecture; the submissions and their problems."""
    cmd = [bin_path("snakemake"), "-n", *argv]
    if "--software-deployment-method" not in argv:
        cmd[2:2] = ["--software-deployment-method", "apptainer"]  # no conda here; no rule declares a container
    proc = subprocess.run(cmd, cwd=cwd, env=cli_env({"FORGETTING_HOST_ARCH": site.snakemake_arch}),
                          capture_output=True, text=True, timeout=600)
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        return Rehearsal(proc.returncode, log, [], [])
    cores = int(yte.process_yaml((profile_dir / "config.yaml").read_text(), require_use_yte=True)["cores"])
    subs = submissions(proc.stdout, cores)
    return Rehearsal(0, log, subs, check(subs, site, instance_arch))


def documented_snakemake(path: Path, prefix: str) -> list[str]:
    """The one command in the fenced blocks of ``path`` that starts with ``prefix``, its
    continuation lines (a trailing backslash) joined, as argv without ``snakemake``."""
    lines = path.read_text().splitlines()
    found = []
    for i, line in enumerate(lines):
        if line.startswith(prefix):
            text = line
            while text.endswith("\\"):
                i += 1
                text = text[:-1] + " " + lines[i].strip()
            found.append(text)
    assert len(set(found)) == 1, (prefix, found)
    return shlex.split(found[0].split(" # ")[0])[1:]


def configured_instance_arch(files: list[Path]) -> str | None:
    """``evaluation.instance_images.architecture`` as the config files state it (the last wins)."""
    arch = None
    for f in files:
        cfg = yaml.safe_load(f.read_text()) or {}
        arch = ((cfg.get("evaluation") or {}).get("instance_images") or {}).get("architecture", arch)
    return arch


# --- held submissions to the real single-node Slurm ---------------------------------------------
# scripts/setup-slurm.sh gives that Slurm the site models' partitions (gh200, cpu, gpu) on nodes of
# their size that never register: `sbatch -H` takes a job there (or refuses it: a partition that
# does not exist, a time limit past the partition's), Slurm parses its options itself, and
# `scontrol show job` reads back what it recorded; the job never runs.

_UNITS = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}


def slurm_minutes(text: str) -> int:
    """Slurm's TimeLimit (``[D-]HH:MM:SS``, ``MM:SS``) in minutes."""
    days, _, rest = text.rpartition("-")
    parts = [int(p) for p in rest.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0)
    h, m, s = parts
    return (int(days or 0) * 24 + h) * 60 + m + (1 if s else 0)


def slurm_mb(text: str) -> int:
    m = re.fullmatch(r"([\d.]+)([KMGT]?)", text)
    assert m, text
    return round(float(m.group(1)) * _UNITS[m.group(2) or "M"])


def slurm_gpus(fields: dict[str, str]) -> int:
    for key in ("TresPerJob", "TresPerNode", "TresPerTask"):
        m = re.search(r"gpu(?::\w+)?:(\d+)", fields.get(key, ""))
        if m:
            return int(m.group(1))
    return 0


@dataclass
class Held:
    """What Slurm recorded for one held submission."""

    sub: Submission
    job_id: int | None
    error: str
    partition: str = ""
    mem_mb: int = 0
    minutes: int = 0
    cpus: int = 0
    gpus: int = 0


def _shape(s: Submission) -> tuple:
    return (s.rules, s.partition, s.fields.get("--mem"), s.fields.get("-t"), s.fields.get("--cpus-per-task"),
            s.fields.get("--gpus"), s.fields.get("--gres"))


def submit_held(subs: list[Submission], workdir: Path) -> list[Held]:
    """Each distinct submission (rule and resources) through the real ``sbatch -H``, as the plugin
    would issue it (its line, with the log and work directory under ``workdir``), read back with
    ``scontrol show job -o``; every job is cancelled again."""
    seen: dict[tuple, Submission] = {}
    for s in subs:
        seen.setdefault(_shape(s), s)
    out: list[Held] = []
    try:
        for s in seen.values():
            words = shlex.split(s.sbatch)
            for flag, value in (("--output", str(workdir / "%j.log")), ("-D", str(workdir))):
                if flag in words:
                    words[words.index(flag) + 1] = value
            proc = subprocess.run([*words, "-H", "--wrap", "true"], capture_output=True, text=True, timeout=60)
            if proc.returncode != 0:
                out.append(Held(s, None, proc.stderr.strip()))
                continue
            job = int(proc.stdout.strip().split(";")[0])
            show = subprocess.run(["scontrol", "show", "job", "-o", str(job)], capture_output=True, text=True,
                                  timeout=60, check=True).stdout
            f = dict(w.split("=", 1) for w in show.split() if "=" in w)
            out.append(Held(s, job, "", f["Partition"], slurm_mb(f.get("MinMemoryNode", "0")),
                            slurm_minutes(f["TimeLimit"]), int(f["NumCPUs"]), slurm_gpus(f)))
    finally:
        ids = [str(h.job_id) for h in out if h.job_id is not None]
        if ids:
            subprocess.run(["scancel", *ids], capture_output=True, timeout=60)
    return out


def profile_resources(profile_dir: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The profile's ``default-resources`` and ``set-resources`` (yte rendered)."""
    cfg = yte.process_yaml((profile_dir / "config.yaml").read_text(), require_use_yte=True)
    return dict(cfg.get("default-resources") or {}), {k: dict(v) for k, v in (cfg.get("set-resources") or {}).items()}


def held_problems(held: list[Held], profile_dir: Path, site: Site) -> list[str]:
    """Every held job that Slurm refused, or that Slurm recorded elsewhere or smaller than the
    profile asks for its rule(s), or that does not fit its partition on ``site``."""
    default, per_rule = profile_resources(profile_dir)
    problems = []
    for h in held:
        s = h.sub
        if h.job_id is None:
            problems.append(f"{s.name}: sbatch refused it: {h.error}")
            continue
        wanted = [{**default, **per_rule.get(r, {})} for r in s.rules]
        for key in ("slurm_partition",):
            parts = {w[key] for w in wanted}
            if h.partition not in parts:
                problems.append(f"{s.name}: Slurm has it on {h.partition}, the profile says {sorted(parts)}")
        mem = max(int(per_rule.get(r, {}).get("mem_mb", 0)) for r in s.rules)
        if h.mem_mb < mem:
            problems.append(f"{s.name}: Slurm has --mem {h.mem_mb} MB, the profile asks {mem}")
        minutes = sum(int(per_rule.get(r, {}).get("runtime", 0)) for r in s.rules)
        if h.minutes < minutes:
            problems.append(f"{s.name}: Slurm has a limit of {h.minutes} min, the profile asks {minutes}")
        gpus = max(int(per_rule.get(r, {}).get("gpu", 0)) for r in s.rules)
        if h.gpus != gpus:
            problems.append(f"{s.name}: Slurm has {h.gpus} GPU(s), the profile asks {gpus}")
        part = site.partitions.get(h.partition)
        if part is None:
            problems.append(f"{s.name}: partition {h.partition} is not one of {site.name}'s")
            continue
        if h.gpus > part.gpus_per_node:
            problems.append(f"{s.name}: {h.gpus} GPU(s) on {part.name}, whose nodes have {part.gpus_per_node}")
        if h.cpus > part.cpus_per_node or h.mem_mb > part.mem_mb or h.minutes > part.time_limit_min:
            problems.append(f"{s.name}: {h.cpus} CPUs, {h.mem_mb} MB, {h.minutes} min exceed {part.name}'s "
                            f"{part.cpus_per_node}, {part.mem_mb}, {part.time_limit_min}")
    return problems
