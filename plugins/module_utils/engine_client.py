# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A small OpenAI-compatible HTTP client for the inference engine, standard library only.

Modules that use it run on the nodes with the system ``python3``, so there is no ``requests``.
Every socket operation (connect, send, each read) has ``timeout`` seconds; nothing waits
forever. A stream may also be given a total ``deadline``.

Errors:

- No answer at all raises :class:`EngineError` (engine_errors): ``kind`` "refused" (nothing listens,
  or the host cannot be reached), "timeout" (no byte for ``timeout`` seconds) or "protocol" (the peer
  closed the connection or spoke something that is not HTTP).
- An HTTP error status is returned as a :class:`Response` (``request``, ``health``) or in
  ``StreamResult.status``/``error`` (the stream calls); only the helpers that need a 200
  (``models``, ``tokenize``) raise ``EngineError`` of kind "http".
- Once a stream is under way, a timeout, a closed connection or an error event ends it: the
  figures gathered so far are kept and ``StreamResult.error`` says what happened (engine_stream).
"""

from __future__ import annotations

import copy
import http.client
import json
import socket
import time
from urllib.parse import urlsplit

from ansible_collections.sparkfold.cluster.plugins.module_utils.engine_errors import EngineError, error_message
from ansible_collections.sparkfold.cluster.plugins.module_utils.engine_stream import StreamResult, read_sse

# The options through which a module reaches the engine (doc fragment sparkfold.cluster.engine).
ENGINE_ENDPOINT_ARG_SPEC = {
    "url": {"type": "str", "default": "http://127.0.0.1:8000"},
    "api_key": {"type": "str", "no_log": True},
}
NO_TOKENIZE = (404, 405, 501)


class Response:
    """One complete HTTP response: ``status``, ``headers`` (lower-case names), ``text``, ``json``."""

    __slots__ = ("headers", "json", "status", "text")

    def __init__(self, status, headers, text):
        self.status = status
        self.headers = headers
        self.text = text
        self.json = None
        if text.strip():
            try:
                self.json = json.loads(text)
            except ValueError:
                self.json = None

    def __repr__(self):
        return f"Response(status={self.status}, text={self.text[:80]!r})"


# TensorFold's /health with --parallel: "A `--parallel` server adds `streams` (decoding, prefilling and the
# maximum), and `context_length` is the served window" (ashhart/TensorFold docs/api.md @01ecc8d).
STREAMS_KEYS = ("decoding", "prefilling", "max")


def health_streams(body):
    """(streams, note) from a /health body: TensorFold's ``streams`` as ``{decoding, prefilling, max}``.

    ``(None, None)`` when the body has no ``streams`` (one request at a time, API keys on, vLLM, llama.cpp);
    ``(None, note)`` when it has one of another shape: it is reported, not guessed at.
    """
    if not isinstance(body, dict) or "streams" not in body:
        return None, None
    streams = body["streams"]
    if isinstance(streams, dict) and all(
            isinstance(streams.get(key), int) and not isinstance(streams.get(key), bool) for key in STREAMS_KEYS):
        return {key: streams[key] for key in STREAMS_KEYS}, None
    shown = json.dumps(streams, sort_keys=True)
    return None, (f"/health's streams is not TensorFold's {{decoding, prefilling, max}} and was not read: "
                  f"{shown[:200]}")


def _llama_cpp_ignored_prompt(data):
    """True for llama.cpp's answer to a /tokenize body without ``content``: ``{"tokens": []}``, no ``count``."""
    return isinstance(data, dict) and data.get("tokens") == [] and "count" not in data


