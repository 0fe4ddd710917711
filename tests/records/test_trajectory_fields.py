"""A trajectory with a wrongly typed field is one error line naming the file and the field —
for ``forgetting label`` and ``forgetting cost`` alike, since both read it through the one
parse of its format (``forgetting.records.mini`` / ``.trae``) — never a traceback."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from forgetting import cli
from forgetting.behaviour import label_run
from forgetting.cost import load_run
from forgetting.foundation.errors import RunOutputError
from forgetting_testkit.trajectories import edit_at, text_trajectory, toolcall_trajectory, trae_trajectory, write_json

# toolcall_trajectory(): messages[2] is turn 1's assistant message, [3] its tool output,
# [4] the format error carrying the rejected response in extra.response
MINI_FIELDS: dict[str, tuple[Callable[[], dict], Callable[[Any], None], str]] = {
    "tool_calls a string": (toolcall_trajectory, edit_at("messages", 2, "tool_calls", value="nope"),
                            "messages[2].tool_calls is a string, expected a list or null"),
    "a tool call a number": (toolcall_trajectory, edit_at("messages", 2, "tool_calls", value=[1]),
                             "messages[2].tool_calls[0] is the number 1, expected an object"),
    "a tool call without function": (toolcall_trajectory, edit_at("messages", 2, "tool_calls", 0, "function",
                                                                 delete=True),
                                     "messages[2].tool_calls[0].function is missing, expected an object"),
    "a tool name a number": (toolcall_trajectory, edit_at("messages", 2, "tool_calls", 0, "function", "name", value=7),
                             "messages[2].tool_calls[0].function.name is the number 7, expected a string"),
    "tool arguments a number": (toolcall_trajectory,
                                edit_at("messages", 2, "tool_calls", 0, "function", "arguments", value=5),
                                "messages[2].tool_calls[0].function.arguments is the number 5"),
    "content an object": (toolcall_trajectory, edit_at("messages", 3, "content", value={"a": 1}),
                          "messages[3].content is an object, expected a string, a list of content parts or null"),
    "a content part a string": (toolcall_trajectory, edit_at("messages", 1, "content", value=["hi"]),
                                "messages[1].content[0] is a string, expected an object"),
    "a message without role": (toolcall_trajectory, edit_at("messages", 1, "role", delete=True),
                               "messages[1].role is missing, expected a string"),
    "a message a string": (toolcall_trajectory, edit_at("messages", 1, value="hi"),
                           "messages[1] is a string, expected an object"),
    "tool_call_id a number": (toolcall_trajectory, edit_at("messages", 3, "tool_call_id", value=3),
                              "messages[3].tool_call_id is the number 3, expected a string or null"),
    "extra a string": (toolcall_trajectory, edit_at("messages", 3, "extra", value="x"),
                       "messages[3].extra is a string, expected an object or null"),
    "stored actions a string": (toolcall_trajectory, edit_at("messages", 2, "extra", "actions", value="cat a.py"),
                                "messages[2].extra.actions is a string, expected a list or null"),
    "a stored command a list": (toolcall_trajectory, edit_at("messages", 2, "extra", "actions", 0, "command",
                                                            value=["cat"]),
                                "messages[2].extra.actions[0].command is a list, expected a string or null"),
    "raw output a number": (toolcall_trajectory, edit_at("messages", 3, "extra", "raw_output", value=3),
                            "messages[3].extra.raw_output is the number 3, expected a string or null"),
    "a response a list": (toolcall_trajectory, edit_at("messages", 4, "extra", "response", value=[]),
                          "messages[4].extra.response is a list, expected an object or null"),
    "choices a string": (toolcall_trajectory, edit_at("messages", 4, "extra", "response", "choices", value="x"),
                         "messages[4].extra.response.choices is a string, expected a list or null"),
    "a rejected reply's tool_calls a string": (
        toolcall_trajectory, edit_at("messages", 4, "extra", "response", "choices", 0, "message", "tool_calls",
                                    value="nope"),
        "messages[4].extra.response.choices[0].message.tool_calls is a string, expected a list or null"),
    "a timestamp a string": (toolcall_trajectory, edit_at("messages", 2, "extra", "timestamp", value="noon"),
                             "messages[2].extra.timestamp is a string, expected a number or null"),
    "messages a string": (toolcall_trajectory, edit_at("messages", value="x"),
                          "messages is a string, expected a list"),
    "trajectory_format a number": (toolcall_trajectory, edit_at("trajectory_format", value=3),
                                   "trajectory_format is the number 3, expected a string or null"),
    "info a string": (toolcall_trajectory, edit_at("info", value="x"), "info is a string, expected an object or null"),
    "exit status a number": (toolcall_trajectory, edit_at("info", "exit_status", value=0),
                             "info.exit_status is the number 0, expected a string or null"),
    "api_calls a string": (toolcall_trajectory, edit_at("info", "model_stats", "api_calls", value="10"),
                           "info.model_stats.api_calls is a string, expected an integer or null"),
    "step_limit a boolean": (toolcall_trajectory, edit_at("info", "config", "agent", "step_limit", value=True),
                             "info.config.agent.step_limit is true (a boolean), expected an integer or null"),
    "the agent config a list": (toolcall_trajectory, edit_at("info", "config", "agent", value=[]),
                                "info.config.agent is a list, expected an object or null"),
    "a text action_regex a number": (text_trajectory, edit_at("info", "config", value={"model": {"action_regex": 5}}),
                                     "info.config.model.action_regex is the number 5, expected a string or null"),
    "a text message's content a number": (text_trajectory, edit_at("messages", 3, "content", value=12),
                                          "messages[3].content is the number 12, expected a string"),
}

# trae_trajectory(): 6 model calls; the results of call k come in call k + 1's input messages
TRAE_FIELDS: dict[str, tuple[Callable[[Any], None], str]] = {
    "an interaction a number": (edit_at("llm_interactions", value=[1]),
                                "llm_interactions[0] is the number 1, expected an object"),
    "interactions a string": (edit_at("llm_interactions", value="x"), "llm_interactions is a string, expected a list"),
    "a response a string": (edit_at("llm_interactions", 0, "response", value="x"),
                            "llm_interactions[0].response is a string, expected an object or null"),
    "tool_calls a string": (edit_at("llm_interactions", 0, "response", "tool_calls", value="nope"),
                            "llm_interactions[0].response.tool_calls is a string, expected a list or null"),
    "a tool call a number": (edit_at("llm_interactions", 0, "response", "tool_calls", value=[1]),
                             "llm_interactions[0].response.tool_calls[0] is the number 1, expected an object"),
    "tool arguments a number": (edit_at("llm_interactions", 0, "response", "tool_calls", 0, "arguments", value=5),
                                "llm_interactions[0].response.tool_calls[0].arguments is the number 5"),
    "a tool name a list": (edit_at("llm_interactions", 0, "response", "tool_calls", 0, "name", value=["x"]),
                           "llm_interactions[0].response.tool_calls[0].name is a list, expected a string"),
    "an input message a number": (edit_at("llm_interactions", 1, "input_messages", value=[1]),
                                  "llm_interactions[1].input_messages[0] is the number 1, expected an object"),
    "a tool result a string": (edit_at("llm_interactions", 1, "input_messages", 0, "tool_result", value="x"),
                               "llm_interactions[1].input_messages[0].tool_result is a string, expected an object"),
    "a result a number": (edit_at("llm_interactions", 1, "input_messages", 0, "tool_result", "result", value=5),
                          "llm_interactions[1].input_messages[0].tool_result.result is the number 5"),
    "a step a number": (edit_at("agent_steps", value=[1]), "agent_steps[0] is the number 1, expected an object"),
    "step results a string": (edit_at("agent_steps", 0, "tool_results", value="x"),
                              "agent_steps[0].tool_results is a string, expected a list or null"),
    "a result's call id a list": (edit_at("agent_steps", 0, "tool_results", 0, "call_id", value=[1]),
                                  "agent_steps[0].tool_results[0].call_id is a list, expected a string"),
    "a step error a number": (edit_at("agent_steps", 0, "error", value=1),
                              "agent_steps[0].error is the number 1, expected a string or null"),
    "max_steps a string": (edit_at("max_steps", value="200"), "max_steps is a string, expected an integer or null"),
    "success a string": (edit_at("success", value="yes"), "success is a string, expected true or false or null"),
    "final_result a number": (edit_at("final_result", value=5), "final_result is the number 5, expected a string"),
    "end_time a number": (edit_at("end_time", value=5), "end_time is the number 5, expected a string or null"),
}


def one_line(exc: BaseException, path: Path, words: str) -> None:
    text = str(exc)
    assert "\n" not in text and text.startswith(f"{path}: ") and words in text, text


@pytest.mark.parametrize("case", sorted(MINI_FIELDS))
def test_a_mini_trajectory_field_of_the_wrong_type_is_one_line_for_label_and_cost(case, tmp_path, capsys):
    build, mutate, words = MINI_FIELDS[case]
    doc = json.loads(json.dumps(build()))
    mutate(doc)
    path = write_json(tmp_path / "run.traj.json", doc)
    with pytest.raises(RunOutputError) as labelled:
        label_run(path)
    one_line(labelled.value, path, words)
    with pytest.raises(RunOutputError) as costed:
        load_run(path)
    assert str(costed.value) == str(labelled.value)  # one parse: the same field named the same way
    for command in ("label", "cost"):
        assert cli.main([command, str(path)]) == 2
        err = capsys.readouterr().err
        assert err == f"error: {labelled.value}\n"


@pytest.mark.parametrize("case", sorted(TRAE_FIELDS))
def test_a_trae_trajectory_field_of_the_wrong_type_is_one_line(case, tmp_path, capsys):
    mutate, words = TRAE_FIELDS[case]
    doc = json.loads(json.dumps(trae_trajectory()))  # as read from a file: no shared objects
    mutate(doc)
    path = write_json(tmp_path / "trae.json", doc)
    with pytest.raises(RunOutputError) as labelled:
        label_run(path)
    one_line(labelled.value, path, words)
    assert cli.main(["label", str(path)]) == 2
    assert capsys.readouterr().err == f"error: {labelled.value}\n"


def test_the_unmutated_trajectories_read(tmp_path):
    """The hostile cases above break one field each of files that read."""
    for name, doc in (("a.traj.json", toolcall_trajectory()), ("b.traj.json", text_trajectory())):
        path = write_json(tmp_path / name, doc)
        assert label_run(path).summary["n_tool_calls"] > 0 and load_run(path).calls
    assert label_run(write_json(tmp_path / "trae.json", trae_trajectory())).summary["n_tool_calls"] == 7
