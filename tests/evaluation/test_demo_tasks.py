"""Every demo task's gold patch evaluates ``resolved`` with the local backend; a patch that
leaves the bug in place, and an empty one, do not. Runs once the demo tasks exist
(resources/demo/tasks and ``forgetting.demo.tasks.checkout``)."""

from __future__ import annotations

import pytest

from forgetting.demo import tasks as demo_tasks
from forgetting.evaluate.evaluate import evaluate_patch
from forgetting.evaluate.local import LocalBackend, demo_checkout
from forgetting.study.evaluation import EvalSettings
from forgetting_testkit.checkout import ROOT

TASKS = ROOT / "resources" / "demo" / "tasks"
IDS = demo_tasks.demo_task_ids(TASKS) if TASKS.is_dir() else []
READY = bool(IDS) and hasattr(demo_tasks, "checkout")

#: applies cleanly to any repository and changes no code: the bug stays
UNRELATED = """\
diff --git a/EVALUATION_NOTE.txt b/EVALUATION_NOTE.txt
new file mode 100644
--- /dev/null
+++ b/EVALUATION_NOTE.txt
@@ -0,0 +1 @@
+a patch that does not fix anything
"""

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not READY, reason="the demo tasks are not built in this checkout yet"),
]


@pytest.mark.parametrize("instance_id", IDS or ["none"])
def test_demo_task_gold_resolves_and_others_do_not(instance_id, tmp_path):
    instance = demo_tasks.load_instance(TASKS, instance_id)
    backend = LocalBackend(EvalSettings.from_section({"timeout_s": 300}), checkout=demo_checkout(TASKS))
    gold = evaluate_patch(instance, instance["patch"], backend, out_dir=tmp_path / "gold")
    assert gold.status == "resolved", (tmp_path / "gold" / "eval" / "test_output.txt").read_text()[-3000:]
    unrelated = evaluate_patch(instance, UNRELATED, backend, out_dir=tmp_path / "unrelated")
    assert unrelated.status == "unresolved" and unrelated.tests["FAIL_TO_PASS"]["failure"]
    assert unrelated.tests["PASS_TO_PASS"]["failure"] == []
    empty = evaluate_patch(instance, "", backend, out_dir=tmp_path / "empty")
    assert (empty.status, empty.resolved) == ("empty_patch", False)