class EngineClient:
    """Talks to one engine endpoint: ``url`` like ``http://127.0.0.1:8000`` (a trailing ``/`` or ``/v1`` is fine).

    ``api_key`` is sent as ``Authorization: Bearer <key>``; ``timeout`` bounds every socket operation;
    ``model`` (optional) is put in the body of the generation requests.
    """

    def __init__(self, url, api_key=None, timeout=30.0, model=None):
        text = (url or "").strip()
        if "://" not in text:
            text = "http://" + text
        parts = urlsplit(text)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url must be like http://127.0.0.1:8000, got {url!r}")
        path = parts.path.rstrip("/")
        if path.endswith("/v1"):
            path = path[: -len("/v1")]
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.prefix = path
        self.api_key = api_key or None
        self.timeout = float(timeout)
        self.model = model or None
        self._tokenize_field = "prompt"  # "content" once the server has shown it is llama.cpp's /tokenize
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.base_url = f"{self.scheme}://{host}:{self.port}{self.prefix}"
        self.address = f"{host}:{self.port}"

    def without_key(self):
        """A client of the same endpoint, timeout and model that sends no API key (to see whether the key is
        enforced: an engine that serves /v1/ without it did not read the key it was given)."""
        other = copy.copy(self)
        other.api_key = None
        return other

    # --- plumbing ---------------------------------------------------------------------------
    def _connection(self, timeout):
        cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        return cls(self.host, self.port, timeout=timeout)

    def _headers(self, body, accept="application/json"):
        headers = {"Accept": accept, "Connection": "close", "User-Agent": "sparkfold-engine-client/1"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def _with_model(self, body):
        """``body`` with this client's ``model`` added, when it has one (every request that names a model)."""
        if self.model:
            body["model"] = self.model
        return body

    @staticmethod
    def _ok(resp, method, path):
        """``resp`` when its status is 200; else EngineError kind "http" with the error the body gives."""
        if resp.status != 200:
            raise EngineError(f"{method} {path} answered {resp.status}: {error_message(resp.text)}", "http",
                              resp.status, resp.text)
        return resp

    def _fail(self, exc, method, path, phase):
        """EngineError for a socket-level failure ``exc`` during ``phase`` (connect/send/read)."""
        where = f"{method} {path} on {self.address}"
        if isinstance(exc, EngineError):
            return exc
        if isinstance(exc, (socket.timeout, TimeoutError)):
            if phase == "connect":
                return EngineError(f"timeout: no connection to {self.address} within {self.timeout:g} s", "timeout")
            return EngineError(f"timeout: no answer to {where} within {self.timeout:g} s", "timeout")
        if isinstance(exc, ConnectionRefusedError):
            return EngineError(f"connection refused on {self.address}", "refused")
        if phase == "connect" and isinstance(exc, OSError):
            reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            return EngineError(f"cannot connect to {self.address}: {reason}", "refused")
        if isinstance(exc, http.client.RemoteDisconnected):
            return EngineError(f"{where}: the server closed the connection without answering", "protocol")
        if isinstance(exc, (ConnectionError, http.client.HTTPException, OSError)):
            reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            return EngineError(f"{where}: {reason}", "protocol")
        return EngineError(f"{where}: {exc}", "protocol")

    def _open(self, method, path, body, accept, timeout):
        """Send a request; return (connection, HTTPResponse, monotonic time the request was sent)."""
        payload = None if body is None else json.dumps(body).encode("utf-8")
        conn = self._connection(timeout)
        try:
            conn.connect()
        except Exception as exc:
            conn.close()
            raise self._fail(exc, method, path, "connect") from None
        t_sent = time.monotonic()
        try:
            conn.request(method, self.prefix + path, body=payload, headers=self._headers(body, accept))
            resp = conn.getresponse()
        except Exception as exc:
            conn.close()
            raise self._fail(exc, method, path, "read") from None
        return conn, resp, t_sent

    # --- plain requests ---------------------------------------------------------------------
    def request(self, method, path, body=None):
        """One request; returns a Response whatever the status. Raises EngineError without one."""
        conn, resp, _t = self._open(method, path, body, "application/json", self.timeout)
        try:
            raw = resp.read()
        except Exception as exc:
            raise self._fail(exc, method, path, "read") from None
        finally:
            conn.close()
        headers = {name.lower(): value for name, value in resp.getheaders()}
        return Response(resp.status, headers, raw.decode("utf-8", errors="replace"))

    def health(self):
        """GET /health (any status comes back as a Response)."""
        return self.request("GET", "/health")

    def models(self):
        """Model ids from GET /v1/models; EngineError kind "http" on a non-200 status."""
        resp = self._ok(self.request("GET", "/v1/models"), "GET", "/v1/models")
        data = resp.json.get("data") if isinstance(resp.json, dict) else None
        if not isinstance(data, list):
            raise EngineError(
                f"GET /v1/models did not answer an OpenAI model list (no 'data' list): {resp.text[:200]!r}",
                "protocol", resp.status, resp.text,
            )
        return [str(item["id"]) for item in data if isinstance(item, dict) and "id" in item]

    def tokenize(self, text):
        """Token count of ``text`` from POST /tokenize; None when the server has no /tokenize.

        TensorFold and vLLM take vLLM's fields (ashhart/TensorFold docs/api.md @01ecc8d: "`/tokenize`
        takes vLLM's fields: a `prompt` string ... It returns `count`, `max_model_len` ... and
        `tokens`"), so ``{"prompt": text}`` goes first, with ``model`` when the client has one; the
        answer's ``count`` is read, else the length of ``tokens``. llama.cpp's /tokenize takes
        ``content`` instead: ``{"content": text}`` is sent only to a server that refuses ``prompt``
        (400 or 422), or that answers it as llama.cpp's server does, with an empty ``tokens`` list and
        no ``count`` (tools/server: the text is read only ``if (body.count("content") != 0)``). With
        API keys on, tokenization needs the key too ("All `/v1/*`, tokenization, metrics ... require a
        key"): the Bearer header goes with every request of this client. Once a server has shown that it
        reads ``content``, the client sends only that.
        """
        if self._tokenize_field == "content":
            resp = self.request("POST", "/tokenize", {"content": text})
        else:
            resp = self.request("POST", "/tokenize", self._with_model({"prompt": text}))
            if resp.status in (400, 422) or (text and resp.status == 200 and _llama_cpp_ignored_prompt(resp.json)):
                resp = self.request("POST", "/tokenize", {"content": text})
                if resp.status == 200:
                    self._tokenize_field = "content"
        if resp.status in NO_TOKENIZE:
            return None
        data = self._ok(resp, "POST", "/tokenize").json if isinstance(resp.json, dict) else {}
        count = data.get("count")
        if isinstance(count, int) and not isinstance(count, bool):
            return count
        if isinstance(data.get("tokens"), list):
            return len(data["tokens"])
        raise EngineError(f"POST /tokenize answered without a count or a token list: {resp.text[:200]!r}",
                          "protocol", resp.status, resp.text)

    # --- streams ----------------------------------------------------------------------------
    def _body(self, base, max_tokens, temperature, extra):
        body = self._with_model(dict(base))
        body["max_tokens"] = int(max_tokens)
        body["temperature"] = temperature
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
        if extra:
            body.update(extra)
        return body

    def stream_chat(self, messages, max_tokens, temperature=0.0, extra=None, deadline=None):
        """POST /v1/chat/completions with stream=true; a StreamResult (content of choices[0].delta)."""
        body = self._body({"messages": list(messages)}, max_tokens, temperature, extra)
        return self._stream("/v1/chat/completions", body, chat=True, deadline=deadline)

    def ask(self, text, max_tokens, temperature=0.0, extra=None, deadline=None):
        """``stream_chat`` of one user message, ``text``: the request of every check and measurement."""
        return self.stream_chat([{"role": "user", "content": text}], max_tokens, temperature, extra, deadline)

    def stream_completion(self, prompt, max_tokens, temperature=0.0, extra=None, deadline=None):
        """POST /v1/completions with stream=true; a StreamResult (choices[0].text)."""
        body = self._body({"prompt": prompt}, max_tokens, temperature, extra)
        return self._stream("/v1/completions", body, chat=False, deadline=deadline)

    def _stream(self, path, body, chat, deadline=None):
        """Send ``body`` and read its SSE answer. ``deadline``: seconds for the whole stream (None: no limit)."""
        conn, resp, t_sent = self._open("POST", path, body, "text/event-stream", self.timeout)
        result = StreamResult(t_sent)
        result.status = resp.status
        try:
            if resp.status != 200:
                try:
                    text = resp.read().decode("utf-8", errors="replace")
                except Exception as exc:  # a body that never ends still gives the status
                    text = f"(body unreadable: {self._fail(exc, 'POST', path, 'read')})"
                result.body = text
                result.error = f"POST {path} answered {resp.status}: {error_message(text)}"
                return result
            read_sse(resp, result, chat, path, deadline, self.timeout)
        finally:
            conn.close()
        return result
