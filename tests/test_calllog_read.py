"""Reading a call log: once per unchanged file, again after an append; integers beyond 64 bits."""

from __future__ import annotations


def test_reading_a_log_again_sees_what_was_appended_since(tmp_path):
    from forgetting.records.calllog import CallLogWriter, read_call_log

    path = tmp_path / "calls.jsonl"
    messages = [{"role": "user", "content": "hello"}]
    call = {"tools": None, "params": {}, "deleted": [], "response": {"content": "hi"}, "usage": None,
            "t_request": 1.0, "t_response": 2.0}
    with CallLogWriter(path, {"run_id": "r", "seed": 2**70}) as w:  # a seed beyond 64 bits still reads
        w.append_call(messages=messages, **call)
    first = read_call_log(path)
    assert len(first.calls) == 1 and first.header["seed"] == 2**70
    assert read_call_log(path) is first  # unchanged: parsed once
    with CallLogWriter(path, {"run_id": "r", "seed": 2**70}) as w:
        w.append_call(messages=[*messages, {"role": "assistant", "content": "hi"}], **call)
    again = read_call_log(path)
    assert again is not first and [c.index for c in again.calls] == [1, 2]
