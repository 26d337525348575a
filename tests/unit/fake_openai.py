# SPDX-License-Identifier: GPL-3.0-or-later
"""A tiny stdlib HTTP server that plays other engines' shapes (vLLM, llama.cpp) or misbehaves on purpose.

`FakeEngine()` is a context manager: `.url`, `.calls` ([(method, path, parsed body, headers)]), and
`.route(method, path, handler)` where `handler(body, call_number) -> (status, body)`; the body is a
dict (sent as JSON), a str/bytes (sent as is), or a list of SSE payloads (each a dict, or the string
"[DONE]"; a str starting with ":" is sent as a comment line). `silent_server()` accepts connections
and never answers.

The shapes the engines really answer, as their sources show them:

- TensorFold /health: `tensorfold_health()`, the body of sfxnz/DeepSeek-V4.1-Flash-EXL3-TensorFold-2x-DGX-Spark
  evidence/s2-run-sh-ec28f35/bootA/gate/health-after.json; "A `--parallel` server adds `streams` (decoding,
  prefilling and the maximum), and `context_length` is the served window" (ashhart/TensorFold docs/api.md
  @01ecc8d); with API keys on only {"status": "ok"}. vLLM's /health is an empty 200.
- /tokenize: `tokenize_vllm` takes vLLM's `prompt` (TensorFold and vLLM) and answers `count`, `max_model_len`
  and `tokens`; `tokenize_llama_cpp` takes `content` and answers `tokens` only, and an empty list for a body
  without `content` (llama.cpp tools/server).
- llama.cpp's served context: `/v1/models` `data[].meta` (`n_ctx_train` is the trained window, not the served
  one; some builds add `n_ctx`) and `/props` `default_generation_settings.n_ctx` (`llama_cpp_models`,
  `llama_cpp_props`).
"""

import contextlib
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOST = "127.0.0.1"


def chat_chunks(text, usage=True, done=True):
    """SSE payloads of a chat stream giving ``text`` word by word."""
    words = text.split(" ")
    events = [
        {"object": "chat.completion.chunk",
         "choices": [{"index": 0, "delta": {"content": w if i == 0 else " " + w}, "finish_reason": None}]}
        for i, w in enumerate(words)
    ]
    last = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    if usage:
        last["usage"] = {"prompt_tokens": 7, "completion_tokens": len(words), "total_tokens": 7 + len(words)}
    events.append(last)
    if done:
        events.append("[DONE]")
    return events


def models_list(*names):
    return {"object": "list", "data": [{"id": n, "object": "model", "owned_by": "fake"} for n in names]}


def tensorfold_health(context_length=65538, parallel=None, decoding=0, prefilling=0, running=0, **extra):
    """TensorFold's /health body: the sfxnz evidence's fields, `streams` when it serves with --parallel."""
    body = {
        "ok": True, "backend": "tensorfold", "busy": running > 0, "requests_running": running,
        "requests_total": 32, "prompt_tokens_total": 1012, "completion_tokens_total": 6475,
        "prefill_seconds_total": 3.736281, "decode_seconds_total": 144.605681, "cached_tokens_total": 871,
        "rounds_total": 2269, "drafted_total": 6728, "accepted_total": 4174, "context_length": context_length,
    }
    if parallel is not None:
        body["streams"] = {"decoding": decoding, "prefilling": prefilling, "max": parallel}
    body.update(extra)
    return body


def tokenize_vllm(max_model_len=None):
    """A /tokenize handler with vLLM's fields (TensorFold's too): one token per whitespace-separated word.

    A body without a `prompt` string (or `messages`) gets vLLM's 400.
    """

    def handler(body, _number):
        if not isinstance(body, dict) or not isinstance(body.get("prompt", body.get("messages")), (str, list)):
            return 400, {"object": "error", "message": "Field required: prompt", "type": "BadRequestError",
                         "code": 400}
        text = body["prompt"] if "prompt" in body else " ".join(m["content"] for m in body["messages"])
        tokens = list(range(len(text.split())))
        return 200, {"count": len(tokens), "max_model_len": max_model_len, "tokens": tokens}

    return handler


def tokenize_llama_cpp(body, _number):
    """llama.cpp's /tokenize: `content` only; a body without it gets an empty token list, not an error."""
    text = body.get("content") if isinstance(body, dict) else None
    return 200, {"tokens": list(range(len(text.split()))) if isinstance(text, str) else []}


def llama_cpp_models(name, n_ctx_train=131072, n_ctx=None):
    """llama.cpp's /v1/models: `meta` has the trained window; some builds add the served `n_ctx`."""
    meta = {"vocab_type": 2, "n_vocab": 129280, "n_ctx_train": n_ctx_train, "n_embd": 7168, "n_params": 10 ** 9,
            "size": 10 ** 9}
    if n_ctx is not None:
        meta["n_ctx"] = n_ctx
    return {"object": "list", "data": [{"id": name, "object": "model", "owned_by": "llamacpp", "meta": meta}]}


def llama_cpp_props(n_ctx):
    """llama.cpp's /props: one slot's settings (its n_ctx is the window one request gets)."""
    return {"default_generation_settings": {"n_ctx": n_ctx, "params": {"n_predict": -1}}, "total_slots": 1,
            "model_path": "/models/model.gguf"}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, *args):
        pass

    def _serve(self):
        fake = self.server.fake
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode()
        path = self.path.split("?")[0]
        with fake.lock:
            fake.calls.append((self.command, path, body, dict(self.headers)))
            number = sum(1 for c in fake.calls if c[0] == self.command and c[1] == path)
        handler = fake.routes.get((self.command, path))
        if handler is None:
            status, payload = 404, {"error": {"message": f"no route {path}", "code": 404}}
        else:
            status, payload = handler(body, number)
        if isinstance(payload, list):
            self.send_response(status)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for event in payload:
                if isinstance(event, str) and event.startswith(":"):
                    line = event + "\n\n"
                elif event == "[DONE]":
                    line = "data: [DONE]\n\n"
                else:
                    line = "data: " + json.dumps(event) + "\n\n"
                self.wfile.write(line.encode())
                self.wfile.flush()
            return
        if isinstance(payload, dict):
            data, ctype = json.dumps(payload).encode(), "application/json"
        else:
            data, ctype = payload.encode() if isinstance(payload, str) else payload, "text/plain"
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = _serve
    do_POST = _serve


class FakeEngine:
    def __init__(self):
        self.routes = {}
        self.calls = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer((HOST, 0), _Handler)
        self.server.daemon_threads = True
        self.server.fake = self
        self.port = self.server.server_address[1]
        self.url = f"http://{HOST}:{self.port}"
        self.thread = None

    def route(self, method, path, handler):
        self.routes[(method, path)] = handler
        return self

    def __enter__(self):
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


@contextlib.contextmanager
def silent_server():
    """A port that accepts connections (the kernel's backlog) and never answers; yields its URL."""
    sock = socket.socket()
    sock.bind((HOST, 0))
    sock.listen(16)
    try:
        yield f"http://{HOST}:{sock.getsockname()[1]}"
    finally:
        sock.close()
