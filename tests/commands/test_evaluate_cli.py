"""``forgetting evaluate --patch`` never deletes or overwrites what it did not write — with the
default ``--out`` (the patch's folder) and an explicit one alike (issue 17)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from forgetting import cli
from forgetting_testkit.checkout import ROOT

CONFIG = str(ROOT / "config/demo.yaml")


def files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def users_files(folder: Path, which: str) -> None:
    if which == "eval/":
        (folder / "eval").mkdir(parents=True)
        (folder / "eval" / "my-notes.txt").write_text("the user's own notes\n")
    else:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "eval.json").write_text('{"the user": "wrote this"}\n')


@pytest.mark.parametrize("out", ["default", "explicit"])
@pytest.mark.parametrize("which", ["eval/", "eval.json"])
def test_evaluating_a_patch_keeps_an_existing_eval_folder_and_report(tmp_path, capsys, out, which):
    patch = tmp_path / "patches" / "fix.diff"
    patch.parent.mkdir()
    patch.write_text("")
    target = patch.parent if out == "default" else tmp_path / "results"
    users_files(target, which)
    before = files(tmp_path)
    argv = ["evaluate", "--patch", str(patch), "--instance", "demo__confkit-1", "--config", CONFIG]
    if out == "explicit":
        argv += ["--out", str(target)]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "never replaces" in err and which.rstrip("/") in err
    assert files(tmp_path) == before  # nothing deleted, nothing overwritten, nothing added


def test_a_new_out_folder_gets_the_evaluation_and_the_patch_folder_is_untouched(tmp_path, capsys):
    patch = tmp_path / "patches" / "fix.diff"
    patch.parent.mkdir()
    patch.write_text("")
    users_files(patch.parent, "eval/")
    before = files(patch.parent)
    out = tmp_path / "fresh"
    argv = ["evaluate", "--patch", str(patch), "--instance", "demo__confkit-1", "--config", CONFIG,
            "--out", str(out)]
    assert cli.main(argv) == 0
    assert "empty_patch" in capsys.readouterr().out
    assert (out / "eval.json").is_file() and files(patch.parent) == before
