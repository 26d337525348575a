# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The file downloader of hub_snapshot: one Hub file into its staging file, verified against the Hub's hash.

Every file is first asked for with one HEAD (huggingface_hub's get_hf_file_metadata), which also tells whether
the Hub stores it with Xet (X-Xet-Hash, the `xetHash` of its listing). Then, per file:

- transfer=auto, a Xet-backed file and hf_xet installed (and HF_HUB_DISABLE_XET unset): huggingface_hub's
  public hf_hub_download moves the bytes, through hf_xet (chunked, parallel, deduplicated), into a staging
  folder beside the store; the result is hashed here against the Hub's sha256 before it goes anywhere.
- otherwise (transfer=http, a file not stored with Xet, or no hf_xet): our HTTP Range download below, through
  huggingface_hub's public helpers (http_stream_backoff, hf_raise_for_status) and its shared client, so proxies,
  headers and the timeouts of hub_client apply. huggingface_hub 2.4.0's own HTTP path (http_get under
  hf_hub_download) would be no faster (one stream per file, as here) and lacks what the fault tests need: it
  writes each attempt to a process-unique `.<uuid>.incomplete` file and deletes it when the download fails, so
  a killed or failed run resumes nothing; its only deadline is the read timeout HF_HUB_DOWNLOAD_TIMEOUT (a CDN
  that trickles a byte every few seconds is never cut); and it retries a dropped connection for as long as each
  attempt brings a byte. Those pieces are ours: Range resumes of what a killed or cut run left on disk, a stall
  deadline per connection, a bound on attempts without progress and a minimum rate over a window.
