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
- A model that thinks first (`thinking_chat`), as vLLM and SGLang serve DeepSeek with a reasoning parser: the
  thinking goes out in the chat delta's `reasoning_content` (vllm-project/vllm vllm/entrypoints/openai/protocol.py
  @0052bed36509c7a5a2d8e48265334e40cf2f5a0e `DeltaMessage`; sgl-project/sglang
  python/sglang/srt/entrypoints/openai/protocol.py @004c82e07d876f6e4a0ad6e15325706b0f478f1a `DeltaMessage`; later
  vLLM names it `reasoning`), the answer in `content`, both within the request's `max_tokens`; a
  `chat_template_kwargs` switch set false (vLLM's `enable_thinking`, SGLang's DeepSeek `thinking`) turns it off.
- A prompt cache (`PrefixCache`): the longest prefix of a prompt's tokens that an earlier prompt had is served from
  the cache and the reply says how many, as vLLM (`usage.prompt_tokens_details.cached_tokens`, automatic prefix
  caching) and llama.cpp (`timings.cache_n`) do.
"""

import contextlib
import json
import re
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


def thinking_chat(answer, thinking, key="reasoning_content", switch="enable_thinking"):
    """A chat handler of a model that thinks first: ``thinking`` word by word in ``delta.<key>``, then ``answer`` (a
    str, or a function of the request body giving one) in ``delta.content``, cut at the request's max_tokens
    (finish_reason "length"). ``chat_template_kwargs.<switch>`` false leaves the thinking out."""

    def handler(body, _n):
        reply = answer(body) if callable(answer) else answer
        off = (body.get("chat_template_kwargs") or {}).get(switch) is False
        words = ([] if off else [(key, w) for w in thinking.split(" ")]) + [("content", w) for w in reply.split(" ")]
        limit = body.get("max_tokens") or len(words)
        events, started = [], set()
        for field, word in words[:limit]:
            events.append({"object": "chat.completion.chunk", "choices": [
                {"index": 0, "delta": {field: word if field not in started else " " + word}, "finish_reason": None}]})
            started.add(field)
        sent = min(limit, len(words))
        finish = "stop" if sent == len(words) else "length"
        events.append({"object": "chat.completion.chunk",
                       "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
                       "usage": {"prompt_tokens": 9, "completion_tokens": sent, "total_tokens": 9 + sent}})
        events.append("[DONE]")
        return 200, events

    return handler


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


def _common(a, b):
    """How many leading items the lists ``a`` and ``b`` share."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


class PrefixCache:
    """A server with a prompt cache: every prompt's tokens are kept, and the longest prefix a new prompt shares with
    an earlier one is "served from the cache"; each reply says how many tokens that was.

    Tokens: a word or a punctuation mark each (``[bench`` is two, as a BPE tokenizer makes it); a chat request's
    tokens are the chat template's ``<bos> <|User|>`` (``TEMPLATE``), the user message's, then ``<|Assistant|>``; a
    completion's ``<bos>`` and the prompt's. A prompt sent twice is served from the cache the second time, all
    but its last token (llama.cpp evaluates that one again). ``records`` lists (path, prompt tokens, cached
    tokens, text) per request, in arrival order. Routes: `route(fake, reply)` sets /v1/models, /tokenize (vLLM's
    shape, this tokenizer, no template), /v1/chat/completions and /v1/completions; ``shape`` "vllm" (usage's
    prompt_tokens_details) or "llama.cpp" (timings.cache_n).
    """

    TEMPLATE = ("<bos>", "<|User|>")

    def __init__(self, shape="vllm"):
        self.shape = shape
        self.seen = []
        self.records = []
        self.lock = threading.Lock()

    @staticmethod
    def tokens(text):
        return re.findall(r"\w+|[^\w\s]", text)

    def _lookup(self, path, tokens, text):
        with self.lock:
            cached = max((_common(tokens, old) for old in self.seen), default=0)
            cached = min(cached, len(tokens) - 1)
            self.seen.append(tokens)
            self.records.append((path, len(tokens), cached, text))
        return cached

    def _usage(self, prompt_n, cached, completion_n):
        event = {"usage": {"prompt_tokens": prompt_n, "completion_tokens": completion_n,
                           "total_tokens": prompt_n + completion_n}}
        if self.shape == "llama.cpp":
            event["timings"] = {"cache_n": cached, "prompt_n": prompt_n - cached}
        else:
            event["usage"]["prompt_tokens_details"] = {"cached_tokens": cached}
        return event

    def route(self, fake, reply="The keeper lit the lamp and watched the sea until the morning came over the rocks"):
        def chat(body, _n):
            text = body["messages"][0]["content"]
            tokens = [*self.TEMPLATE, *self.tokens(text), "<|Assistant|>"]
            cached = self._lookup("/v1/chat/completions", tokens, text)
            words = reply.split()[:body.get("max_tokens") or None]
            events = chat_chunks(" ".join(words), usage=False)
            events[-2].update(self._usage(len(tokens), cached, len(words)))
            return 200, events

        def completion(body, _n):
            text = body["prompt"]
            tokens = ["<bos>", *self.tokens(text)]
            cached = self._lookup("/v1/completions", tokens, text)
            last = {"choices": [{"index": 0, "text": "", "finish_reason": "stop"}]}
            last.update(self._usage(len(tokens), cached, 1))
            return 200, [{"choices": [{"index": 0, "text": "ready", "finish_reason": None}]}, last, "[DONE]"]

        def tokenize(body, _n):
            tokens = self.tokens(body["prompt"])
            return 200, {"count": len(tokens), "max_model_len": None, "tokens": list(range(len(tokens)))}

        fake.route("GET", "/health", lambda body, n: (200, {"ok": True}))
        fake.route("GET", "/v1/models", lambda body, n: (200, models_list("m")))
        fake.route("POST", "/tokenize", tokenize)
        fake.route("POST", "/v1/chat/completions", chat)
        fake.route("POST", "/v1/completions", completion)
        return fake


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
