"""The call log's segment keys (memoized in the writer) and the prompts read back from it."""

from __future__ import annotations

import json

from forgetting.prompt import chat_format
from forgetting.records.calllog import CallLogWriter, read_call_log

TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"properties": {"command": {}}}}}]


def test_memoized_keys_are_the_content_addresses_and_prompts_read_back_exactly(tmp_path):
    parts = [{"type": "text", "text": "look"}]
    look_alike = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    histories = [
        [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}],
        [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "task"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "bash", "arguments": '{"command": "ls"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": parts},
            {"role": "tool", "tool_call_id": "c2", "content": look_alike},  # text equal to the list's JSON
            {"role": "user", "content": "note"},
            {"role": "user"},
        ],  # content absent vs present
    ]
    path = tmp_path / "calls.jsonl"
    with CallLogWriter(path, {"run_id": "r"}) as log:
        for h in histories * 2:  # the second round hits the memo for every message
            log.append_call(
                messages=h,
                tools=TOOLS,
                params={},
                deleted=[],
                response={"content": "x"},
                usage=None,
                t_request=0.0,
                t_response=1.0,
            )
    read = read_call_log(path)
    assert len(read.calls) == 4
    for call, h in zip(read.calls, histories * 2, strict=True):
        assert call.segments == [s.key for s in chat_format.prompt_segments(h, TOOLS)]
        assert read.prompt_ids(call) == chat_format.prompt_token_ids(h, TOOLS)
        assert read.messages(call) == h
    keys = read.calls[1].segments
    assert len(set(keys)) == len(keys)  # the list content and its look-alike text are two segments
    n_segments = sum(1 for line in path.read_text().splitlines() if json.loads(line)["type"] == "segment")
    assert n_segments == len(set(read.calls[0].segments) | set(keys))  # each stored once


def test_two_tool_results_with_the_same_text_read_back_with_their_own_ids(tmp_path):
    # deletion makes this common: two old outputs both replaced by "[tool output deleted]"
    def turn(k: int) -> list[dict]:
        call = {"id": f"c{k}", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
        return [
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{k}", "content": "[tool output deleted]"},
        ]

    h = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}, *turn(1), *turn(2)]
    path = tmp_path / "calls.jsonl"
    with CallLogWriter(path, {"run_id": "r"}) as log:
        for _ in range(2):
            log.append_call(
                messages=h, tools=TOOLS, params={}, deleted=[], response={"content": "x"}, usage=None,
                t_request=0.0, t_response=1.0,
            )
    read = read_call_log(path)
    for c in read.calls:
        assert read.messages(c) == h
        assert read.prompt_ids(c) == chat_format.prompt_token_ids(h, TOOLS)
    a, b = (chat_format.prompt_segments(h, TOOLS)[i] for i in (3, 5))
    assert a.key != b.key and a.ids == b.ids  # two messages, the same tokens
