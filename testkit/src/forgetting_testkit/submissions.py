"""How many Slurm jobs a workflow would submit, read from ``snakemake -n`` and the rule files.

Snakemake's dry-run lists every job; jobs bundled into one submission by ``group:`` and
``--group-components`` are listed under one ``Group job NAME`` header. A submission is a
group job, or a job of a rule that is not local (``localrule: True``, a ``localrules:``
directive, or a rule without an action such as ``all``, which Snakemake runs in the main
process). Rules whose ``localrule:`` is an expression are counted as submitted (an upper
bound). ``benchmarks/dag.py`` prints the figures for the full study; a test keeps the study
under the 200 submissions sites allow one user.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

_JOB = re.compile(r"^(?P<indent>[ \t]*)(?:local)?(?:rule|checkpoint) (?P<rule>[A-Za-z_]\w*):\s*$")
_GROUP = re.compile(r"^(?:\[[^\]]*\]\s*)?Group job (?P<group>\S+) \(jobs in")
_RULE_DEF = re.compile(r"^(?:rule|checkpoint)\s+(?P<rule>[A-Za-z_]\w*)\s*:", re.MULTILINE)
_LOCALRULES = re.compile(r"^localrules\s*:\s*(?P<names>[^\n]+)", re.MULTILINE)
_ACTIONS = ("shell", "script", "run", "wrapper", "notebook", "cwl", "template_engine")


@dataclass(frozen=True)
class DryRun:
    """The jobs of a dry-run listing: per rule, and how many sit in each group's submissions."""

    jobs: Counter[str]
    ungrouped: Counter[str]
    group_jobs: Counter[str]
    grouped_rules: dict[str, set[str]] = field(default_factory=dict)

    @property
    def total_jobs(self) -> int:
        return sum(self.jobs.values())


def parse_dry_run(text: str) -> DryRun:
    """Jobs per rule from ``snakemake -n`` output; grouped jobs are the indented ones."""
    jobs: Counter[str] = Counter()
    ungrouped: Counter[str] = Counter()
    group_jobs: Counter[str] = Counter()
    grouped_rules: dict[str, set[str]] = {}
    current_group: str | None = None
    for line in text.splitlines():
        g = _GROUP.match(line)
        if g:
            current_group = g.group("group")
            group_jobs[current_group] += 1
            continue
        m = _JOB.match(line)
        if not m:
            continue
        rule = m.group("rule")
        jobs[rule] += 1
        if m.group("indent") and current_group is not None:
            grouped_rules.setdefault(current_group, set()).add(rule)
        else:
            current_group = None
            ungrouped[rule] += 1
    return DryRun(jobs, ungrouped, group_jobs, grouped_rules)


def _rule_blocks(text: str) -> dict[str, str]:
    starts = list(_RULE_DEF.finditer(text))
    blocks = {}
    for i, m in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(text)
        body = text[m.end() : end]
        # a rule's body is its indented lines; stop at the next top-level statement
        lines = []
        for line in body.splitlines()[1:]:
            if line and not line[0].isspace() and not line.startswith("#"):
                break
            lines.append(line)
        blocks[m.group("rule")] = "\n".join(lines)
    return blocks


def local_rules(files: Iterable[str | Path]) -> set[str]:
    """Rules Snakemake runs in its own process, never submitted, from the workflow's files."""
    local: set[str] = set()
    for path in files:
        text = Path(path).read_text(encoding="utf-8")
        for m in _LOCALRULES.finditer(text):
            local.update(n.strip() for n in m.group("names").split(",") if n.strip())
        for rule, body in _rule_blocks(text).items():
            declared = re.search(r"^\s+localrule\s*:\s*True\s*$", body, re.MULTILINE)
            no_action = not any(re.search(rf"^\s+{a}\s*:", body, re.MULTILINE) for a in _ACTIONS)
            if declared or no_action:
                local.add(rule)
    return local


def workflow_files(root: str | Path) -> list[Path]:
    """The Snakefile and the rule files it includes (``workflow/rules/*.smk``)."""
    root = Path(root)
    return [root / "Snakefile", *sorted((root / "workflow" / "rules").glob("*.smk"))]


@dataclass(frozen=True)
class Submissions:
    """Slurm submissions per rule (ungrouped jobs) and per group (group jobs)."""

    per_rule: dict[str, int]
    per_group: dict[str, int]
    grouped_jobs: dict[str, int]

    @property
    def ungrouped_total(self) -> int:
        """What the same jobs would cost without grouping: one submission each."""
        return sum(self.per_rule.values()) + sum(self.grouped_jobs.values())

    @property
    def total(self) -> int:
        return sum(self.per_rule.values()) + sum(self.per_group.values())

    def lines(self) -> list[str]:
        out = [f"{rule:<24} {n:>5}" for rule, n in sorted(self.per_rule.items())]
        for group, n in sorted(self.per_group.items()):
            out.append(f"group {group:<18} {n:>5}  ({self.grouped_jobs[group]} jobs)")
        out.append(f"{'total':<24} {self.total:>5}")
        return out


def count_submissions(dry: DryRun, local: set[str]) -> Submissions:
    per_rule = {rule: n for rule, n in dry.ungrouped.items() if rule not in local}
    grouped = {g: sum(dry.jobs[r] - dry.ungrouped[r] for r in rules) for g, rules in dry.grouped_rules.items()}
    return Submissions(per_rule, dict(dry.group_jobs), grouped)


def submissions_of(dry_run_text: str, root: str | Path) -> Submissions:
    """The submissions a dry-run of the workflow at ``root`` lists."""
    return count_submissions(parse_dry_run(dry_run_text), local_rules(workflow_files(root)))
