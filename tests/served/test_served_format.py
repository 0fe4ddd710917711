"""Prompts counted by the served model (:mod:`forgetting.prompt.served_format`): a model directory's
own tokenizer and chat template, rendered as vLLM renders a chat request, block by block, and
recorded in the call log so that the cost stage prices them without a flag."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forgetting.cost import cost_run, load_profiles
from forgetting.deletion import reduce_history
from forgetting.foundation.errors import ConfigError
from forgetting.grid import paper_configuration
from forgetting.prompt.served_format import Counting, ServedFormat, TemplateError, load
from forgetting.records.calllog import read_call_log
from forgetting.run.counting import counting_for
from forgetting.run.proxy import start_proxy
from forgetting_testkit.bpe_model import bpe_model_dir
from forgetting_testkit.fakes.openai_upstream import FakeUpstream
from forgetting_testkit.histories import ACTIONS
from forgetting_testkit.proxy_client import FAST, TOOLS, drive
from forgetting_testkit.runner import filled_model

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "resources" / "chat_templates" / "chatml-tools.jinja"
# a template with a default system prompt, as SmolLM2's own
OWN_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    """A model directory with a small byte-level BPE trained here and a ChatML template."""
    corpus = [f"line {i}: value_{i} = compute({i}) # 中文 note; cat file.py && ls -la\n" for i in range(200)]
    return bpe_model_dir(tmp_path_factory.mktemp("model"), corpus, vocab_size=600, chat_template=OWN_TEMPLATE)


def whole(fmt: ServedFormat, messages, tools=None) -> list[int]:
    """The prompt as vLLM tokenizes it: the whole rendered text at once."""
    return fmt._tok.encode(fmt.render(messages, tools), add_special_tokens=False).ids


def history(style: str, turns: int) -> list[dict]:
    out: list[dict] = [{"role": "system", "content": "You solve tasks."}, {"role": "user", "content": "Fix it."}]
    for k in range(turns):
        if style == "tool_calls":
            out.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": f"c{k}", "type": "function", "function": {"name": "bash", "arguments": json.dumps(
                    {"command": f"cat file_{k}.py"})}}]})
            out.append({"role": "tool", "tool_call_id": f"c{k}", "content": f"value_{k} = compute({k}) # 中文"})
        else:
            out.append({"role": "assistant", "content": f"Look.\n```mswea_bash_command\ncat file_{k}.py\n```"})
            out.append({"role": "user", "content": f"<output>value_{k} = compute({k})</output>"})
    return out


@pytest.mark.parametrize("style", ["tool_calls", "text"])
def test_the_blocks_concatenate_to_the_whole_prompt_as_the_server_tokenizes_it(model_dir, style):
    fmt = load(str(model_dir), str(TEMPLATE))
    tools = TOOLS if style == "tool_calls" else None
    msgs = history(style, 5)
    ids = fmt.prompt_token_ids(msgs, tools)
    assert ids == whole(fmt, msgs, tools)
    blocks = fmt.blocks(msgs, tools)
    assert [b.role for b in blocks] == [m["role"] for m in msgs]  # one block per message
    assert fmt.generation_ids == fmt._tok.encode("<|im_start|>assistant\n", add_special_tokens=False).ids
    if style == "tool_calls":  # vLLM hands the template each call's arguments as an object
        assert '[bash(command="cat file_0.py")]' in blocks[2].text
        assert '"name": "bash"' in blocks[0].text  # the tools in the system block


def test_a_block_the_template_adds_is_implicit_and_a_missing_tokenizer_is_one_error(model_dir, tmp_path):
    fmt = load(str(model_dir))  # the directory's own template: a default system prompt
    msgs = [{"role": "user", "content": "hi"}]
    blocks = fmt.blocks(msgs, None)
    assert [b.role for b in blocks] == ["system", "user"]
    assert fmt.prompt_token_ids(msgs, None) == whole(fmt, msgs)
    with pytest.raises(TemplateError, match="failed"):
        fmt.blocks([{"role": "user", "content": None}], None)  # its template fails on null content
    with pytest.raises(ConfigError, match=r"no tokenizer\.json"):
        load(str(tmp_path))


@pytest.mark.parametrize("style", ["tool_calls", "text"])
def test_the_proxy_logs_the_served_count_and_the_cost_stage_prices_it(model_dir, tmp_path, style):
    fmt = load(str(model_dir), str(TEMPLATE))
    d, seed = paper_configuration("delayed-turn-tool_output-100"), 7
    tools = TOOLS if style == "tool_calls" else None
    with (
        FakeUpstream(style=style) as up,
        start_proxy(up.url, d, seed, tmp_path, "mini/x/t/1", settings=FAST, actions=ACTIONS[style],
                    counting=Counting("served", fmt), server_info={"kv_block_size": 32, "source": "test"}) as px,
    ):
        sent = drive(px.url, style, 6)
    log = read_call_log(tmp_path / "calls.jsonl")
    assert log.prompt_count == "served" and log.kv_block_size == 32
    assert log.header["prompt_count"]["generation_prompt_ids"] == fmt.generation_ids
    assert log.header["tokenizer"].startswith("served:")
    for history_k, call in zip(sent, log.calls, strict=True):
        reduced = reduce_history(history_k, d, seed, actions=ACTIONS[style]).messages
        assert log.prompt_ids(call) == whole(fmt, reduced, tools)
        assert log.messages(call) == reduced
    result = cost_run(tmp_path / "calls.jsonl", load_profiles(None, ["vllm-blocks"]))
    assert result.prompt_count == "served" and result.kv_block_size == 32
    assert result.profiles[0].increment == 32  # the block the call log read from the server
    rows = result.calls.to_pylist()
    assert [r["prompt_tokens"] for r in rows] == [len(log.prompt_ids(c)) for c in log.calls]


def test_auto_counting_follows_the_backend(model_dir, tmp_path):
    assert counting_for(filled_model({"backend": "scripted", "name": "s"})) == Counting("served")
    assert counting_for(filled_model({"backend": "endpoint", "name": "m"})) == Counting("approximation")
    qwen = filled_model({"backend": "vllm", "name": str(model_dir), "tokenizer": "qwen2.5"})
    assert counting_for(qwen).method == "approximation"
    served = counting_for(filled_model({"backend": "vllm", "name": str(model_dir), "chat_template": str(TEMPLATE)}))
    assert served.method == "served" and served.served is not None
    assert served.served.files.template_source == TEMPLATE
    ep = counting_for(filled_model({"backend": "endpoint", "name": "m", "tokenizer_dir": str(model_dir)}))
    assert ep.served is not None and ep.served.files.template_source == model_dir / "tokenizer_config.json"
    with pytest.raises(ConfigError, match=r"model\.tokenizer_dir"):
        counting_for(filled_model({"backend": "vllm", "name": "org/not-here", "vllm": {"model_dir": str(tmp_path)}}))


@pytest.mark.parametrize("style", ["tool_calls", "text"])
def test_a_growing_history_renders_only_a_window_and_counts_exactly_as_the_whole(model_dir, style, monkeypatch):
    fmt = ServedFormat(load(str(model_dir), str(TEMPLATE)).files)  # a fresh one: no previous request
    assert fmt.incremental
    tools = TOOLS if style == "tool_calls" else None
    full = history(style, 12)
    rendered: list[int] = []
    whole_blocks = fmt._whole_blocks
    monkeypatch.setattr(fmt, "_whole_blocks", lambda conv, t: rendered.append(len(conv)) or whole_blocks(conv, t))
    for k in range(3, len(full) + 1, 2):
        rendered.clear()
        msgs = full[:k]
        assert fmt.prompt_token_ids(msgs, tools) == whole(fmt, msgs, tools)
        if k > 3:  # the first message, the previous request's last one and the two new ones
            assert rendered == [1 + 1 + 2]
    # a deletion rewrites a turn a few turns back: the first message, the last unchanged one,
    # and every message from the rewritten one on
    near = len(full) - 4
    rewritten = [*full[:near], {**full[near], "content": "[deleted]"}, *full[near + 1:]]
    rendered.clear()
    assert fmt.prompt_token_ids(rewritten, tools) == whole(fmt, rewritten, tools)
    assert rendered == [1 + 1 + 4]
    # further back, and grown at once (the delayed policy's step): still a window, still exact
    grown = [*rewritten[:5], {**rewritten[5], "content": "[deleted]"}, *rewritten[6:],
             {"role": "user", "content": "and more"}]
    rendered.clear()
    assert fmt.prompt_token_ids(grown, tools) == whole(fmt, grown, tools)
    assert rendered == [1 + 1 + len(grown) - 5]
    # the same request again (a client's retry): the first and the last message only
    rendered.clear()
    assert fmt.prompt_token_ids(grown, tools) == whole(fmt, grown, tools)
    assert rendered == [2]
    # a change in the first two messages: the whole render
    first = [{**grown[0], "content": "another system prompt"}, *grown[1:]]
    rendered.clear()
    assert fmt.prompt_token_ids(first, tools) == whole(fmt, first, tools)
    assert rendered == [len(first)]
    rewritten = first
    rendered.clear()
    other = [{"type": "function", "function": {"name": "other", "parameters": {"type": "object"}}}]
    grown = [*rewritten, {"role": "user", "content": "more"}]
    assert fmt.prompt_token_ids(grown, other) == whole(fmt, grown, other)  # other tools: the whole render
    assert rendered == [len(grown)]


def test_a_template_that_looks_across_messages_is_always_rendered_whole(model_dir, tmp_path):
    # the last message is rendered differently: a window would keep its old block
    template = tmp_path / "last.jinja"
    template.write_text(
        "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] or '' }}"
        "{% if loop.last %} (last){% endif %}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    fmt = ServedFormat(load(str(model_dir), str(template)).files)
    assert not fmt.incremental
    full = history("text", 4)
    for k in range(3, len(full) + 1):
        assert fmt.prompt_token_ids(full[:k], None) == whole(fmt, full[:k])
