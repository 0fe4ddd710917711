"""Every command line shown in README.md, config/README.md and docs/*.md runs as written.

The command lines are the lines of the fenced ``bash``/``sh``/``shell``/``console`` blocks,
also those indented under a list item (continuation lines joined, comments dropped,
``VAR=value`` prefixes taken as environment, a line of assignments only as shell variables of
the block's later lines); an untagged block may not hold one. Each line is classified by its
program, and each class is checked as far as it can run here in seconds:

* ``forgetting plan`` runs for real, and prints what the line's comment says it prints;
* every other ``forgetting`` / ``forgetting-synth`` line is parsed by the real command line
  parser and its inputs are checked: the study config loads, ``--run-id`` / ``--batch`` are in
  the study's plan, ``--pricing`` profiles and ``--deletion`` configurations exist; the small
  synthetic study (``--runs 60``) is generated for real, the other lines use it;
* ``snakemake`` lines run from the checkout exactly as written, except those declared a dry run
  (``-n``) with the reason (:data:`DRY_RUN`, and every line of the Slurm profile); their targets
  and rule names must be rules of the workflow. A line that needs a finished study
  (:data:`NEEDS_RESULTS`) must stop only at that study's missing datasets, one that regenerates
  (:data:`NEEDS_RUNS`) with the one line naming the missing run directories;
* ``scripts/*`` exist, are executable and pass ``bash -n``;
* ``python -m pytest …`` collects at least one test; ``python -c`` compiles; ``python -m
  MODULE`` imports and accepts every option the line gives (its ``--help``);
* ``srun …`` (:data:`WRAPPERS`) cannot allocate here: its partitions must be the profile's
  x-site ones, and the command it runs is classified and checked as its own line;
  ``export NAME=value …`` must only set variables;
* external tools that cannot run here are listed in :data:`EXTERNAL` with the reason, and
  the repository files they name must exist.

A line no class accepts fails the test, so a new command line is classified when it is added.
Placeholders (``<task>``, ``$SCRATCH``) are replaced from :data:`SUBSTITUTIONS`; one left in
a line that runs fails. Every task id the docs name is one of the study's tasks (or a demo
task), since the one-task examples must run."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import shlex
import shutil
import stat
import subprocess
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from forgetting import cli
from forgetting.cost.pricing import load_profiles
from forgetting.deletion.names import parse_configuration_name
from forgetting.deletion.policy import PolicyContext
from forgetting.study.config import load_study, study_from_mapping
from forgetting.study.plan import plan_batches, plan_runs
from forgetting_testkit.checkout import ROOT, bin_path, cli_env
from forgetting_testkit.synth import cli as synth_cli

#: what the policies read of a study that gives no agent or pricing section (the schema's)
POLICY_DEFAULTS = PolicyContext.from_parts()

pytestmark = pytest.mark.slow

DOCS = ("README.md", "config/README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")))
SHELL = {"bash", "sh", "shell", "console"}
STUDY_TASKS = set((ROOT / "resources/tasks/swe-bench-verified-100.txt").read_text().split())
DEMO_TASKS = set((ROOT / "resources/demo/tasks.txt").read_text().split())
#: one of the study's tasks, for placeholders
A_TASK = sorted(STUDY_TASKS)[0]

#: what a placeholder stands for when the line is run or checked ({tmp}: a scratch directory)
SUBSTITUTIONS = {
    "<task>": "demo__confkit-1",
    "<id>": A_TASK,
    "<timeout_s>": "300",
    "<run id with / → .>": f"mini.baseline.{A_TASK}.1",
    "$SCRATCH": "{tmp}/scratch",
    "~/trae-agent": "{tmp}/trae-agent",
    "/scratch/synth-paper": "{tmp}/synth",  # the small synthetic study stands in for the big one
    "/tmp/synth-small": "{tmp}/synth",
}
#: lines that are checked, not run, and why (forgetting / forgetting-synth lines run only if listed in RUNS)
RUNS = {
    "forgetting plan",
    "forgetting-synth config/config.yaml --out /tmp/synth-small --runs 60",
}
#: snakemake lines that need a finished study: the dry run must stop at its missing datasets only
#: (they run exactly as written, no ``-n`` added: a finished study's command stops at once here)
NEEDS_RESULTS = {
    "snakemake --cores 2 analysis --allowed-rules stats tables figures analysis":
        "the tables and figures of a finished study: its results/datasets/",
    "snakemake --cores 2 analysis --allowed-rules stats tables figures analysis --report results/report.html":
        "the report of a finished study: its results/datasets/",
}
#: snakemake lines that regenerate from run outputs the checkout may not have: without them the
#: dry run must stop at once with the one line naming what is missing (forgetting.workflow)
NEEDS_RUNS = {
    "snakemake --profile profiles/local --config regenerate=true": "the demo's run directories",
    "snakemake --cores 2 --config regenerate=true": "the study's run directories (a replication package)",
    "snakemake --cores 2 --config regenerate=true --report results/report.html": "the study's run directories",
}
#: the snakemake lines of the docs that are dry-run (``-n``) rather than run as written, and why
#: (every line of the Slurm profile as well: :func:`dry_run_reason`); every other snakemake line
#: runs exactly as written
DRY_RUN = {
    "snakemake --profile profiles/local --configfile config/demo.yaml config/demo-endpoint.yaml":
        "runs the whole demo through an endpoint (minutes): tests/workflow/test_demo_endpoint.py runs it",
    "snakemake --profile profiles/local --config regenerate=true":
        "regenerates the demo's tables in this checkout wherever a demo has run here",
    "snakemake --cores 2 --configfile /scratch/synth-paper/study.yaml --config regenerate=true":
        "regenerates a 60-run synthetic study (minutes): tests/workflow regenerate end to end",
}
SLURM_DRY_RUN = "submits to the Slurm cluster of profiles/slurm (the paper's study or a part of it)"


def dry_run_reason(line: str) -> str | None:
    """Why the snakemake ``line`` (as the docs show it) is dry-run; None: it runs as written."""
    if "profiles/slurm" in line.split():
        return SLURM_DRY_RUN
    return DRY_RUN.get(line)


#: programs that cannot run here, and why; their lines are checked for the repository files they name
EXTERNAL = {
    "apptainer": "Apptainer is a cluster tool, not installed here (the tests use fakes/apptainer.py); "
                 "its lines build, pull or run cluster images",
    "curl": "talks to a running deletion proxy (docs/proxy.md starts one by hand against a model server)",
    "sbatch": "submits route C's model server job to Slurm (docs/cluster.md); no Slurm here",
}
#: srun options that take no value (every other option takes one, as ``-p X`` or ``--time=30``)
SRUN_FLAGS = {"--pty", "--exclusive", "-l", "--label", "-u", "--unbuffered"}
#: programs that run another command where it cannot run here, and why; the command they run
#: is classified and checked as its own line
WRAPPERS = {
    "srun": "needs an allocation on the cluster's partitions (Slurm waits for one); its -p must be "
            "one of profiles/slurm's x-site partitions",
}
_OPERATORS = {">", ">>", "|", "&&", ";", "2>&1", "<"}


@dataclass(frozen=True)
class DocCommand:
    source: str  # FILE:LINE
    shown: str  # the command as shown (continuations joined, comment dropped)
    comment: str
    env: dict[str, str] = field(default_factory=dict)
    #: shell variables an earlier line of the block set (``ARCH=x86_64`` alone on a line)
    variables: dict[str, str] = field(default_factory=dict)

    def text(self, tmp: Path) -> str:
        """The line as it runs: the block's variables, then the placeholders, replaced."""
        line = self.shown
        for key, value in self.variables.items():
            line = re.sub(rf"\$(?:{key}\b|\{{{key}\}})", value, line)
        return substitute(line, tmp)

    def argv(self, tmp: Path) -> list[str]:
        return _words(self.text(tmp))[0]

    @property
    def program(self) -> str:
        return _words(self.shown)[0][0]


