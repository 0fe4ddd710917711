"""Test double for ``vllm serve`` (no GPU here): accepts vLLM's flags, serves /health and
/v1/models on --host/--port after an optional delay, and can be told to crash.

    python fake_vllm.py serve MODEL --host H --port P [other vllm flags…]
Environment: FAKE_VLLM_DELAY (seconds before listening), FAKE_VLLM_EXIT (exit status to die
with before listening), FAKE_VLLM_ARGV (file to write the argv to), FAKE_VLLM_CHILD=1 (start a
child process that the server's shutdown must also stop; its pid goes to FAKE_VLLM_CHILD_PID).
"""

import json
import os
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

argv = sys.argv[1:]
if os.environ.get("FAKE_VLLM_ARGV"):
    with open(os.environ["FAKE_VLLM_ARGV"], "w") as fh:
        json.dump(argv, fh)
host = argv[argv.index("--host") + 1]
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


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/health":
            body = b""
        elif self.path == "/v1/models":
            body = json.dumps({"object": "list", "data": [{"id": model, "object": "model"}]}).encode()
        else:
            self.send_response(404)
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
