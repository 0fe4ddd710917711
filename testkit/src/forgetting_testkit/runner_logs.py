"""Evaluation logs of SWE-bench Verified rows as each repository's test runner prints them.

A log is what an instance image's eval script leaves: bash's xtrace of the script
(``set -uxo pipefail``; swebench ``harness/test_spec/python.py``, ``make_eval_script_list_py``,
v4.1.0), the test patch applied, the two test-output markers around the repository's test
command, and the test command's exit status that swebench 5.x's ``record_test_exit_code``
echoes after the end marker (``harness/utils.py``). Between the markers sits the runner's own
output, in the format swebench's parser for that repository reads:

- Django, ``./tests/runtests.py --verbosity 2`` (``TEST_DJANGO`` in swebench
  ``harness/constants/python.py`` v4.1.0): unittest's verbose ``TextTestResult``
  (CPython ``Lib/unittest/runner.py``): ``description ... ok`` / ``FAIL`` / ``ERROR``, where the
  description is ``str(test)`` — or, for a test with a docstring, ``str(test)`` on one line and
  the docstring's first line before the `` ... `` (those rows name the test by that line); then
  the ``FAIL:``/``ERROR:`` blocks, ``Ran N tests`` and ``OK``/``FAILED (...)``.
- SymPy, ``bin/test -C --verbose`` (``TEST_SYMPY``): ``PyTestReporter`` of
  ``sympy/testing/runtests.py``: a file's name and test count, then one ``name ok``/``F``/``E``
  line per test; the file's ``[OK]``/``[FAIL]`` is right-aligned on its *last* test's line,
  which swebench's ``parse_log_sympy`` therefore never reads — so no row lists a file's last
  test, and each file here ends with one the row does not list (``test_unlisted_last``).
- pytest ``-rA`` (pytest-dev, matplotlib, xarray, requests, pylint, scikit-learn, astropy,
  seaborn, flask): the session header, one progress line per file, and the ``short test
  summary info`` with ``PASSED id`` / ``FAILED id - message`` / ``ERROR id - message``;
  astropy's 1.x images run ``pytest -rA -vv -o console_output_style=classic``
  (``TEST_ASTROPY_PYTEST``), whose verbose lines end in the status instead.
- Sphinx under tox, ``tox --current-env -epy39 -v --`` (``TEST_SPHINX``), whose tox.ini runs
  ``python -X dev -m pytest -rA --durations 25`` with ``PYTEST_ADDOPTS=--color yes``: tox's own
  lines around a *coloured* pytest run (what ``parse_log_pytest_v2`` strips the escapes for).

The rows name each test by the id swebench's parser made of such a log, so every listed id is
printed as the runner prints that test. Statuses: ``"pass"``, ``"fail"``, ``"error"``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

START = ">>>>> Start Test Output"
END = ">>>>> End Test Output"

PASS, FAIL, ERROR = "pass", "fail", "error"

#: swebench v4.1.0 ``harness/constants/python.py``: each repository's test command
TEST_PYTEST = "pytest -rA"
TEST_ASTROPY_PYTEST = "pytest -rA -vv -o console_output_style=classic --tb=no"
TEST_DJANGO = "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1"
TEST_DJANGO_NO_PARALLEL = "./tests/runtests.py --verbosity 2"
TEST_SEABORN = "pytest --no-header -rA"
TEST_SPHINX = "tox --current-env -epy39 -v --"
TEST_SYMPY = "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose"
#: swebench's ``NON_TEST_EXTS``: files of a test patch that are no test directive
NON_TEST_EXTS = (".json", ".png", "csv", ".txt", ".md", ".jpg", ".jpeg", ".pkl", ".yml", ".yaml", ".toml")

_UNITTEST_ID = re.compile(r"^\w+ \([\w.]+\)$")
_WIDTH = 80  # sympy's reporter and pytest, writing to a pipe


def test_files(test_patch: str) -> list[str]:
    """The files a test patch touches (swebench's ``get_test_directives``, before Django's dots)."""
    files = re.findall(r"diff --git a/.* b/(.*)", test_patch)
    return [f for f in files if not any(f.endswith(ext) for ext in NON_TEST_EXTS)]


def test_command(repo: str, version: str, test_patch: str) -> str:
    """The eval script's test command for a row (swebench v4.1.0 ``MAP_REPO_VERSION_TO_SPECS``
    and ``get_test_directives``)."""
    files = test_files(test_patch)
    if repo == "django/django":
        command = TEST_DJANGO_NO_PARALLEL if version == "1.9" else TEST_DJANGO
        files = [f.removesuffix(".py").removeprefix("tests/").replace("/", ".") for f in files]
    elif repo == "sympy/sympy":
        command = TEST_SYMPY
    elif repo == "sphinx-doc/sphinx":
        command = TEST_SPHINX
    elif repo == "astropy/astropy" and version in ("0.1", "0.2", "0.3", "0.4", "1.1", "1.2", "1.3"):
        command = TEST_ASTROPY_PYTEST
    elif repo == "mwaskom/seaborn":
        command = TEST_SEABORN
    else:
        command = TEST_PYTEST
    return " ".join([command, *files])


def _center(text: str, delim: str = "=") -> str:
    text = f" {text} " if text else ""
    left = (_WIDTH - len(text)) // 2
    return delim * left + text + delim * (_WIDTH - left - len(text))


# --------------------------------------------------------------------------- Django


def django_output(results: Mapping[str, str]) -> str:
    lines = ["Testing against Django installed in '/testbed/django'"]
    lines += ["Skipping setup of unused database(s): other.", "System check identified no issues (0 silenced)."]
    word = {PASS: "ok", FAIL: "FAIL", ERROR: "ERROR"}
    blocks = []
    for test, status in results.items():
        if not _UNITTEST_ID.match(test):
            # a docstring's first line: unittest prints str(test) on the line before it
            lines.append("test_documented (tests.DocumentedTests)")
        lines.append(f"{test} ... {word[status]}")
        if status != PASS:
            kind = "FAIL" if status == FAIL else "ERROR"
            exc = "AssertionError: False is not true" if status == FAIL else "TypeError: an exception in the test"
            blocks += ["", "=" * 70, f"{kind}: {test}", "-" * 70, "Traceback (most recent call last):",
                       '  File "/testbed/tests/runtests.py", line 1, in <module>', f"    {exc.split(':')[0]}", exc]
    lines += blocks
    lines += ["", "-" * 70, f"Ran {len(results)} tests in 0.112s", ""]
    failures = sum(s == FAIL for s in results.values())
    errors = sum(s == ERROR for s in results.values())
    if failures or errors:
        parts = [f"failures={failures}"] * bool(failures) + [f"errors={errors}"] * bool(errors)
        lines.append(f"FAILED ({', '.join(parts)})")
    else:
        lines.append("OK")
    lines.append("Destroying test database for alias 'default'...")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- SymPy


def _sympy_file_of(test: str, files: Sequence[str], test_patch: str) -> str:
    for path, body in _patch_bodies(test_patch).items():
        if re.search(rf"^\+?\s*def {re.escape(test)}\(", body, re.M) and path in files:
            return path
    return files[0] if files else "sympy/core/tests/test_basic.py"


def _patch_bodies(test_patch: str) -> dict[str, str]:
    bodies: dict[str, str] = {}
    for chunk in re.split(r"^diff --git ", test_patch, flags=re.M)[1:]:
        match = re.match(r"a/\S+ b/(\S+)", chunk)
        if match:
            bodies[match.group(1)] = chunk
    return bodies


def sympy_output(results: Mapping[str, str], test_patch: str) -> str:
    files = [f for f in test_files(test_patch) if f.endswith(".py")]
    by_file: dict[str, list[tuple[str, str]]] = {}
    for test, status in results.items():
        by_file.setdefault(_sympy_file_of(test, files, test_patch), []).append((test, status))
    out = [_center("test process starts"),
           "executable:         /opt/miniconda3/envs/testbed/bin/python  (3.9.20-final-0) [CPython]",
           "architecture:       64-bit", "cache:              no", "ground types:       python ",
           "numpy:              None", "random seed:        36404117",
           "hash randomization: on (PYTHONHASHSEED=2539623414)", ""]
    word = {PASS: "ok", FAIL: "F", ERROR: "E"}
    failed: list[tuple[str, str, str]] = []
    for path, tests in by_file.items():
        text = f"{path}[{len(tests) + 1}] "
        for test, status in tests:
            text += f"\n{test} {word[status]}"
            if status != PASS:
                failed.append((path, test, status))
        last = "\ntest_unlisted_last ok "
        text += last
        mark = "[FAIL]" if any(p == path for p, _, _ in failed) else "[OK]"
        pos = len(last) - 1
        text += " " * max(_WIDTH - pos - len(mark), 0) + mark + "\n\n"
        out.append(text)
    out.append("")
    for path, test, _ in failed:
        out += [_center("", "_"), _center(f"{path}:{test}", "_"), "Traceback (most recent call last):",
                f'  File "/testbed/{path}", line 10, in {test}', "    assert False", "AssertionError", ""]
    passed = sum(s == PASS for s in results.values()) + len(by_file)
    summary = f"tests finished: {passed} passed, "
    fails = sum(s == FAIL for s in results.values())
    excs = sum(s == ERROR for s in results.values())
    summary += f"{fails} failed, " * bool(fails) + f"{excs} exceptions, " * bool(excs) + "in 1.52 seconds"
    out.append(_center(summary))
    if failed:
        out.append("DO *NOT* COMMIT!")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- pytest


def _file_of(test: str) -> str:
    return test.split("::", 1)[0] if "::" in test else test


def pytest_output(results: Mapping[str, str], *, verbose_classic: bool = False, color: bool = False,
                  header: bool = True) -> str:
    def paint(word: str, code: int) -> str:
        return f"\x1b[{code}m{word}\x1b[0m" if color else word

    word = {PASS: ("PASSED", 32), FAIL: ("FAILED", 31), ERROR: ("ERROR", 31)}
    out = [_center("test session starts")]
    if header:
        out += ["platform linux -- Python 3.9.20, pytest-7.4.0, pluggy-1.3.0", "rootdir: /testbed"]
    out += [f"collected {len(results)} items", ""]
    if verbose_classic:
        out += [f"{test} {word[status][0]}" for test, status in results.items()]
    else:
        by_file: dict[str, str] = {}
        for test, status in results.items():
            by_file[_file_of(test)] = by_file.get(_file_of(test), "") + {PASS: ".", FAIL: "F", ERROR: "E"}[status]
        out += [f"{path} {marks}".ljust(_WIDTH - 6) + "[100%]" for path, marks in by_file.items()]
    out += ["", _center("PASSES"), _center("short test summary info")]
    for test, status in results.items():
        name, code = word[status]
        reason = {PASS: "", FAIL: " - AssertionError: assert 1 == 2", ERROR: " - RuntimeError: boom"}[status]
        out.append(f"{paint(name, code)} {test}{reason}")
    counts = [f"{n} {w}" for n, w in ((sum(s == FAIL for s in results.values()), "failed"),
                                         (sum(s == PASS for s in results.values()), "passed"),
                                         (sum(s == ERROR for s in results.values()), "error")) if n]
    out.append(_center(f"{', '.join(counts)} in 2.31s"))
    return "\n".join(out) + "\n"


def sphinx_tox_output(results: Mapping[str, str], files: Sequence[str]) -> str:
    command = f"python -X dev -m pytest -rA --durations 25 {' '.join(files)}"
    ok = all(s == PASS for s in results.values())
    out = [f"py39: commands[0]> {command}", pytest_output(results, color=True).rstrip("\n")]
    if ok:
        out += ["  py39: OK (4.21=setup[0.02]+cmd[4.19] seconds)", "  congratulations :) (4.30 seconds)"]
    else:
        out += [f"py39: exit 1 (4.19 seconds) /testbed> {command} pid=412",
                "  py39: FAIL code 1 (4.21=setup[0.02]+cmd[4.19] seconds)", "  evaluation failed :( (4.30 seconds)"]
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- the whole log


def runner_output(row: Mapping[str, object], results: Mapping[str, str]) -> str:
    """What the row's test command prints, given each test's status."""
    repo, version, test_patch = str(row["repo"]), str(row["version"]), str(row["test_patch"])
    if repo == "django/django":
        return django_output(results)
    if repo == "sympy/sympy":
        return sympy_output(results, test_patch)
    if repo == "sphinx-doc/sphinx":
        return sphinx_tox_output(results, test_files(test_patch))
    if test_command(repo, version, test_patch).startswith(TEST_ASTROPY_PYTEST):
        return pytest_output(results, verbose_classic=True)
    return pytest_output(results, header=repo != "mwaskom/seaborn")


def eval_log(row: Mapping[str, object], results: Mapping[str, str], *, markers: bool = True,
             cut_at: float | None = None) -> str:
    """The eval script's whole log for ``row``: ``markers=False`` leaves the test-output markers
    out (a script that never reached its tests); ``cut_at`` (0–1) cuts the log off at that
    fraction of its test output, as a killed or truncated evaluation leaves it."""
    files = test_files(str(row["test_patch"]))
    base = str(row.get("base_commit") or "0" * 40)
    head = ["+ cd /testbed", f"+ git checkout {base} {' '.join(files)}",
            f"Updated {len(files)} paths from {base[:7]}", "+ git apply -v -"]
    for f in files:
        head += [f"Checking patch {f}...", f"Applied patch {f} cleanly."]
    command = test_command(str(row["repo"]), str(row["version"]), str(row["test_patch"]))
    code = 0 if all(s == PASS for s in results.values()) else 1
    body = runner_output(row, results)
    if cut_at is not None:
        body = body[: int(len(body) * cut_at)]
        return "\n".join([*head, f"+ : '{START}'", f"+ {command}"]) + "\n" + body
    lines = [*head]
    lines += [f"+ : '{START}'"] if markers else []
    lines += [f"+ {command}", body.rstrip("\n"), f"+ SWEBENCH_TEST_EXIT_CODE={code}"]
    lines += [f"+ : '{END}'"] if markers else []
    lines += [f"+ git checkout {base} {' '.join(files)}", f"Updated {len(files)} paths from {base[:7]}",
              f"+ echo '>>>>> Test Exit Code: {code}'", f">>>>> Test Exit Code: {code}"]
    return "\n".join(lines) + "\n"
