#!/usr/bin/env python3
"""Test double for ``vllm serve`` (no GPU here): accepts vLLM's flags, serves /health,
/v1/models, /tokenize and /v1/chat/completions on --host/--port after an optional delay, and
can be told to crash.

Chat completions are the canned agent-like replies of ``openai_upstream.py`` (a ``bash``
tool call when the request offers tools, else a fenced ``mswea_bash_command`` block), counted
per run (the proxy's ``X-Forgetting-Run`` header).

    python vllm.py serve MODEL --host H --port P [other vllm flags…]
Environment: FAKE_VLLM_DELAY (seconds before listening), FAKE_VLLM_EXIT (exit status to die
with before listening), FAKE_VLLM_ARGV (file to write the argv to), FAKE_VLLM_CHILD=1 (start a
child process that the server's shutdown must also stop; its pid goes to FAKE_VLLM_CHILD_PID),
FAKE_VLLM_SUBMIT_AT (a run's N-th call submits: ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git
diff``), FAKE_VLLM_DIE_AFTER (the process exits abruptly on the chat completion after the N-th, as a
crashed server would), FAKE_VLLM_CALL_DELAY (seconds each chat completion takes), FAKE_VLLM_ENV (file to write the
CUDA_VISIBLE_DEVICES it was started with to, as JSON), FAKE_VLLM_KV_TOKENS (logs "GPU KV cache
size: N tokens" as vLLM does once its cache is allocated), FAKE_VLLM_COMMAND (the shell command
every call before the submitting one asks for, instead of reading a file). /tokenize counts
whitespace-separated words as tokens (no tokenizer here) and reports --max-model-len.
/invocations answers as /v1/chat/completions does (vLLM's SageMaker-style route).

The key: with ``--api-key KEY`` or ``VLLM_API_KEY``, a request whose path starts with ``/v1``
needs ``Authorization: Bearer KEY`` (else 401 ``{"error": "Unauthorized"}``); every other path
and every OPTIONS request is answered without it — as vLLM's authentication middleware does
(vllm/entrypoints/openai/api_server.py, build_app: ``if not url_path.startswith("/v1")``).
"""

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from openai_upstream import canned_reply

argv = sys.argv[1:]
if os.environ.get("FAKE_VLLM_ARGV"):
    with open(os.environ["FAKE_VLLM_ARGV"], "w") as fh:
        json.dump(argv, fh)
if os.environ.get("FAKE_VLLM_ENV"):
    with open(os.environ["FAKE_VLLM_ENV"], "w") as fh:
        json.dump({"CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES")}, fh)
host = argv[argv.index("--host") + 1]
max_model_len = int(argv[argv.index("--max-model-len") + 1]) if "--max-model-len" in argv else 0
port = int(argv[argv.index("--port") + 1])
model = argv[argv.index("--served-model-name") + 1]
if os.environ.get("FAKE_VLLM_CHILD"):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(os.environ["FAKE_VLLM_CHILD_PID"], "w") as fh:
        fh.write(str(child.pid))
time.sleep(float(os.environ.get("FAKE_VLLM_DELAY", "0")))
if os.environ.get("FAKE_VLLM_EXIT"):
    print("fake vllm: CUDA out of memory (simulated)", flush=True)
    sys.exit(int(os.environ["FAKE_VLLM_EXIT"]))


if os.environ.get("FAKE_VLLM_KV_TOKENS"):
    print(f"INFO [kv_cache_utils.py] GPU KV cache size: {int(os.environ['FAKE_VLLM_KV_TOKENS']):,} tokens", flush=True)

SUBMIT_AT = int(os.environ.get("FAKE_VLLM_SUBMIT_AT", "0"))
DIE_AFTER = int(os.environ.get("FAKE_VLLM_DIE_AFTER", "0"))
CALL_DELAY = float(os.environ.get("FAKE_VLLM_CALL_DELAY", "0"))
COMMAND = os.environ.get("FAKE_VLLM_COMMAND", "")
calls_per_run: Counter = Counter()
lock = threading.Lock()
completions = 0


def reply(body, n):
    style = "tool_calls" if body.get("tools") else "text"
    out = canned_reply(body, style, n)
    command = None
    if SUBMIT_AT and n >= SUBMIT_AT:
        command = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff"
    elif COMMAND:
        command = COMMAND
    if command is not None:
        message = out["choices"][0]["message"]
        if style == "text":
            message["content"] = f"THOUGHT: done.\n\n```mswea_bash_command\n{command}\n```"
        else:
            message["tool_calls"][0]["function"]["arguments"] = json.dumps({"command": command})
    return out


TOKEN = (argv[argv.index("--api-key") + 1] if "--api-key" in argv else None) or os.environ.get("VLLM_API_KEY")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def refused(self):
        """vLLM's check: only /v1 paths, never OPTIONS."""
        if not TOKEN or self.command == "OPTIONS" or not self.path.startswith("/v1"):
            return False
        if self.headers.get("Authorization") == "Bearer " + TOKEN:
            return False
        data = json.dumps({"error": "Unauthorized"}).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        return True

    def do_POST(self):
        global completions
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.refused():
            return
        if self.path == "/tokenize":
            prompt = json.loads(raw).get("prompt", "")
            data = json.dumps({"count": len(prompt.split()), "max_model_len": max_model_len,
                               "tokens": list(range(len(prompt.split())))}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        if self.path not in ("/v1/chat/completions", "/invocations"):
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = json.loads(raw)
        run = self.headers.get("X-Forgetting-Run", "")
        with lock:
            completions += 1
            if DIE_AFTER and completions > DIE_AFTER:
                print(f"fake vllm: dying on completion {completions} (simulated crash)", flush=True)
                os._exit(1)
            calls_per_run[run] += 1
            n = calls_per_run[run]
        if CALL_DELAY:
            time.sleep(CALL_DELAY)
        data = json.dumps(reply(body, n)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.refused():
            return
        if self.path == "/health":
            body = b""
        elif self.path == "/v1/models":
            body = json.dumps({"object": "list", "data": [{"id": model, "object": "model"}]}).encode()
        else:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


print(f"fake vllm listening on {host}:{port}", flush=True)
ThreadingHTTPServer((host, port), Handler).serve_forever()
