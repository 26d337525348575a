# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Connect, read and stall timeouts for every Hub call of a module (module_utils/hub.py hub_client installs them).

huggingface_hub's shared HTTP client has no timeout of its own, and several HfApi calls (repo_info,
list_repo_refs, list_repo_commits, ...) pass none: a Hub or proxy that accepts the connection and never
answers hangs them for ever. use_timeouts() gives huggingface_hub a client (through its public
set_client_factory) whose request hook fills in every timeout a call leaves unset (None) with ours, and
whose response hook cuts off such a call's answer when it trickles (less than STALL_BYTES, or the rest
of the answer, within stall_timeout seconds). Calls that pass their own timeout keep it; the modules
pass theirs explicitly (http_timeout()) and watch their own downloads (module_utils/hub_download.py).

Every Hub module takes the three options (HUB_TIMEOUT_ARG_SPEC, documented by the doc fragment
sparkfold.cluster.hub.timeouts), so every message names an option the module has.
"""

from __future__ import annotations

import collections
import threading
import time

try:
    from huggingface_hub.utils import get_session, set_client_factory
except ImportError:  # pragma: no cover - reported by the modules through HAS_HF
    get_session = set_client_factory = None

try:  # huggingface_hub >= 2 talks HTTP through httpx2, 1.x through httpx
    import httpx2 as http_lib
except ImportError:  # pragma: no cover - depends on the huggingface_hub version
    try:
        import httpx as http_lib
    except ImportError:
        http_lib = None

DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_READ_TIMEOUT = 60.0
DEFAULT_STALL_TIMEOUT = 60.0
# An answer (or a download) must bring this many bytes, or the rest of it, every stall_timeout seconds.
STALL_BYTES = 1024 * 1024
# The key of request.extensions that marks a call whose answer the response hook watches (its stall_timeout).
STALL_EXTENSION = "sparkfold_stall_timeout"

# The timeout options of every Hub module (documented by the sparkfold.cluster.hub.timeouts fragment), in the
# manner of kubernetes.core's args_common: add them to the module's argument spec next to HUB_COMMON_ARG_SPEC;
# hub_client(params) reads them.
HUB_TIMEOUT_ARG_SPEC = {
    "connect_timeout": {"type": "float", "default": DEFAULT_CONNECT_TIMEOUT},
    "read_timeout": {"type": "float", "default": DEFAULT_READ_TIMEOUT},
    "stall_timeout": {"type": "float", "default": DEFAULT_STALL_TIMEOUT},
}
TIMEOUT_OPTIONS = (
    ("connect_timeout", DEFAULT_CONNECT_TIMEOUT),
    ("read_timeout", DEFAULT_READ_TIMEOUT),
    ("stall_timeout", DEFAULT_STALL_TIMEOUT),
)

HubTimeouts = collections.namedtuple("HubTimeouts", ["connect", "read", "stall"], defaults=(DEFAULT_STALL_TIMEOUT,))

_STATE = {"timeouts": None, "installed": False}
_LOCK = threading.Lock()


def hub_timeouts(params):
    """HubTimeouts of the module parameters (the defaults where a module has no such option).

    Raises ValueError naming the option when one is not a positive number.
    """
    values = []
    for name, default in TIMEOUT_OPTIONS:
        value = params.get(name)
        value = default if value is None else float(value)
        if value <= 0:
            raise ValueError(f"{name} must be a number of seconds above 0 (got {params.get(name)!r})")
        values.append(value)
    return HubTimeouts(*values)


def current_timeouts():
    """The HubTimeouts in force (the last use_timeouts), or the defaults."""
    return _STATE["timeouts"] or HubTimeouts(DEFAULT_CONNECT_TIMEOUT, DEFAULT_READ_TIMEOUT, DEFAULT_STALL_TIMEOUT)


def http_timeout(timeouts, read=None):
    """A timeout object for an explicit request: connect and pool from timeouts, read and write ``read``."""
    read = timeouts.read if read is None else read
    if http_lib is None:  # pragma: no cover - huggingface_hub is missing too
        return read
    return http_lib.Timeout(read, connect=timeouts.connect, pool=timeouts.connect)


def fill_timeouts(request):
    """Request hook: every timeout of the request left unset (None) gets the value in force.

    A request whose read timeout was unset (a call of huggingface_hub's own, not one of our downloads) is
    marked for guard_stall, with the stall_timeout in force.
    """
    timeouts = current_timeouts()
    wanted = {"connect": timeouts.connect, "read": timeouts.read, "write": timeouts.read, "pool": timeouts.connect}
    have = dict(request.extensions.get("timeout") or {})
    if have.get("read") is None:
        request.extensions[STALL_EXTENSION] = timeouts.stall
    for key, value in wanted.items():
        if have.get(key) is None:
            have[key] = value
    request.extensions["timeout"] = have


class AnswerStalled(http_lib.ReadTimeout if http_lib is not None else Exception):
    """An answer that brought less than STALL_BYTES (or its rest) within stall_timeout: a Hub or proxy that
    trickles. A ReadTimeout, so that every handler of timeouts takes it; timeout_message names stall_timeout."""

    def __init__(self, received, seconds, stall_timeout, request):
        super().__init__(
            f"only {received} bytes of the answer came in {seconds:.1f} s (stall_timeout={stall_timeout:g})",
            request=request,
        )
        self.received = received
        self.seconds = seconds
        self.stall_timeout = stall_timeout


class StallGuard(http_lib.SyncByteStream if http_lib is not None else object):
    """The body stream of an answer, cut off (AnswerStalled) when it trickles; see guard_stall."""

    def __init__(self, stream, stall_timeout, request, expected=None):
        self._stream = stream
        self._stall_timeout = stall_timeout
        self._request = request
        self._expected = expected

    @property
    def elapsed(self):  # what the client's own stream tells the response once closed
        return getattr(self._stream, "elapsed", None)

    def __iter__(self):
        window_start, window_bytes, received = time.monotonic(), 0, 0
        for chunk in self._stream:
            received += len(chunk)
            window_bytes += len(chunk)
            rest = None if self._expected is None else self._expected - received + window_bytes
            if window_bytes >= (STALL_BYTES if rest is None else min(STALL_BYTES, rest)):
                window_start, window_bytes = time.monotonic(), 0
            elif time.monotonic() - window_start > self._stall_timeout:
                raise AnswerStalled(window_bytes, time.monotonic() - window_start, self._stall_timeout,
                                    self._request)
            yield chunk

    def close(self):
        self._stream.close()


def guard_stall(response):
    """Response hook: the answer of a call fill_timeouts marked must not trickle (StallGuard)."""
    stall_timeout = response.request.extensions.get(STALL_EXTENSION)
    if stall_timeout is None or isinstance(response.stream, StallGuard):
        return
    try:
        expected = int(response.headers.get("Content-Length"))
    except (TypeError, ValueError):
        expected = None
    response.stream = StallGuard(response.stream, stall_timeout, response.request, expected)


def set_timeouts(timeouts):
    """Make ``timeouts`` (HubTimeouts) the values in force (current_timeouts) without touching the shared client.

    For a process whose calls so far all pass their timeout (http_timeout()): use_timeouts installs them later,
    and its messages (describe_timeout) already name the right values.
    """
    _STATE["timeouts"] = timeouts


def use_timeouts(timeouts):
    """Make every request of huggingface_hub's shared client time out per ``timeouts`` (HubTimeouts).

    The client is replaced once per process with one of the same class, the same event hooks plus
    fill_timeouts, and redirects followed as before; later calls only change the values. The hooks are read
    from huggingface_hub's shared client (get_session): made here when no call has made it yet (a client that
    is then thrown away), else the one the calls before used.
    """
    set_timeouts(timeouts)
    if set_client_factory is None:
        return
    with _LOCK:
        if _STATE["installed"]:
            return
        session = get_session()
        client_class = type(session)
        follow_redirects = session.follow_redirects
        ours = (fill_timeouts, guard_stall)
        hooks = {kind: [h for h in found if h not in ours] for kind, found in session.event_hooks.items()}
        hooks.setdefault("request", []).append(fill_timeouts)
        hooks.setdefault("response", []).append(guard_stall)

        def factory():
            return client_class(
                event_hooks={kind: list(found) for kind, found in hooks.items()},
                follow_redirects=follow_redirects,
                timeout=None,
            )

        set_client_factory(factory)
        _STATE["installed"] = True


def is_timeout(exc):
    return http_lib is not None and isinstance(exc, http_lib.TimeoutException)


def _host_of(exc):
    try:
        url = exc.request.url
    except (AttributeError, RuntimeError):  # an exception raised without its request
        return "the server"
    return f"{url.host}:{url.port}" if url.port else url.host


def timeout_message(exc, timeouts=None, read_option=None):
    """(host, what was waited for, seconds, option) of a timeout exception of the HTTP library.

    read_option: the option that set the read timeout, when not read_timeout.
    """
    timeouts = timeouts or current_timeouts()
    read_option = read_option or "read_timeout"
    host = _host_of(exc)
    if isinstance(exc, AnswerStalled):
        return (host, f"the rest of an answer from {host}, which sent only {exc.received} bytes of it",
                exc.stall_timeout, "stall_timeout")
    if isinstance(exc, http_lib.ConnectTimeout):
        return host, f"a connection to {host}", timeouts.connect, "connect_timeout"
    if isinstance(exc, http_lib.PoolTimeout):
        return host, f"a free connection to {host}", timeouts.connect, "connect_timeout"
    if isinstance(exc, http_lib.WriteTimeout):
        return host, f"{host} to take the request", timeouts.read, read_option
    return host, f"an answer from {host}, which accepted the connection", timeouts.read, read_option


def describe_timeout(exc, doing, timeouts=None, read_option=None):
    """The sentence for a Hub call cut off by a timeout: what was waited for, how long, what to do."""
    host, waited, seconds, option = timeout_message(exc, timeouts, read_option)
    return (
        f"{doing}: gave up after waiting {seconds:g} s for {waited} ({option}={seconds:g}). Check that {host} "
        "is reachable from this node and answers (proxy settings HTTPS_PROXY/NO_PROXY, firewall, the Hub's "
        f"status page), then run again; raise {option} only if the Hub is known to be that slow from here"
    )
