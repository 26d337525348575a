# SPDX-License-Identifier: GPL-3.0-or-later
"""A tiny stdlib HTTP server that plays other engines' shapes (vLLM, llama.cpp) or misbehaves on purpose.

`FakeEngine()` is a context manager: `.url`, `.calls` ([(method, path, parsed body)]), and
`.route(method, path, handler)` where `handler(body, call_number) -> (status, body)`; the body is a
dict (sent as JSON), a str/bytes (sent as is), or a list of SSE payloads (each a dict, or the string
"[DONE]"; a str starting with ":" is sent as a comment line). `silent_server()` accepts connections
and never answers.
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