"""

from __future__ import annotations

import collections
import importlib.util
import os
import threading
import time
from urllib.parse import urlparse

from ansible_collections.sparkfold.cluster.plugins.module_utils.hub import HubError, describe_hub_error
from ansible_collections.sparkfold.cluster.plugins.module_utils.hub_timeouts import (
    STALL_BYTES,
    describe_timeout,
    http_lib,
    http_timeout,
    is_timeout,
)
from ansible_collections.sparkfold.cluster.plugins.module_utils.manifest import (
    HASH_CHUNK,
    expected_hash,
    format_bytes,
    hash_file,
    new_hasher,
)

try:
    from huggingface_hub import constants as hf_constants
    from huggingface_hub import errors as hf_errors
    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url
    from huggingface_hub.utils import build_hf_headers, hf_raise_for_status, http_stream_backoff
except ImportError:  # pragma: no cover - reported by the module through HAS_HF
    get_hf_file_metadata = hf_hub_download = hf_hub_url = build_hf_headers = hf_raise_for_status = None
    http_stream_backoff = hf_constants = hf_errors = None

TRANSIENT_HTTP_ERRORS = (http_lib.TransportError,) if http_lib is not None else (OSError,)
LIBRARY_NAME = "sparkfold-hub_snapshot"
# Seconds between attempts when a download stops early without new bytes (then the file fails; the next run resumes).
RETRY_DELAYS = (1, 2, 4, 8, 8)
# An attempt must bring STALL_BYTES (or the rest of the file) every stall_timeout seconds (DEFAULT_STALL_TIMEOUT, 60).
# Stalled or timed-out attempts in a row after which the file is given up (its partial download is kept).
STALL_ATTEMPTS = 2
# An attempt that ends early makes progress when it brings this many bytes (or the rest of the file); a CDN that
# sends a few KiB and drops the connection on every attempt does not, and is given up after download_retries.
PROGRESS_BYTES = 1024 * 1024
DEFAULT_DOWNLOAD_RETRIES = 5
# Whatever each attempt does, a file must average min_rate bytes/s over any rate_window seconds of its download.
DEFAULT_MIN_RATE = 64 * 1024
DEFAULT_RATE_WINDOW = 300.0
TRANSFERS = ("auto", "http")
# hf_xet's own bounds on a Xet download, which it reads from the environment when huggingface_hub makes its Xet
# session (at the first Xet download of the process: hf_xet/src/py_xet_session.rs builds it with the default
# config). huggingface/xet-core xet_config/src/groups/client.rs @58117e56fbfca833646070c1b0fc94320c4e3df4:
# HF_XET_CLIENT_READ_TIMEOUT "Maximum time allowed between receiving data packets during a transfer ... If no data
# is received for this duration, the connection is considered stalled"; HF_XET_CLIENT_CONNECT_TIMEOUT "Maximum time
# allowed to establish a TCP connection"; HF_XET_CLIENT_RETRY_MAX_ATTEMPTS "Retry at most this many times before
# permanently failing". Durations carry their unit: hf_xet 1.8.0 ignores a bare number (its XetConfig keeps the
# default, 300 s for the read timeout), hence milliseconds.
XET_BOUNDS = ("HF_XET_CLIENT_READ_TIMEOUT", "HF_XET_CLIENT_CONNECT_TIMEOUT", "HF_XET_CLIENT_RETRY_MAX_ATTEMPTS")

Located = collections.namedtuple("Located", "location headers xet_hash")


def xet_available():
    """Whether huggingface_hub would download Xet-backed files through hf_xet here (installed, not disabled)."""
    if hf_constants is None or getattr(hf_constants, "HF_HUB_DISABLE_XET", False):
        return False
    return importlib.util.find_spec("hf_xet") is not None


def _millis(seconds):
    return f"{max(1, round(seconds * 1000))}ms"


def xet_bounds(timeouts, stall_timeout, retries):
    """hf_xet's environment for the module's bounds: the read timeout of the HTTP path (the lower of read_timeout and
    stall_timeout), connect_timeout, and download_retries as the retries of one request."""
    values = (_millis(min(timeouts.read, stall_timeout)), _millis(timeouts.connect), str(retries))
    return dict(zip(XET_BOUNDS, values))


def library_progress(on_bytes):
    """A tqdm_class for hf_hub_download that shows nothing and tells ``on_bytes(n)`` of the file's bytes written.

    With update_transfer defined, huggingface_hub's Xet progress reporter sends the bytes written to the file
    (hf_xet's reconstruction) to update() and the network bytes (fewer, deduplicated) to update_transfer(),
    which are not counted. Its HTTP path sends the bytes it writes to update().
    """

    class LibraryProgress:
        def __init__(self, *_args, **kwargs):
            self.n = kwargs.get("initial") or 0
            self.total = kwargs.get("total")

        def update(self, count=1):
            if count:
                self.n += count
                on_bytes(count)

        def update_transfer(self, count=1):
            pass

        def set_postfix_str(self, *_args, **_kwargs):
            pass

        set_transfer_postfix_str = set_description = refresh = set_postfix_str

        def close(self):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *_exc):
            self.close()

    return LibraryProgress


class Stalled(Exception):
    """An attempt that brought too few bytes within the stall deadline (args: bytes, seconds)."""


class Downloader:
    """Downloads files of one commit. ``on_bytes(n)`` is told of every body byte written (n < 0: discarded).

    ``library_dir``: the staging folder of huggingface_hub's downloads (the Xet path), on the store's filesystem.
    """

    def __init__(self, repo_id, repo_type, revision, commit, endpoint, token, timeouts, stall_timeout, on_bytes,
                 transfer="auto", library_dir=None, retries=DEFAULT_DOWNLOAD_RETRIES, min_rate=DEFAULT_MIN_RATE,
                 rate_window=DEFAULT_RATE_WINDOW):
        self.repo_id = repo_id
        self.repo_type = repo_type
        self.revision = revision
        self.commit = commit
        self.endpoint = endpoint
        self.token = token
        self.timeouts = timeouts
        self.stall_timeout = stall_timeout
        self.on_bytes = on_bytes
        self.transfer = transfer
        self.library_dir = library_dir
        self.retries = retries
        self.min_rate = min_rate
        self.rate_window = rate_window
        self.use_xet = transfer == "auto" and xet_available()
        if self.use_xet:  # the task's environment wins: it names hf_xet's variables on purpose
            for name, value in xet_bounds(timeouts, stall_timeout, retries).items():
                os.environ.setdefault(name, value)
        self.downloaded = 0
        self.routes = {}  # path -> "xet" or "http", the route each fetched file took
        self._lock = threading.Lock()

    def _count(self, count):
        with self._lock:
            self.downloaded += count
        self.on_bytes(count)

    def locate(self, entry):
        """HEAD the file of the commit: return a Located (URL to GET, headers, Xet hash or None).

        Auth and gating errors show up here."""
        path = entry["path"]
        url = hf_hub_url(self.repo_id, path, repo_type=self.repo_type, revision=self.commit, endpoint=self.endpoint)
        token = self.token if self.token else False
        try:
            meta = get_hf_file_metadata(
                url,
                token=token,
                endpoint=self.endpoint,
                timeout=http_timeout(self.timeouts),
                retry_on_errors=True,
                library_name=LIBRARY_NAME,
            )
        except Exception as exc:
            if is_timeout(exc):
                raise HubError(describe_timeout(exc, f"{path}: asking for its location", self.timeouts),
                               kind="timeout") from exc
            raise describe_hub_error(exc, self.repo_id, self.revision, self.endpoint, self.token) from exc
        if meta.size is not None and meta.size != entry["size"]:
            raise HubError(
                f"{path}: the Hub's listing says {entry['size']} bytes but the file is {meta.size} bytes",
                kind="http",
            )
        headers = build_hf_headers(token=token, library_name=LIBRARY_NAME)
        headers["Accept-Encoding"] = "identity"  # byte ranges and sizes of the file itself, not of a gzip of it
        location = meta.location or url
        if urlparse(location).netloc != urlparse(url).netloc:
            headers.pop("authorization", None)  # a signed CDN URL: do not hand it the token
        xet_data = getattr(meta, "xet_file_data", None)
        return Located(location, headers, getattr(xet_data, "file_hash", None))

    def fetch(self, entry, partial, located=None):
        """Fill ``partial`` with the file and check its hash; raise HubError (partial kept to resume)."""
        path = entry["path"]
        kind, digest = expected_hash(entry)
        located = located or self.locate(entry)
        location, headers = located.location, located.headers
        os.makedirs(os.path.dirname(partial), exist_ok=True)
        if located.xet_hash and self.use_xet:
            self.routes[path] = "xet"
            self.fetch_with_library(entry, partial, kind, digest)
            return
        self.routes[path] = "http"
        for attempt in (1, 2):
            resumed, actual = self.fill(location, headers, partial, entry, kind)
            if actual == digest:
                return
            self.on_bytes(-entry["size"])
            os.unlink(partial)
            if not resumed or attempt == 2:
                raise HubError(
                    f"{path}: downloaded content has {kind} {actual}, the Hub lists {digest}; nothing was put "
                    f"in place (is endpoint {self.endpoint} serving the right data?)",
                    kind="hash_mismatch",
                )

    def fetch_with_library(self, entry, partial, kind, digest):
        """A Xet-backed file: huggingface_hub's hf_hub_download (through hf_xet) into library_dir, then verified.

        The module's bounds reach hf_xet through its environment (XET_BOUNDS, set in __init__): no byte within the
        read timeout and a connection is stalled, download_retries retries of one request. What the library does
        not do and this cannot add: a minimum rate over a window, and a resume across runs (hf_hub_download 2.4.0
        deletes its process-unique partial file when a download fails; a new run fetches the file again).
        Progress is counted as hf_xet writes the file, through the library's public tqdm_class hook.
        """
        path, size = entry["path"], entry["size"]
        seen = [0]

        def on_bytes(count):
            seen[0] += count
            self._count(count)

        try:
            got = hf_hub_download(
                self.repo_id,
                path,
                repo_type=self.repo_type,
                revision=self.commit,
                local_dir=self.library_dir,
                token=self.token if self.token else False,
                endpoint=self.endpoint,
                library_name=LIBRARY_NAME,
                etag_timeout=self.timeouts.read,
                tqdm_class=library_progress(on_bytes),
            )
        except Exception as exc:
            self._count(-seen[0])
            if is_timeout(exc):
                raise HubError(describe_timeout(exc, f"{path}: downloading it through hf_xet", self.timeouts),
                               kind="timeout") from exc
            if hf_errors is not None and isinstance(exc, hf_errors.HfHubHTTPError):  # the Hub's answers on the way
                error = describe_hub_error(exc, self.repo_id, self.revision, self.endpoint, self.token)
                raise HubError(f"{path}: {error.msg}", kind=error.kind) from exc
            if isinstance(exc, OSError):  # the store's disk (ENOSPC stops the other downloads too): fetch_one says so
                raise
            raise HubError(
                f"{path}: the Xet download (huggingface_hub's hf_hub_download through hf_xet) failed: "
                f"{type(exc).__name__}: {exc}. hf_xet keeps no partial file: the next run fetches {path} again from "
                "its first byte. Run again; if it fails again, set transfer=http to fetch it through the Hub's HTTP "
                "bridge, with Range resumes and the stall bounds",
                kind="xet",
            ) from exc
        actual_size = os.path.getsize(got)
        actual = hash_file(got, kind, actual_size) if actual_size == size else None
        if actual != digest:
            self._count(-seen[0])
            os.unlink(got)
            seen = f"{kind} {actual}" if actual else f"{actual_size} bytes instead of {size}"
            raise HubError(
                f"{path}: the Xet download (huggingface_hub with hf_xet) has {seen}, the Hub lists {kind} {digest}; "
                "nothing was put in place. Run again, or set transfer=http to fetch it over HTTP",
                kind="hash_mismatch",
            )
        os.replace(got, partial)
        self._count(size - seen[0])  # what the progress hook did not report (a file found already complete)

    def fill(self, location, headers, partial, entry, kind):
        """Fill ``partial`` up to the entry's size, resuming what is there; return (resumed, hex digest).

        Every chunk goes to disk (unbuffered) as it arrives, so what a killed run received is kept and
        asked for again with ``Range: bytes=<have>-`` only from the next byte on. A dropped connection
        is retried the same way, RETRY_DELAYS apart; ``retries`` attempts in a row that end early without
        progress (PROGRESS_BYTES, or the rest of the file) give the file up. An attempt that stalls (see
        _attempt) or times out is retried at once; STALL_ATTEMPTS in a row give the file up. Whatever the
        attempts do, the file must bring min_rate bytes/s over any rate_window seconds (see _check_rate).
        """
        size = entry["size"]
        fd = os.open(partial, os.O_RDWR | os.O_CREAT, 0o644)
        with os.fdopen(fd, "r+b", buffering=0) as handle:
            have = handle.seek(0, os.SEEK_END)
            if have > size:
                handle.truncate(0)
                have = 0
            resumed = have > 0
            hasher = new_hasher(kind, size)
            handle.seek(0)
            while handle.tell() < have:
                chunk = handle.read(min(have - handle.tell(), HASH_CHUNK))
                if not chunk:
                    break
                hasher.update(chunk)
            handle.seek(have)
            self.on_bytes(have)
            state = {"have": have, "hasher": hasher, "samples": collections.deque([(time.monotonic(), have)]),
                     "attempts": 0, "host": urlparse(location).netloc}
            failures = stalls = 0
            brought = []  # bytes of each attempt in the current run of attempts without progress
            while state["have"] < size:
                error = stall = None
                start = state["have"]
                state["attempts"] += 1
                try:
                    self._attempt(location, headers, handle, state, entry, kind)
                except Stalled as exc:
                    stall = exc
                except TRANSIENT_HTTP_ERRORS as exc:
                    if is_timeout(exc):
                        stall = exc
                    else:
                        error = exc
                have = state["have"]
                if have >= size:
                    break
                self._check_rate(entry, state)
                if stall is not None:
                    stalls += 1
                    if stalls >= STALL_ATTEMPTS:
                        raise self._stall_error(entry, location, stall, have)
                    continue
                if have - start >= min(PROGRESS_BYTES, size - start):
                    failures, brought = 0, []
                else:
                    failures += 1
                    brought.append(have - start)
                    if failures > self.retries:
                        raise self._no_progress_error(entry, state, brought, error)
                time.sleep(RETRY_DELAYS[min(max(failures, 1), len(RETRY_DELAYS)) - 1])
                self._check_rate(entry, state)
            os.fsync(handle.fileno())
        return resumed, state["hasher"].hexdigest()

    def _attempt(self, location, headers, handle, state, entry, kind):
        """One GET from byte state["have"] on, updating state (have, hasher) as bytes are written.

        Raises Stalled, or the HTTP library's errors.

        Stalled: fewer than STALL_BYTES (or the rest of the file) arrived within stall_timeout seconds. A
        server that sends nothing at all is cut by the read timeout, at most stall_timeout.
        """
        path, size = entry["path"], entry["size"]
        have = state["have"]
        request_headers = dict(headers)
        if have:
            request_headers["Range"] = f"bytes={have}-"
        read = min(self.timeouts.read, self.stall_timeout)
        # retry_on_exceptions=(): errors while reading the body must reach fill(), which resumes from the
        # bytes on disk; http_stream_backoff still retries 429 and 5xx answers.
        with http_stream_backoff(
            "GET", location, headers=request_headers, timeout=http_timeout(self.timeouts, read), retry_on_exceptions=()
        ) as response:
            hf_raise_for_status(response)
            if have and response.status_code != 206:  # the server ignored Range: start over
                handle.seek(0)
                handle.truncate(0)
                self.on_bytes(-have)
                state.update(have=0, hasher=new_hasher(kind, size))
                have = 0
            window_start, window_bytes = time.monotonic(), 0
            for chunk in response.iter_bytes():
                if not chunk:
                    continue
                if have + len(chunk) > size:
                    raise HubError(f"{path}: the server sent more than the {size} bytes the Hub lists", kind="http")
                _write_all(handle, chunk)
                state["hasher"].update(chunk)
                have += len(chunk)
                state["have"] = have
                window_bytes += len(chunk)
                self._count(len(chunk))
                now = time.monotonic()
                self._check_rate(entry, state, now)
                if window_bytes >= min(STALL_BYTES, size - have + window_bytes):
                    window_start, window_bytes = now, 0
                elif now - window_start > self.stall_timeout:
                    raise Stalled(window_bytes, now - window_start)

    def _check_rate(self, entry, state, now=None):
        """Give the file up when it brought less than min_rate bytes/s over the last rate_window seconds.

        Samples (time, bytes on disk) span the whole download of the file in this run, retries and their
        waits included, so a CDN that sends a little on every connection is measured as the user sees it.
        """
        if not self.min_rate:
            return
        now = time.monotonic() if now is None else now
        samples = state["samples"]
        have = state["have"]
        if samples[-1][0] < now - 0.05 or samples[-1][1] != have:
            samples.append((now, have))
        if now - samples[0][0] < self.rate_window:
            return
        while len(samples) > 1 and samples[1][0] <= now - self.rate_window:
            samples.popleft()
        got = have - samples[0][1]
        if got >= self.min_rate * self.rate_window:
            return
        path, size = entry["path"], entry["size"]
        raise HubError(
            f"{path}: {state['host']} brought {format_bytes(got)} in the last {self.rate_window:g} s "
            f"({format_bytes(got / self.rate_window)}/s over {state['attempts']} attempts), less than "
            f"min_rate={self.min_rate} bytes/s over rate_window={self.rate_window:g}; the file was given up at "
            f"{have} of {size} bytes. {self._kept(have)} The link or the CDN is too slow for this file: run again "
            "later or from another network; lower min_rate only if this link is really that slow.",
            kind="slow",
        )

    def _no_progress_error(self, entry, state, brought, error):
        path, size, have = entry["path"], entry["size"], state["have"]
        each = ", ".join(format_bytes(count) for count in brought[-5:])
        return HubError(
            f"{path}: {state['host']} ended the download early on {len(brought)} attempts in a row without progress "
            f"(each brought less than {format_bytes(min(PROGRESS_BYTES, size))}; the last ones brought {each}; "
            f"last: {error or 'connection closed before the end of the file'}); the file was given up at {have} "
            f"of {size} bytes after download_retries={self.retries}. {self._kept(have)} The server or a proxy drops "
            "the connection mid-file: run again later or from another network.",
            kind="network",
        )

    @staticmethod
    def _kept(have):
        return (
            f"The {format_bytes(have)} received are kept under .cache/huggingface/download and the next run "
            "resumes from there."
        )

    def _stall_error(self, entry, location, stall, have):
        path, size = entry["path"], entry["size"]
        kept = self._kept(have)
        if isinstance(stall, Stalled):
            got, seconds = stall.args
            host = urlparse(location).netloc
            need = format_bytes(min(STALL_BYTES, size))
            return HubError(
                f"{path}: {host} sent only {format_bytes(got)} in {seconds:.1f} s, less than the {need} "
                f"stall_timeout={self.stall_timeout:g} asks for, on {STALL_ATTEMPTS} attempts in a row; the file "
                f"was given up at {have} of {size} bytes. {kept} The server or a proxy trickles: run again later "
                "or from another network; raise stall_timeout only if this link is really that slow.",
                kind="stalled",
            )
        read_option = "stall_timeout" if self.stall_timeout < self.timeouts.read else None
        doing = f"{path}: downloading it ({have} of {size} bytes, {STALL_ATTEMPTS} attempts in a row)"
        timeouts = self.timeouts._replace(read=min(self.timeouts.read, self.stall_timeout))
        return HubError(f"{describe_timeout(stall, doing, timeouts, read_option)}. {kept}", kind="timeout")


def _write_all(handle, data):
    view = memoryview(data)
    while view:
        view = view[handle.write(view) :]
