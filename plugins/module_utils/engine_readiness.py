# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Whether the inference engine is ready, and waiting until it is; standard library only.

:func:`wait_ready` asks /health and /v1/models through a :class:`Probe` until the engine is ready or the
time is up. /health is read as TensorFold, vLLM and llama.cpp answer it (the module
sparkfold.cluster.engine_health documents the states); the :class:`Probe` keeps the last state, since
when, and the state before a fatal or unavailable one. :class:`Final` is a state waiting cannot change.
:meth:`Probe.read_key_enforced` asks a ready engine /v1/models without the API key it was given.
"""

from __future__ import annotations

import time

from ansible_collections.sparkfold.cluster.plugins.module_utils.engine_errors import (
    EngineError,
    error_in,
    error_message,
)

HINTS = {
    "loading": "the engine opens HTTP only once the model is loaded on every rank; raise wait if loading takes "
               "longer, else look at the engine's journal on every node (is it running at all?)",
    "fatal": "the engine reported a fatal error: it exits and its service restarts it; look at the engine's journal "
             "on every node for the cause",
    "unavailable": "look at the engine's journal on this node",
    "timeout": "the engine accepts connections but does not answer: it may be wedged; look at its journal and "
               "restart it",
    "unauthorized": "set api_key to the key of the engine's --api-key-file",
    "key_not_enforced": "its key variable or flag (the recipe's container.api_key_env or launch flag) is not read by "
                        "this engine build, so anyone who reaches its port uses the API without a key; keep "
                        "recipe_api_host on loopback or fix the recipe so that the engine reads the key",
    "key_unknown": "an engine that enforces its key refuses a request without it (401 or 403); look at the engine's "
                   "journal and run again",
}

# How an engine with API keys answers a /v1/ request without one:
# - TensorFold: "Missing or invalid credentials return HTTP 401 ... All `/v1/*`, tokenization, metrics and their
#   inference aliases require a key" (ashhart/TensorFold docs/api.md @01ecc8dc204d07484f98ded75a51d20d6515c188);
# - vLLM: 401 {"error": "Unauthorized"} for every path under /v1 (vllm-project/vllm
#   vllm/entrypoints/openai/server_utils.py @029329a8eded26d05ef8d4a302a6c9f318817dd8 AuthenticationMiddleware);
# - SGLang: 401 {"error": "Unauthorized"} on a normal route, 403 {"error": "Forbidden"} on an admin route without an
#   admin key; only /health*, /ready* and /metrics* stay open (sgl-project/sglang python/sglang/srt/utils/auth.py
#   @0ce3659c2b55b6fb88c7b8ddf7401c61f8762c90 decide_request_auth).
KEY_REFUSED = (401, 403)


def _error_text(body):
    """The error a /health body reports; the body itself when it names none."""
    return error_in(body) or str(body)


class Probe:
    """Where the engine stands: the last state, since when, and what was read."""

    def __init__(self, client, url):
        self.client = client
        self.url = url
        self.state = None
        self.detail = ""
        self.since = time.monotonic()
        self.health = {}
        self.models = []
        self.probes = 0
        self.earlier = None  # the last fatal/unavailable state, kept when a later state replaces it

    def set(self, state, detail):
        if state != self.state or detail != self.detail:
            if self.state in ("fatal", "unavailable", "timeout") and state != self.state:
                self.earlier = self.detail
            self.state = state
            self.detail = detail
            self.since = time.monotonic()

    def _unreachable(self, exc, path, timeout):
        """Set the state of an EngineError that means no answer at all (refused, timeout); False for others."""
        if exc.kind == "refused":
            self.set("loading", f"still loading: {exc}")
        elif exc.kind == "timeout":
            self.set("timeout", f"no answer from {path} on {self.client.address} within {timeout:g} s")
        else:
            return False
        return True

    def read_health(self, timeout):
        """Ask /health once. Returns True when ready, False when not (yet), None when /health is absent."""
        self.probes += 1
        self.client.timeout = timeout
        try:
            resp = self.client.health()
        except EngineError as exc:
            if not self._unreachable(exc, "/health", timeout):
                self.set("unavailable", str(exc))
            return False
        body = resp.json
        if resp.text.strip() == "":
            self.health = {}
        elif isinstance(body, dict):
            self.health = body
        else:
            self.health = {"text": resp.text[:2000]}
        return self._judge(resp, body if isinstance(body, dict) else {})

    def _judge(self, resp, body):
        status = resp.status
        if status == 200:
            if body.get("ok") is False:
                self.set("fatal", f"/health says ok: false: {_error_text(body)}")
                return False
            if body.get("status") not in (None, "ok"):
                state = "loading" if "load" in str(body.get("status")).lower() else "unavailable"
                self.set(state, f"/health says status: {body.get('status')}")
                return False
            return True  # {"ok": true}, {"status": "ok"}, vLLM's empty 200, or another 200
        if status in (401, 403):
            self.set("unauthorized", f"{status} from /health: {error_message(resp.text)}")
            return False
        if status == 404:
            return None
        message = _error_text(body) if body else error_message(resp.text)
        if status == 503:
            if "loading" in message.lower() or str(body.get("status", "")).lower() == "loading":
                self.set("loading", f"still loading: 503 from /health: {message}")
            elif body.get("ok") is False:
                self.set("fatal", f"503 from /health: {message}")
            elif body.get("status") == "error":
                self.set("fatal", "503 from /health: status error (with API keys on the engine does not say why; "
                                  "see its journal)")
            else:
                self.set("unavailable", f"503 from /health: {message}")
            return False
        self.set("unavailable", f"{status} from /health: {message}")
        return False

    def read_models(self, timeout, served_name, has_key):
        """Ask /v1/models. True when served_name is listed (or not asked for); False to keep waiting.

        Raises Final for states that waiting cannot change.
        """
        self.client.timeout = timeout
        try:
            self.models = self.client.models()
        except EngineError as exc:
            if self._unreachable(exc, "/v1/models", timeout):
                return False
            if exc.status in (401, 403):
                why = "the engine refused the API key given" if has_key else "the engine wants an API key (none given)"
                detail = f"{exc.status} from /v1/models: {why}"
                self.set("unauthorized", detail)
                raise Final(f"{detail} ({error_message(exc.body or '')}); {HINTS['unauthorized']}") from None
            if exc.status == 503:
                self.set("loading", f"still loading: 503 from /v1/models: {error_message(exc.body or '')}")
            else:
                self.set("unavailable", str(exc))
            return False
        if served_name and served_name not in self.models:
            listed = ", ".join(self.models) if self.models else "nothing"
            detail = f"/v1/models does not list served_name {served_name}; it lists {listed}"
            self.set("wrong_model", detail)
            raise Final(
                f"{detail}. Set served_name to the engine's --name (recipe_api_served_name), or restart the "
                f"engine with --name {served_name}"
            )
        return True

    def read_key_enforced(self, timeout):
        """Ask /v1/models once WITHOUT the API key (the engine is ready and answered it with the key).

        True when the engine refuses it (401 or 403): the key is enforced. False when it serves it (200): the
        engine did not read the key it was given. None for any other answer, or none: that proves nothing.
        Sets the state (key_not_enforced, key_unknown) when it is not True.
        """
        client = self.client.without_key()
        client.timeout = timeout
        try:
            resp = client.request("GET", "/v1/models")
        except EngineError as exc:
            self.set("key_unknown", f"could not tell whether the engine enforces the API key: {exc}")
            return None
        if resp.status in KEY_REFUSED:
            return True
        if resp.status == 200:
            self.set("key_not_enforced", f"the engine at {client.base_url} served /v1/models without the API key")
            return False
        self.set("key_unknown", f"could not tell whether the engine enforces the API key: GET /v1/models without it "
                                f"answered {resp.status}: {error_message(resp.text)}")
        return None


class Final(Exception):
    """A state that waiting does not change: fail now."""


def wait_ready(probe, wait, interval, timeout, served_name, has_key):
    """Probe until ready or ``wait`` seconds have passed. Returns True when ready. Raises Final."""
    start = time.monotonic()
    deadline = start + wait
    while True:
        remaining = deadline - time.monotonic()
        request_timeout = timeout if wait <= 0 else max(1.0, min(timeout, remaining + 1.0))
        healthy = probe.read_health(request_timeout)
        if probe.state == "unauthorized":
            raise Final(f"{probe.detail}; {HINTS['unauthorized']}")
        if healthy is None or healthy:
            if healthy is None:
                probe.set("loading", "no /health route (404); judging by /v1/models")
            if probe.read_models(request_timeout, served_name, has_key):
                probe.set("ready", "ready")
                return True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        time.sleep(min(interval, remaining))
