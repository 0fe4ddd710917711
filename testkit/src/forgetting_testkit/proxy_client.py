"""An agent's side of the deletion proxy, for the proxy and policy tests: plain HTTP requests,
tool-call or text-mode observations, and ``drive``, which plays an agent for a number of
model calls and returns the history sent at each."""

from __future__ import annotations

import http.client
import json
from typing import Any

from forgetting.run.proxy import ProxySettings
from forgetting_testkit.histories import SYSTEM, TASK

FAST = ProxySettings.from_parts({"retries": 4, "backoff_s": 0.01, "backoff_max_s": 0.05, "timeout_s": 5})
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a shell command.",
            "parameters": {
                "type": "object",
                "required": ["command"],
                "properties": {"command": {"type": "string"}},
            },
        },
    }
]


def request(
    url: str, method: str, path: str, body: Any = None, headers: dict | None = None, *, timeout: float = 30
) -> tuple[int, Any]:
    """One request; ``timeout``: seconds a reply may take (a real model's prefill takes more)."""
    host_port = url.split("//", 1)[1].split("/", 1)[0]
    conn = http.client.HTTPConnection(host_port, timeout=timeout)
    raw = body if isinstance(body, bytes) else json.dumps(body).encode() if body is not None else None
    conn.request(method, path, body=raw, headers={"Content-Type": "application/json", **(headers or {})})
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    try:
        return resp.status, json.loads(data)
    except ValueError:
        return resp.status, data


def observation(k: int) -> str:
    lines = "\n".join(f"{i:>4}  value_{k}_{i} = compute({i}, {k}) + offset  # 中文 note" for i in range(12))
    return f"<returncode>0</returncode>\n<output>\n{lines}\n</output>"


def drive(url: str, style: str, calls: int, **extra: Any) -> list[list[dict]]:
    """Act as an agent for ``calls`` model calls; return the history sent at each call."""
    history: list[dict] = [dict(SYSTEM), dict(TASK)]
    sent = []
    for k in range(calls):
        body = {"model": "qwen3-coder", "messages": history, "temperature": 0, "max_tokens": 512, **extra}
        if style == "tool_calls":
            body["tools"] = TOOLS
        sent.append([dict(m) for m in history])
        status, reply = request(
            url, "POST", "/v1/chat/completions", body, {"Authorization": "Bearer sk-test"}
        )
        assert status == 200, reply
        message = reply["choices"][0]["message"]
        history = [*history, message]
        if style == "tool_calls":
            history += [
                {"role": "tool", "tool_call_id": c["id"], "content": observation(k)}
                for c in message["tool_calls"]
            ]
        else:
            history.append({"role": "user", "content": observation(k)})
    return sent
