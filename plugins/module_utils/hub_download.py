# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The file downloader of hub_snapshot: one Hub file into a resumable partial file, hashed as it streams.

HTTP goes through huggingface_hub's public helpers (get_hf_file_metadata, http_stream_backoff,
hf_raise_for_status) and its shared client, so proxies, headers and the timeouts of hub_client apply.
On top of them: HTTP Range resumes of what a killed or cut run left on disk, retries of dropped
connections, and a stall deadline (a CDN that trickles bytes).
"""

from __future__ import annotations

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
    new_hasher,
)

try:
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    from huggingface_hub.utils import build_hf_headers, hf_raise_for_status, http_stream_backoff
except ImportError:  # pragma: no cover - reported by the module through HAS_HF
    get_hf_file_metadata = hf_hub_url = build_hf_headers = hf_raise_for_status = http_stream_backoff = None

TRANSIENT_HTTP_ERRORS = (http_lib.TransportError,) if http_lib is not None else (OSError,)
LIBRARY_NAME = "sparkfold-hub_snapshot"
# Seconds between attempts when a download stops early without new bytes (then the file fails; the next run resumes).
RETRY_DELAYS = (1, 2, 4, 8, 8)
# An attempt must bring STALL_BYTES (or the rest of the file) every stall_timeout seconds (DEFAULT_STALL_TIMEOUT, 60).
# Stalled or timed-out attempts in a row after which the file is given up (its partial download is kept).
STALL_ATTEMPTS = 2


class Stalled(Exception):
    """An attempt that brought too few bytes within the stall deadline (args: bytes, seconds)."""


class Downloader:
    """Downloads files of one commit. ``on_bytes(n)`` is told of every body byte written (n < 0: discarded)."""

    def __init__(self, repo_id, repo_type, revision, commit, endpoint, token, timeouts, stall_timeout, on_bytes):
        self.repo_id = repo_id
        self.repo_type = repo_type
        self.revision = revision
        self.commit = commit
        self.endpoint = endpoint
        self.token = token
        self.timeouts = timeouts
        self.stall_timeout = stall_timeout
        self.on_bytes = on_bytes
        self.downloaded = 0
        self._lock = threading.Lock()

    def _count(self, count):
        with self._lock:
            self.downloaded += count
        self.on_bytes(count)

    def locate(self, entry):
        """HEAD the file of the commit: return (URL to GET, headers). Auth and gating errors show up here."""
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
        return location, headers

    def fetch(self, entry, partial, located=None):
        """Fill ``partial`` with the file and check its hash; raise HubError (partial kept to resume)."""
        path = entry["path"]
        kind, digest = expected_hash(entry)
        location, headers = located or self.locate(entry)
        os.makedirs(os.path.dirname(partial), exist_ok=True)
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

    def fill(self, location, headers, partial, entry, kind):
        """Fill ``partial`` up to the entry's size, resuming what is there; return (resumed, hex digest).

        Every chunk goes to disk (unbuffered) as it arrives, so what a killed run received is kept and
        asked for again with ``Range: bytes=<have>-`` only from the next byte on. A dropped connection
        is retried the same way, RETRY_DELAYS apart, as long as each attempt brings new bytes. An attempt
        that stalls (see read) or times out is retried at once; STALL_ATTEMPTS in a row give the file up.
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
            state = {"have": have, "hasher": hasher}
            failures = stalls = 0
            while state["have"] < size:
                error = stall = None
                start = state["have"]
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
                if stall is not None:
                    stalls += 1
                    if stalls >= STALL_ATTEMPTS:
                        raise self._stall_error(entry, location, stall, have)
                    continue
                failures = 1 if have > start else failures + 1
                if failures > len(RETRY_DELAYS):
                    raise HubError(
                        f"{entry['path']}: the download stopped at {have} of {size} bytes {failures} times in a row "
                        f"({error or 'connection closed early'}); the next run resumes it",
                        kind="network",
                    )
                time.sleep(RETRY_DELAYS[failures - 1])
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
                if window_bytes >= min(STALL_BYTES, size - have + window_bytes):
                    window_start, window_bytes = now, 0
                elif now - window_start > self.stall_timeout:
                    raise Stalled(window_bytes, now - window_start)

    def _stall_error(self, entry, location, stall, have):
        path, size = entry["path"], entry["size"]
        kept = (
            f"The {format_bytes(have)} received are kept under .cache/huggingface/download and the next run "
            "resumes from there."
        )
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
