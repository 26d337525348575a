# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Connect and read timeouts for every Hub call of a module (module_utils/hub.py hub_client installs them).

huggingface_hub's shared HTTP client has no timeout of its own, and several HfApi calls (repo_info,
list_repo_refs, list_repo_commits, ...) pass none: a Hub or proxy that accepts the connection and never
answers hangs them for ever. use_timeouts() gives huggingface_hub a client (through its public
set_client_factory) whose request hook fills in every timeout a call leaves unset (None) with ours.
Calls that pass their own timeout keep it; the modules pass theirs explicitly (http_timeout()).
"""

from __future__ import annotations

import collections
import threading

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

# Options of the Hub modules that take timeouts (documented by the sparkfold.cluster.hub.timeouts fragment).
# Add them to a module's argument spec next to HUB_COMMON_ARG_SPEC; hub_client(params) reads them.
HUB_TIMEOUT_ARG_SPEC = {
    "connect_timeout": {"type": "float", "default": DEFAULT_CONNECT_TIMEOUT},
    "read_timeout": {"type": "float", "default": DEFAULT_READ_TIMEOUT},
}

HubTimeouts = collections.namedtuple("HubTimeouts", ["connect", "read"])

_STATE = {"timeouts": None, "installed": False}
_LOCK = threading.Lock()


def hub_timeouts(params):
    """HubTimeouts of the module parameters (the defaults where a module has no such option).

    Raises ValueError naming the option when one is not a positive number.
    """
    values = []
    for name, default in (("connect_timeout", DEFAULT_CONNECT_TIMEOUT), ("read_timeout", DEFAULT_READ_TIMEOUT)):
        value = params.get(name)
        value = default if value is None else float(value)
        if value <= 0:
            raise ValueError(f"{name} must be a number of seconds above 0 (got {params.get(name)!r})")
        values.append(value)
    return HubTimeouts(*values)


def current_timeouts():
    """The HubTimeouts in force (the last use_timeouts), or the defaults."""
    return _STATE["timeouts"] or HubTimeouts(DEFAULT_CONNECT_TIMEOUT, DEFAULT_READ_TIMEOUT)


def http_timeout(timeouts, read=None):
    """A timeout object for an explicit request: connect and pool from timeouts, read and write ``read``."""
    read = timeouts.read if read is None else read
    if http_lib is None:  # pragma: no cover - huggingface_hub is missing too
        return read
    return http_lib.Timeout(read, connect=timeouts.connect, pool=timeouts.connect)


def fill_timeouts(request):
    """Request hook: every timeout of the request left unset (None) gets the value in force."""
    timeouts = current_timeouts()
    wanted = {"connect": timeouts.connect, "read": timeouts.read, "write": timeouts.read, "pool": timeouts.connect}
    have = dict(request.extensions.get("timeout") or {})
    for key, value in wanted.items():
        if have.get(key) is None:
            have[key] = value
    request.extensions["timeout"] = have


def use_timeouts(timeouts):
    """Make every request of huggingface_hub's shared client time out per ``timeouts`` (HubTimeouts).

    The client is replaced once per process with one of the same class, the same event hooks plus
    fill_timeouts, and redirects followed as before; later calls only change the values.
    """
    _STATE["timeouts"] = timeouts
    if set_client_factory is None:
        return
    with _LOCK:
        if _STATE["installed"]:
            return
        session = get_session()
        client_class = type(session)
        follow_redirects = session.follow_redirects
        hooks = {kind: [h for h in found if h is not fill_timeouts] for kind, found in session.event_hooks.items()}
        hooks.setdefault("request", []).append(fill_timeouts)

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
