"""The package's layers, as docs/ARCHITECTURE.md states them: the import contracts of
pyproject.toml hold (``lint-imports``, which ./scripts/test runs beside ruff: a broken contract
fails the test command), no module imports itself back through others (not even through its
package's ``__init__``), and ``forgetting --help`` imports none of the pipeline (a command
module imports the pipeline inside the function that runs the command)."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib

import grimp

from forgetting_testkit.checkout import ROOT, bin_path, cli_env


def test_the_import_contracts_are_kept():
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    assert {c["type"] for c in contracts} >= {"layers", "forbidden", "protected", "acyclic_siblings"}
    proc = subprocess.run(
        [bin_path("lint-imports"), "--no-cache", "--no-logo"],
        cwd=ROOT, env=cli_env(), capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"Contracts: {len(contracts)} kept, 0 broken." in proc.stdout


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_imports_itself_back():
    g = grimp.build_graph("forgetting", "forgetting_testkit")
    graph = {m: set(g.find_modules_directly_imported_by(m)) for m in g.modules}
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle_through_a_package():
    # a package's __init__ re-exporting a submodule that imports back from the package
    graph = {"p": {"p.a"}, "p.a": {"p.b", "p"}, "p.b": set(), "q": {"p"}}
    assert _cycles(graph) == [["p", "p.a"]]


def test_help_imports_none_of_the_pipeline():
    code = "import json, sys\nfrom forgetting.cli import build_parser\nbuild_parser()\n"
    code += "print(json.dumps(sorted(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=cli_env(), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    loaded = set(json.loads(proc.stdout))
    heavy = {"forgetting.study.config", "forgetting.deletion", "forgetting.run", "pyarrow", "numpy", "swebench",
             "minisweagent", "matplotlib", "snakemake"}
    assert loaded & heavy == set()