def substitute(text: str, tmp: Path) -> str:
    for placeholder, value in SUBSTITUTIONS.items():
        text = text.replace(placeholder, value.format(tmp=tmp))
    return text


def _split_comment(line: str) -> tuple[str, str]:
    """(code, comment) of a shell line: a ``#`` outside quotes that starts a word."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i + 1 :].strip()
    return line.rstrip(), ""


def _words(code: str) -> tuple[list[str], list[str]]:
    """(argv, what follows a shell operator) of a command."""
    words = shlex.split(code)
    for i, w in enumerate(words):
        if w in _OPERATORS:
            return words[:i], words[i:]
    return words, []


def fenced_blocks(rel: str) -> list[tuple[str, int, list[str]]]:
    """(language, line number of the first body line, body lines) of each fenced block, also
    one indented under a list item (its body lines lose the fence's indentation)."""
    out, lang, start, body, indent = [], None, 0, [], 0
    for n, line in enumerate((ROOT / rel).read_text().splitlines(), start=1):
        stripped = line.lstrip(" ")
        if stripped.startswith("```") and (lang is None or stripped.rstrip() == "```"):
            if lang is None:
                lang, start, body, indent = stripped[3:].strip().split(" ")[0], n + 1, [], len(line) - len(stripped)
            else:
                out.append((lang, start, body))
                lang = None
        elif lang is not None:
            body.append(line[indent:] if not line[:indent].strip() else line.lstrip(" "))
    return out


def doc_commands(docs: tuple[str, ...] = DOCS) -> list[DocCommand]:
    """The command lines of ``docs`` (paths relative to the checkout, or absolute)."""
    found = []
    for rel in docs:
        for lang, start, body in fenced_blocks(rel):
            if lang not in SHELL:
                continue
            pending, first, variables = "", 0, {}
            for k, raw in enumerate(body):
                line = raw.removeprefix("$ ") if lang == "console" else raw
                code, comment = _split_comment(line)
                if not pending:
                    first = start + k
                if code.endswith("\\"):
                    pending += code[:-1].rstrip() + " "
                    continue
                code, pending = (pending + code.strip()).strip(), ""
                if not code:
                    continue
                env = {}
                words = code.split()
                while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S+", words[0]):
                    key, _, value = words.pop(0).partition("=")
                    env[key] = value
                if not words:  # assignments only: shell variables for the block's later lines
                    variables.update(env)
                    continue
                found.append(DocCommand(f"{rel}:{first}", " ".join(words), comment, env, dict(variables)))
    return found


COMMANDS = doc_commands()


# ---------------------------------------------------------------------------- classes
def _srun_split(cmd: DocCommand) -> tuple[list[str], list[str]]:
    """(srun's own options, the command it runs on the allocation) of an ``srun`` line."""
    words = _words(cmd.shown)[0]
    i = 1
    while i < len(words) and words[i].startswith("-"):
        i += 1 if "=" in words[i] or words[i] in SRUN_FLAGS else 2
    assert i < len(words), f"{cmd.source}: srun without a command"
    return words[1:i], words[i:]


def srun_inner(cmd: DocCommand) -> DocCommand:
    return DocCommand(cmd.source, shlex.join(_srun_split(cmd)[1]), cmd.comment, cmd.env, cmd.variables)


def srun_partitions(cmd: DocCommand) -> list[str]:
    options = _srun_split(cmd)[0]
    return [options[i + 1] for i, w in enumerate(options) if w in ("-p", "--partition")] + [
        w.split("=", 1)[1] for w in options if w.startswith("--partition=")]


def classify(cmd: DocCommand) -> str:
    prog = cmd.program
    words = _words(cmd.shown)[0]
    if prog in WRAPPERS:
        return f"{prog}: {classify(srun_inner(cmd))}"
    if prog == "export":
        return "shell (export)"
    if prog in ("forgetting", "forgetting-synth"):
        runs = any(cmd.shown == r or cmd.shown.startswith(r + " ") for r in RUNS)
        return f"{prog} ({'run' if runs else 'checked'})"
    if prog == "snakemake":
        return "snakemake (as written, or a declared dry run)"
    if prog.startswith(("scripts/", "./scripts/")):
        return "script (bash -n)"
    if prog in ("python", "python3"):
        if words[1:3] == ["-m", "pytest"]:
            return "python -m pytest (collected)"
        if words[1] == "-c":
            return "python -c (compiled)"
        if words[1] == "-m":
            return "python -m MODULE (options against --help)"
    if prog in EXTERNAL:
        return f"external: {prog}"
    return "unclassified"


def test_every_command_line_is_classified():
    counts = Counter(classify(c) for c in COMMANDS)
    unclassified = [f"{c.source}: {c.shown}" for c in COMMANDS if "unclassified" in classify(c)]
    assert not unclassified, "command lines no class of this test checks:\n" + "\n".join(unclassified)
    assert counts["snakemake (as written, or a declared dry run)"] and counts["forgetting (run)"]
    assert counts["script (bash -n)"]


def test_no_command_hides_in_an_untagged_block():
    known = {"forgetting", "forgetting-synth", "snakemake", "python", "python3", "srun", "export", *EXTERNAL} | {
        "./scripts/demo", "./scripts/test"}
    hidden = []
    for rel in DOCS:
        for lang, start, body in fenced_blocks(rel):
            if lang:
                continue
            for k, line in enumerate(body):
                word = line.split(" ", 1)[0]
                if word in known or word.startswith(("scripts/", "./scripts/")):
                    hidden.append(f"{rel}:{start + k}: {line}")
    assert not hidden, "tag these blocks `bash` so their commands are checked:\n" + "\n".join(hidden)


def test_every_task_id_the_docs_name_is_a_task_of_the_study():
    ids = re.compile(r"\b[a-z][a-z0-9_.-]*__[a-z0-9_.-]+-\d+\b")
    images = re.compile(r"sweb\.eval\.(?:[a-z0-9_]+|\$\w+|\$\{\w+\})\.([a-z0-9_.-]+)_1776_([a-z0-9_.-]+-\d+)")
    wrong = []
    for rel in DOCS:
        text = (ROOT / rel).read_text()
        named = set(ids.findall(text)) | {f"{a}__{b}" for a, b in images.findall(text)}
        for task in sorted(named):
            known = DEMO_TASKS if task.startswith("demo__") else STUDY_TASKS
            if task not in known:
                wrong.append(f"{rel}: {task}")
    assert not wrong, "task ids that are not tasks of the study (resources/tasks/swe-bench-verified-100.txt) " \
                      "or of the demo (resources/demo/tasks.txt):\n" + "\n".join(wrong)


# ---------------------------------------------------------------------------- running them
def _run(argv: list[str], env: dict[str, str] | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=ROOT, env=cli_env(env), capture_output=True, text=True, timeout=timeout)


def _rules() -> set[str]:
    text = "\n".join(p.read_text() for p in [ROOT / "Snakefile", *(ROOT / "workflow/rules").glob("*.smk")])
    return set(re.findall(r"^(?:local)?rule (\w+):", text, re.MULTILINE))


def _snakemake_argv(words: list[str], line: str) -> list[str]:
    """The line's argv as it is run: exactly as written unless :func:`dry_run_reason` names why
    not; then dry-run (``-n``), its profile's software deployment swapped for Apptainer's where
    conda is missing."""
    argv = [bin_path("snakemake"), *words[1:]]
    if dry_run_reason(line) is None:
        return argv
    if "-n" not in argv:
        argv.append("-n")
    if shutil.which("conda") is None:  # as forgetting_testkit.dryrun: same DAG, nothing deployed
        argv += ["--software-deployment-method", "apptainer"]
    return argv


def _sets_cores(words: list[str]) -> bool:
    """Whether a snakemake line says how many cores to use, as it must to run (a dry run does
    not ask): ``--cores``/``-c``/``--jobs``/``-j``, or a profile whose config sets them."""
    for i, w in enumerate(words):
        if w in ("--cores", "-c", "--jobs", "-j") or re.match(r"^(--cores=|--jobs=|-c\d|-j\d)", w):
            return True
        if w == "--profile" and i + 1 < len(words):
            profile = yaml.safe_load((ROOT / words[i + 1] / "config.yaml").read_text()) or {}
            if any(k in profile for k in ("cores", "jobs", "executor")):
                return True
    return False


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    """A scratch directory holding the small synthetic study (made by the docs' own line)."""
    tmp = tmp_path_factory.mktemp("doc-commands")
    (synth,) = [c for c in COMMANDS if c.shown.startswith("forgetting-synth") and "--runs 60" in c.shown]
    done = _run([bin_path("forgetting-synth"), *synth.argv(tmp)[1:]], timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return tmp


@pytest.fixture(scope="module")
def dry_runs(scratch) -> dict[str, subprocess.CompletedProcess]:
    """Every distinct snakemake line, dry-run (four at a time: each mostly waits)."""
    shown = {substitute(c.shown, scratch): c.shown for c in COMMANDS if c.program == "snakemake"}
    lines = sorted(shown)
    with ThreadPoolExecutor(4) as pool:
        done = pool.map(lambda line: _run(_snakemake_argv(_words(line)[0], shown[line])), lines)
    return dict(zip(lines, done, strict=True))


def _snakemake(cmd: DocCommand, scratch: Path, dry_runs: dict[str, subprocess.CompletedProcess]) -> None:
    words = cmd.argv(scratch)
    rules, names, i = _rules(), [], 1
    while i < len(words):
        w = words[i]
        if w in ("--allowed-rules", "--forcerun", "--until", "--omit-from"):
            i += 1
            while i < len(words) and not words[i].startswith("-"):
                names.append(words[i])
                i += 1
            continue
        if w in ("--config", "--configfile", "--resources", "--set-threads", "--set-resources"):  # one or more values
            i += 1
            while i < len(words) and not words[i].startswith("-"):
                i += 1
            continue
        if w.startswith("-"):
            i += 2 if w in ("--profile", "--cores", "--report", "--workflow-profile",
                            "--software-deployment-method") else 1
            continue
        names.append(w)  # a target
        i += 1
    assert set(names) <= rules, f"not rules of the workflow: {sorted(set(names) - rules)}"
    assert _sets_cores(words), f"{cmd.shown}: snakemake runs nothing without --cores (or a profile that sets them)"
    done = dry_runs[substitute(cmd.shown, scratch)]
    if cmd.shown in NEEDS_RESULTS:
        missing = re.findall(r"affected files:\n((?:\s+\S+\n?)+)", done.stdout + done.stderr)
        missing = [f for block in missing for f in block.split()]
        assert done.returncode != 0 and "MissingInputException" in done.stdout + done.stderr
        assert missing and all(m.startswith("results/datasets/") for m in missing), missing
        return
    if cmd.shown in NEEDS_RUNS and done.returncode != 0:
        errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and errors[0].startswith("error: regenerate=true: none of the "), done.stderr[-3000:]
        assert "replication package" in errors[0]
        return
    assert dry_run_reason(cmd.shown) is not None, f"{cmd.shown}: run as written, it must be checked for what it does"
    assert done.returncode == 0, (done.stderr + done.stdout)[-3000:]
    assert "This was a dry-run" in done.stdout + done.stderr


def test_every_declared_dry_run_is_a_line_of_the_docs_and_every_other_line_runs_as_written():
    lines = {c.shown for c in COMMANDS if c.program == "snakemake"}
    assert set(DRY_RUN) <= lines, f"declared dry runs no doc shows: {sorted(set(DRY_RUN) - lines)}"
    assert not set(DRY_RUN) & set(NEEDS_RESULTS)
    as_written = sorted(line for line in lines if dry_run_reason(line) is None)
    assert as_written and set(as_written) <= set(NEEDS_RESULTS) | set(NEEDS_RUNS), as_written
    for line in as_written:
        assert _snakemake_argv(_words(line)[0], line) == [bin_path("snakemake"), *_words(line)[0][1:]]


def _forgetting(cmd: DocCommand, scratch: Path) -> None:
    words = cmd.argv(scratch)
    if cmd.program == "forgetting-synth":
        parser = synth_cli.build_parser()
        try:
            parser.parse_args(words[1:])
        except SystemExit as exc:
            pytest.fail(f"forgetting-synth does not accept {words[1:]} (exit {exc.code})")
        load_study(words[1])  # the study it synthesizes
        return  # the small one ran in the `scratch` fixture
    try:
        args = cli.build_parser().parse_args(words[1:])
    except SystemExit as exc:
        pytest.fail(f"forgetting does not accept {words[1:]} (exit {exc.code})")
    if args.command == "plan":  # runs for real; a comment that shows its output line is that line
        done = _run([bin_path("forgetting"), *words[1:]])
        assert done.returncode == 0, done.stderr
        said = cmd.comment.split("…")[0].strip().rstrip("·").strip()
        if said[:1].isdigit():
            assert done.stdout.startswith(said), (said, done.stdout[:500])
        return
    if isinstance(getattr(args, "config", None), list):
        study = load_study(args.config)
        if getattr(args, "run_id", None) and args.command == "run":
            assert args.run_id in {r.run_id for r in plan_runs(study)}, f"{args.run_id}: not a run of the plan"
        if getattr(args, "batch", None):
            assert args.batch in {b.key for b in plan_batches(study)}, f"{args.batch}: not a batch of the plan"
    if getattr(args, "pricing", None):
        load_profiles(getattr(args, "pricing_dir", None), args.pricing)
    if getattr(args, "deletion", None):
        parse_configuration_name(args.deletion, "--deletion", context=POLICY_DEFAULTS)


def _script(cmd: DocCommand, scratch: Path) -> None:
    path = ROOT / cmd.program.removeprefix("./")
    assert path.is_file(), f"{path} does not exist"
    assert path.stat().st_mode & stat.S_IXUSR, f"{path} is not executable"
    done = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def _python(cmd: DocCommand, scratch: Path) -> None:
    words = cmd.argv(scratch)
    if words[1:3] == ["-m", "pytest"]:
        done = _run([bin_path("python"), *words[1:], "--collect-only", "-q", "-p", "no:cacheprovider"],
                    env={**cmd.env, "FORGETTING_TRAE_CLI": ""} if "FORGETTING_TRAE_CLI" in cmd.env else cmd.env)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        collected = re.search(r"(\d+)(?:/\d+)? tests? (?:collected|selected)", done.stdout) or re.search(
            r"^(\d+) tests? collected", done.stdout, re.MULTILINE)
        assert collected and int(collected.group(1)) > 0, done.stdout[-1000:]
    elif words[1] == "-c":
        compile(words[2], cmd.source, "exec")
    else:
        module = words[2]
        assert importlib.util.find_spec(module) is not None, f"{module}: not importable"
        done = _run([bin_path("python"), "-m", module, "--help"], timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        options = {w.split("=")[0] for w in words[3:] if w.startswith("--")}
        unknown = sorted(o for o in options if o not in done.stdout)
        assert not unknown, f"{module} has no options {unknown}"


def _external(cmd: DocCommand, scratch: Path) -> None:
    for w in _words(cmd.shown)[0][1:]:
        if re.fullmatch(r"(containers|scripts|profiles|config|resources|workflow)/[\w./-]+", w):
            assert (ROOT / w).exists(), f"{w}: no such file in the repository"


def _export(cmd: DocCommand, scratch: Path) -> None:
    words = _words(cmd.shown)[0][1:]
    assert words and all(re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", w) for w in words), f"not NAME=value: {words}"


def _site_partitions() -> set[str]:
    site = yaml.safe_load((ROOT / "profiles/slurm/config.yaml").read_text())["x-site"]
    return {site["cpu_partition"], site["gpu_partition"]}


CHECKS: dict[str, Callable[..., None]] = {
    "forgetting": _forgetting,
    "forgetting-synth": _forgetting,
    "script": _script,
    "python": _python,
    "external": _external,
    "shell": _export,
}


@pytest.mark.parametrize("cmd", COMMANDS, ids=[c.source for c in COMMANDS])
def test_the_command_line_runs_as_written(cmd, scratch, request):
    kind = classify(cmd)
    assert "unclassified" not in kind, f"{cmd.source}: {cmd.shown}"
    if cmd.program in WRAPPERS:  # the partitions are the profile's (the user edits both alike)
        assert srun_partitions(cmd) and set(srun_partitions(cmd)) <= _site_partitions(), (
            f"{cmd.source}: srun -p {srun_partitions(cmd)}: not the x-site partitions of profiles/slurm")
        cmd, kind = srun_inner(cmd), kind.removeprefix("srun: ")
    if kind.startswith("snakemake"):
        _snakemake(cmd, scratch, request.getfixturevalue("dry_runs"))
        return
    if "<" in substitute(cmd.shown, scratch) and re.search(r"<[^>\s]+>", substitute(cmd.shown, scratch)):
        pytest.fail(f"{cmd.source}: a placeholder without a substitution: {cmd.shown}")
    CHECKS[kind.split(" ")[0].rstrip(":")](cmd, scratch)


# ---------------------------------------------------------------------------- other blocks
def test_python_blocks_parse_and_import_what_exists():
    for rel in DOCS:
        for lang, start, body in fenced_blocks(rel):
            if lang != "python":
                continue
            tree = ast.parse("\n".join(body), f"{rel}:{start}")
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("forgetting"):
                    module = importlib.import_module(node.module)
                    for alias in node.names:
                        assert hasattr(module, alias.name), f"{rel}:{start}: {node.module} has no {alias.name}"


def test_yaml_blocks_parse_and_config_snippets_load():
    base = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    for rel in DOCS:
        for lang, start, body in fenced_blocks(rel):
            if lang != "yaml":
                continue
            data = yaml.safe_load("\n".join(body))
            assert isinstance(data, dict), f"{rel}:{start}"
            if rel == "config/README.md":  # a piece of the study's config: it loads as one
                study_from_mapping({**base, **data}, source=f"{rel}:{start}", root=ROOT)


# ---------------------------------------------------------------------------- the test can fail
BROKEN_DOC = """\
# A page with broken command lines

```bash
forgetting plan config/no-such-study.yaml                       # a config that is not there
forgetting label results/runs/mini --no-such-option             # an option the command lacks
forgetting run config/demo.yaml --run-id mini/baseline/demo__nope-1/1   # a run not in the plan
snakemake --profile profiles/slurm no_such_rule                 # a target that is no rule
scripts/no-such-script.sh                                       # a script that is not there
python -m pytest tests/no_such_test.py                          # collects nothing
srun -p some-other-partition forgetting plan config/config.yaml # not the profile's partition
apptainer build images/x.sif containers/no-such.def             # a definition that is not there
frobnicate --all                                                # a program no class knows
```
"""


def test_a_page_with_broken_command_lines_fails_on_each(tmp_path):
    page = tmp_path / "broken.md"
    page.write_text(BROKEN_DOC)
    commands = doc_commands((str(page),))
    assert len(commands) == 9
    *checked, unknown = commands
    assert classify(unknown) == "unclassified"
    with pytest.raises(AssertionError, match="frobnicate"):
        test_the_command_line_runs_as_written(unknown, tmp_path, _NoDryRuns())
    why = ["config file not found", "does not accept", "not a run of the plan", "not rules of the workflow",
           "does not exist", "not found: tests/no_such_test.py", "not the x-site partitions",
           "no such file in the repository"]
    for cmd, reason in zip(checked, why, strict=True):
        assert classify(cmd) != "unclassified", cmd.shown
        with pytest.raises((AssertionError, pytest.fail.Exception), match=reason):
            test_the_command_line_runs_as_written(cmd, tmp_path, _NoDryRuns())


class _NoDryRuns:
    """The ``request`` of :func:`test_the_command_line_runs_as_written` for lines that must fail
    before any dry run: their rule names are checked first."""

    def getfixturevalue(self, name: str) -> dict:
        return {}
