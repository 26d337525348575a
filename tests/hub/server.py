# SPDX-License-Identifier: GPL-3.0-or-later
"""Offline Hugging Face Hub server for tests (stdlib only, Python 3.8+).

Serves the fixture repos of `fixtures.py` with the Hub's wire format, as huggingface_hub 2.x reads it:

  GET  /api/whoami-v2
  GET  /api/models/{repo}[/revision/{rev}]          model_info (?blobs=true: size/blobId/lfs per sibling)
  GET  /api/models/{repo}/refs[?include_prs=1]
  GET  /api/models/{repo}/commits/{rev}[?p=N]       Link-header pagination
  GET  /api/models/{repo}/tree/{rev}[/{path}]       ?recursive=&expand=, Link-header pagination (cursor)
  POST /api/models/{repo}/paths-info/{rev}          form or JSON: paths, expand
  GET  /api/models/{repo}/auth-check
  HEAD/GET /{repo}/resolve/{rev}/{path}            X-Repo-Commit, ETag, X-Linked-Etag/-Size (LFS), Range

Revisions may be URL-encoded (`refs%2Fpr%2F1`, `exl3%2F2.9bpw`) or not. Errors carry X-Error-Code,
X-Error-Message and a JSON body {"error": ...} like the Hub: RepoNotFound (401 anonymous, 404 with a
token), RevisionNotFound (404, "Invalid rev id: <rev>"), EntryNotFound (404), GatedRepo (401 anonymous,
403 for a valid token without access); an unknown token is 401 "Invalid credentials in Authorization header"
without an error code, as on the Hub.

Faults (a Hub or CDN that misbehaves), see `Fault`: "hang" (no answer at all), "stall" (a file's headers and
first bytes, then nothing), "trickle" (a file's bytes a few at a time), "gone" (404 EntryNotFound: a blob the
Hub or its CDN lost), besides `cut_after`.

Script: python3 server.py --root DIR [--port 8080] [--host 127.0.0.1] [--cut-after REPO/PATH=N ...]
[--fault REGEX=MODE ...] builds the fixture hub into DIR (or loads it if DIR/hub.json exists) and serves
until killed.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import signal
import socket
import struct
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, quote, unquote, urlsplit

try:
    from . import fixtures
except ImportError:  # run as a script, or copied next to fixtures.py
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import fixtures

CHUNK = 64 * 1024
BAD_CREDENTIALS = "Invalid credentials in Authorization header"
TRUE_VALUES = ("1", "true", "True", "yes")


class HubError(Exception):
    def __init__(self, status: int, message: str, code: str | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.headers = headers or {}


class Fault:
    """A misbehaving Hub or CDN for the requests whose unquoted path matches `pattern` (re.search).

    mode "hang": no answer at all; the connection stays open until the server stops or `hold` seconds pass.
    mode "stall": a file GET sends its headers and `after` body bytes, then nothing (as long as "hang").
    mode "trickle": a file GET (or an API answer) sends its headers and `after` body bytes, then `step` bytes
    every `interval` s.
    mode "gone": the request is answered 404 EntryNotFound (a file the Hub lists but can no longer serve).
    mode "drop": a file GET sends its headers (the full Content-Length) and `after` body bytes, stays silent
    for `interval` s, then closes the connection (a CDN that gives up mid-file on every attempt).
    times: how many requests it affects (None: every one); methods: the HTTP methods it affects.
    `hits` counts the requests it affected.
    """

    MODES = ("hang", "stall", "trickle", "gone", "drop")

    def __init__(self, pattern: str, mode: str, times: int | None = None, methods=("GET", "HEAD", "POST"),
                 after: int = 0, step: int = 1024, interval: float = 0.05, hold: float = 60.0):
        if mode not in self.MODES:
            raise ValueError(f"unknown fault mode {mode!r}")
        self.pattern = re.compile(pattern)
        self.mode = mode
        self.times = times
        self.methods = tuple(methods)
        self.after = after
        self.step = step
        self.interval = interval
        self.hold = hold
        self.hits = 0


class HubServer:
    """A Hub on 127.0.0.1 for the fixture repos.

    Attributes for assertions: `requests` [(method, unquoted path without query)], `request_log`
    [dicts: method, path (raw), query, range, auth (bool), status], `bytes_served` (file body bytes sent by
    GET /resolve). Fault injection: `cut_after["<repo>/<path>"] = n` makes the next GET of that file send
    its headers (full Content-Length) and only n body bytes, then drop the connection; later GETs are served
    normally (with Range).
    """

    def __init__(
        self,
        hub_data: fixtures.HubData,
        host: str = "127.0.0.1",
        port: int = 0,
        tree_page_size: int = 1000,
        tree_expand_page_size: int = 50,
        commits_page_size: int = 50,
    ):
        self.hub = hub_data
        self.host = host
        self.port = port
        self.tree_page_size = tree_page_size
        self.tree_expand_page_size = tree_expand_page_size
        self.commits_page_size = commits_page_size
        self.cut_after: dict[str, int] = {}
        # "<repo>/<path>" -> xet hash: files stored with Xet, as the Hub describes them (xetHash in the tree and
        # paths-info listings; X-Xet-Hash and the xet-auth Link on /resolve). No Xet storage (CAS) answers here:
        # the bytes still come over /resolve, as the Hub's HTTP bridge serves them to clients without hf_xet.
        self.xet: dict[str, str] = {}
        self.faults: list[Fault] = []
        self.released = threading.Event()  # set by stop(): hanging and stalled requests end
        self.requests: list[tuple[str, str]] = []
        # When set (a text stream), one line per request: "METHOD /path STATUS" (the lab reads it).
        self.access_log = None
        self.request_log: list[dict] = []
        self.bytes_served = 0
        self.lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    # -- lifecycle
    def _bind(self) -> ThreadingHTTPServer:
        handler = type("BoundHubHandler", (HubHandler,), {"hub_server": self})
        httpd = ThreadingHTTPServer((self.host, self.port), handler)
        httpd.daemon_threads = True
        self._httpd = httpd
        self.port = httpd.server_address[1]
        self.url = f"http://{self.host}:{self.port}"
        return httpd

    def start(self) -> str:
        httpd = self._bind()
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="hub-server", daemon=True
        )
        self._thread.start()
        return self.url

    def serve_forever(self) -> None:
        self._bind().serve_forever()

    def add_fault(self, pattern: str, mode: str, **kwargs) -> Fault:
        """Make the requests matching `pattern` misbehave (see Fault); return the Fault (its `hits`)."""
        fault = Fault(pattern, mode, **kwargs)
        with self.lock:
            self.faults.append(fault)
        return fault

    def take_fault(self, method: str, path: str) -> Fault | None:
        """The first fault that applies to this request, counted as used; None when none does."""
        with self.lock:
            for fault in self.faults:
                if method in fault.methods and fault.pattern.search(path) and (
                    fault.times is None or fault.hits < fault.times
                ):
                    fault.hits += 1
                    return fault
        return None

    def stop(self) -> None:
        self.released.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    def __enter__(self) -> HubServer:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def reset(self) -> None:
        """Forget recorded requests, served bytes and pending cuts."""
        with self.lock:
            self.requests.clear()
            self.request_log.clear()
            self.bytes_served = 0
            self.cut_after.clear()
            self.faults.clear()
            self.xet.clear()

    def file_gets(self, repo_id: str, path: str) -> list[dict]:
        """request_log entries of GET /resolve for one file (any revision)."""
        out = []
        for entry in self.request_log:
            m = re.match(rf"/{re.escape(repo_id)}/resolve/[^/]+/(.*)$", entry["path"])
            if entry["method"] == "GET" and m and unquote(m.group(1)) == path:
                out.append(entry)
        return out


# --------------------------------------------------------------------------- JSON shapes


def _tree_oid(entries: list[tuple[str, str]]) -> str:
    return hashlib.sha1(json.dumps(sorted(entries)).encode()).hexdigest()


def _safetensors_params(hub: fixtures.HubData, files: dict[str, fixtures.FileEntry]) -> dict | None:
    params: dict[str, int] = {}
    for path, entry in files.items():
        if not path.endswith(".safetensors"):
            continue
        with open(hub.blob_path(entry.sha256), "rb") as fh:
            (n,) = struct.unpack("<Q", fh.read(8))
            header = json.loads(fh.read(n))
        for name, info in header.items():
            if name == "__metadata__":
                continue
            count = 1
            for dim in info["shape"]:
                count *= dim
            params[info["dtype"]] = params.get(info["dtype"], 0) + count
    if not params:
        return None
    return {"parameters": params, "total": sum(params.values())}


class RepoView:
    """JSON documents for one repo, as the Hub writes them."""

    def __init__(self, hub: fixtures.HubData, repo: fixtures.RepoData, xet: dict[str, str] | None = None):
        self.hub = hub
        self.repo = repo
        self.xet = xet or {}

    def last_commit(self, commit: fixtures.Commit, path: str, is_dir: bool) -> fixtures.Commit:
        """Newest commit on the first-parent chain of `commit` that changed `path` (or anything under it)."""

        def snapshot(c: fixtures.Commit | None) -> dict:
            if c is None:
                return {}
            if is_dir:
                return {p: f.sha256 for p, f in c.files.items() if p.startswith(path + "/")}
            f = c.files.get(path)
            return {path: f.sha256} if f else {}

        current = commit
        while True:
            parent = self.repo.commits[current.parents[0]] if current.parents else None
            if parent is None or snapshot(parent) != snapshot(current):
                return current
            current = parent

    def commit_ref(self, c: fixtures.Commit) -> dict:
        return {"id": c.id, "title": c.title, "date": c.date}

    def file_json(self, commit: fixtures.Commit, entry: fixtures.FileEntry, expand: bool) -> dict:
        out = {"type": "file", "oid": entry.blob_id, "size": entry.size, "path": entry.path}
        if entry.lfs:
            out["lfs"] = {"oid": entry.sha256, "size": entry.size, "pointerSize": entry.pointer_size}
        xet_hash = self.xet.get(f"{self.repo.repo_id}/{entry.path}")
        if xet_hash:
            out["xetHash"] = xet_hash
        if expand:
            out["lastCommit"] = self.commit_ref(self.last_commit(commit, entry.path, False))
            out["securityFileStatus"] = {
                "status": "safe",
                "avScan": {"virusFound": False, "virusNames": None},
                "pickleImportScan": None,
            }
        return out

    def dir_json(self, commit: fixtures.Commit, path: str, expand: bool) -> dict:
        children = [(p, f.blob_id) for p, f in commit.files.items() if p.startswith(path + "/")]
        out = {"type": "directory", "oid": _tree_oid(children), "size": 0, "path": path}
        if expand:
            out["lastCommit"] = self.commit_ref(self.last_commit(commit, path, True))
        return out

    def directories(self, commit: fixtures.Commit) -> list[str]:
        dirs = set()
        for p in commit.files:
            parts = p.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                dirs.add("/".join(parts[:i]))
        return sorted(dirs)

    def tree(self, commit: fixtures.Commit, path: str, recursive: bool, expand: bool) -> list[dict]:
        dirs = self.directories(commit)
        if path and path not in dirs:
            raise HubError(404, "Entry not found", "EntryNotFound", {"X-Repo-Commit": commit.id})
        prefix = path + "/" if path else ""

        def wanted(p: str) -> bool:
            if not p.startswith(prefix) or p == path:
                return False
            return recursive or "/" not in p[len(prefix) :]

        entries = [(d, True) for d in dirs if wanted(d)] + [(p, False) for p in commit.files if wanted(p)]
        entries.sort(key=lambda e: (not e[1], e[0]))  # directories first, like the Hub
        return [
            self.dir_json(commit, p, expand) if is_dir else self.file_json(commit, commit.files[p], expand)
            for p, is_dir in entries
        ]

    def paths_info(self, commit: fixtures.Commit, paths: list[str], expand: bool) -> list[dict]:
        dirs = set(self.directories(commit))
        out = []
        for p in paths:
            p = p.strip("/")
            if p in commit.files:
                out.append(self.file_json(commit, commit.files[p], expand))
            elif p in dirs:
                out.append(self.dir_json(commit, p, expand))
        return out

    def model_info(self, commit: fixtures.Commit, blobs: bool, expand: list[str] | None) -> dict:
        repo = self.repo
        ns = repo.repo_id.split("/")[0]
        card = commit.card_data or {}
        oldest = min(repo.commits.values(), key=lambda c: c.date)
        tags = list(card.get("tags", []))
        if card.get("library_name"):
            tags.append(card["library_name"])
        if any(p.endswith(".safetensors") for p in commit.files):
            tags.append("safetensors")
        if card.get("base_model"):
            tags.append("base_model:{}".format(card["base_model"]))
            if card.get("base_model_relation"):
                tags.append("base_model:{}:{}".format(card["base_model_relation"], card["base_model"]))
        if card.get("license"):
            tags.append("license:{}".format(card["license"]))
        tags.append("region:us")
        siblings = []
        for entry in commit.files.values():
            sib = {"rfilename": entry.path}
            if blobs:
                sib["blobId"] = entry.blob_id
                sib["size"] = entry.size
                if entry.lfs:
                    sib["lfs"] = {"sha256": entry.sha256, "size": entry.size, "pointerSize": entry.pointer_size}
            siblings.append(sib)
        config = None
        if "config.json" in commit.files:
            try:
                full = json.loads(self.hub.read(commit.files["config.json"].sha256))
                config = {k: full[k] for k in ("architectures", "model_type", "quantization_config") if k in full}
            except ValueError:
                config = None
        used = {}
        for c in repo.commits.values():
            for f in c.files.values():
                used[f.sha256] = f.size
        info = {
            "_id": hashlib.sha1(repo.repo_id.encode()).hexdigest()[:24],
            "id": repo.repo_id,
            "modelId": repo.repo_id,
            "author": ns,
            "sha": commit.id,
            "lastModified": commit.date,
            "createdAt": oldest.date,
            "private": repo.private,
            "gated": repo.gated,
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "tags": tags,
            "pipeline_tag": card.get("pipeline_tag"),
            "library_name": card.get("library_name"),
            "cardData": card or None,
            "config": config,
            "siblings": siblings,
            "spaces": [],
            "usedStorage": sum(used.values()),
            "safetensors": _safetensors_params(self.hub, commit.files),
        }
        info = {k: v for k, v in info.items() if v is not None}
        if expand:
            info = {k: v for k, v in info.items() if k in expand or k in ("_id", "id")}
        return info

    def refs(self, include_prs: bool) -> dict:
        def ref(name: str, full: str, target: str) -> dict:
            return {"name": name, "ref": full, "targetCommit": target}

        out = {
            "branches": [ref(n, "refs/heads/" + n, t) for n, t in sorted(self.repo.branches.items())],
            "converts": [],
            "tags": [ref(n, "refs/tags/" + n, t) for n, t in sorted(self.repo.tags.items())],
        }
        if include_prs:
            out["pullRequests"] = [ref(n, n, t) for n, t in sorted(self.repo.pull_requests.items())]
        return out

    def commit_json(self, c: fixtures.Commit, formatted: bool) -> dict:
        out = {
            "id": c.id,
            "title": c.title,
            "message": c.message,
            "date": c.date,
            "authors": [{"user": a, "avatar": f"https://huggingface.co/avatars/{a}.svg"} for a in c.authors],
        }
        if formatted:
            out["formatted"] = {"title": f"<p>{c.title}</p>", "message": f"<p>{c.message}</p>"}
        return out


# --------------------------------------------------------------------------- HTTP


class HubHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "sparkfold-hub/1.0"
    hub_server = None  # the HubServer, set on the per-server subclass

    def log_message(self, *args) -> None:
        pass

    # -- plumbing
    def _log(self, status: int) -> None:
        split = urlsplit(self.path)
        if self.hub_server.access_log is not None:
            print(f"{self.command} {unquote(split.path)} {status}", file=self.hub_server.access_log, flush=True)
        with self.hub_server.lock:
            self.hub_server.requests.append((self.command, unquote(split.path)))
            self.hub_server.request_log.append(
                {
                    "method": self.command,
                    "path": split.path,
                    "query": split.query,
                    "range": self.headers.get("Range"),
                    "auth": self.headers.get("Authorization") is not None,
                    "status": status,
                }
            )

    def _send(
        self,
        status: int,
        body: bytes,
        headers: dict[str, str] | None = None,
        content_type: str = "application/json; charset=utf-8",
    ) -> None:
        self._log(status)
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Request-Id", f"Root=1-{uuid.uuid4().hex[:24]}")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command == "HEAD":
            return
        fault = getattr(self, "_fault", None)
        if fault is None or fault.mode != "trickle":
            self.wfile.write(body)
            return
        sent = 0  # an API answer that trickles: `after` bytes, then `step` bytes every `interval` s
        while sent < len(body):
            size = fault.after - sent if sent < fault.after else fault.step
            self.wfile.write(body[sent : sent + size])
            self.wfile.flush()
            sent += size
            if sent >= fault.after and self.hub_server.released.wait(fault.interval):
                break

    def _json(self, obj, status: int = 200, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(obj).encode(), headers)

    def _error(self, err: HubError) -> None:
        headers = dict(err.headers)
        if err.code:
            headers["X-Error-Code"] = err.code
        headers["X-Error-Message"] = err.message
        self._json({"error": err.message}, err.status, headers)

    def _query(self) -> dict[str, list[str]]:
        return parse_qs(urlsplit(self.path).query, keep_blank_values=True)

    def _flag(self, name: str) -> bool:
        values = self._query().get(name)
        return bool(values) and values[-1] in TRUE_VALUES

    def _base_url(self) -> str:
        host = self.headers.get("Host") or f"{self.hub_server.host}:{self.hub_server.port}"
        return f"http://{host}"

    # -- auth
    def _user(self) -> str | None:
        """The user behind the Authorization header; None when anonymous; HubError(401) for a bad token."""
        auth = self.headers.get("Authorization")
        if auth is None:
            return None
        m = re.match(r"Bearer\s+(\S+)\s*$", auth)
        if not m or m.group(1) not in fixtures.TOKEN_USERS:
            raise HubError(401, BAD_CREDENTIALS)
        return fixtures.TOKEN_USERS[m.group(1)]

    def _token(self) -> str | None:
        auth = self.headers.get("Authorization") or ""
        return auth.split()[-1] if auth else None

    def _repo(self, repo_id: str, user: str | None) -> fixtures.RepoData:
        repo = self.hub_server.hub.repos.get(repo_id)
        if repo is None:
            raise HubError(401 if user is None else 404, "Repository not found", "RepoNotFound")
        return repo

    def _check_gate(self, repo: fixtures.RepoData, user: str | None) -> None:
        if not repo.gated or self._token() in fixtures.GATED_ACCESS_TOKENS:
            return
        if user is None:
            raise HubError(
                401,
                f"Access to model {repo.repo_id} is restricted. You must have access to it and be "
                "authenticated to access it. Please log in.",
                "GatedRepo",
            )
        raise HubError(
            403,
            f"Access to model {repo.repo_id} is restricted and you are not in the authorized list. Visit "
            f"https://huggingface.co/{repo.repo_id} to ask for access.",
            "GatedRepo",
        )

    @staticmethod
    def _resolve(repo: fixtures.RepoData, segments: list[str], need_rest: bool) -> tuple[fixtures.Commit, str]:
        """Split raw path segments into (commit, rest path). Encoded or unencoded revisions with '/'."""
        limit = len(segments) - 1 if need_rest else len(segments)
        for k in range(limit, 0, -1):
            commit = repo.resolve(unquote("/".join(segments[:k])))
            if commit is not None:
                return commit, unquote("/".join(segments[k:]))
        rev = unquote(segments[0]) if segments else ""
        raise HubError(404, f"Invalid rev id: {rev}", "RevisionNotFound")

    # -- verbs
    def do_GET(self) -> None:
        self._dispatch()

    def do_HEAD(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self._body = self.rfile.read(length) if length else b""
        self._dispatch()

    def _dispatch(self) -> None:
        self._fault = self.hub_server.take_fault(self.command, unquote(urlsplit(self.path).path))
        if self._fault is not None and self._fault.mode == "hang":
            self._log(0)
            self.hub_server.released.wait(self._fault.hold)  # never answer
            self.close_connection = True
            return
        try:
            if self._fault is not None and self._fault.mode == "gone":
                raise HubError(404, "Entry not found", "EntryNotFound")
            self._route()
        except HubError as err:
            self._error(err)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _route(self) -> None:
        path = urlsplit(self.path).path
        seg = path.split("/")[1:]
        if seg[:2] == ["api", "whoami-v2"] and len(seg) == 2:
            return self._whoami()
        if len(seg) >= 2 and seg[0] == "api" and seg[1] in ("models", "datasets", "spaces"):
            return self._api(seg[1], seg[2:])
        if len(seg) >= 5 and seg[2] == "resolve" and self.command in ("GET", "HEAD"):
            return self._file(unquote(seg[0]) + "/" + unquote(seg[1]), seg[3:])
        raise HubError(404, "Sorry, we can't find the page you are looking for.")

    def _whoami(self) -> None:
        user = self._user()
        if user is None:
            raise HubError(401, "Invalid username or password.")
        self._json(
            {
                "type": "user",
                "id": hashlib.sha1(user.encode()).hexdigest()[:24],
                "name": user,
                "fullname": user,
                "email": None,
                "emailVerified": False,
                "canPay": False,
                "isPro": False,
                "periodEnd": None,
                "avatarUrl": f"https://huggingface.co/avatars/{user}.svg",
                "orgs": [],
                "auth": {
                    "type": "access_token",
                    "accessToken": {
                        "displayName": "sparkfold-test",
                        "role": "read",
                        "createdAt": "2026-01-01T00:00:00.000Z",
                    },
                },
            }
        )

    def _api(self, kind: str, seg: list[str]) -> None:
        user = self._user()
        if kind != "models" or len(seg) < 2:
            raise HubError(401 if user is None else 404, "Repository not found", "RepoNotFound")
        repo = self._repo(unquote(seg[0]) + "/" + unquote(seg[1]), user)
        view = RepoView(self.hub_server.hub, repo, self.hub_server.xet)
        rest = seg[2:]
        action = rest[0] if rest else ""
        if self.command == "POST":
            if action == "paths-info" and len(rest) >= 2:
                return self._paths_info(view, rest[1:])
            raise HubError(405, "Method not allowed")
        if not rest or (action == "revision" and len(rest) >= 2):
            commit = self._resolve(repo, rest[1:], False)[0] if rest else self._resolve(repo, ["main"], False)[0]
            expand = self._query().get("expand") or self._query().get("expand[]")
            return self._json(view.model_info(commit, self._flag("blobs"), expand))
        if action == "refs" and len(rest) == 1:
            return self._json(view.refs(self._flag("include_prs")))
        if action == "auth-check" and len(rest) == 1:
            self._check_gate(repo, user)
            return self._json({})
        if action == "commits" and len(rest) >= 2:
            return self._commits(view, rest[1:])
        if action == "tree" and len(rest) >= 2:
            return self._tree(view, rest[1:])
        raise HubError(404, "Sorry, we can't find the page you are looking for.")

    def _page_link(self, **params) -> dict[str, str]:
        split = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        query.update({k: str(v) for k, v in params.items()})
        qs = "&".join(f"{quote(k)}={quote(v)}" for k, v in query.items())
        return {"Link": f'<{self._base_url()}{split.path}?{qs}>; rel="next"'}

    def _commits(self, view: RepoView, segments: list[str]) -> None:
        commit = self._resolve(view.repo, segments, False)[0]
        history = view.repo.history(commit.id)
        page = int((self._query().get("p") or ["0"])[-1])
        size = self.hub_server.commits_page_size
        chunk = history[page * size : (page + 1) * size]
        formatted = "formatted" in (self._query().get("expand[]") or self._query().get("expand") or [])
        headers = self._page_link(p=page + 1) if (page + 1) * size < len(history) else {}
        self._json([view.commit_json(c, formatted) for c in chunk], headers=headers)

    def _tree(self, view: RepoView, segments: list[str]) -> None:
        commit, path = self._resolve(view.repo, segments, False)
        expand = self._flag("expand")
        entries = view.tree(commit, path.strip("/"), self._flag("recursive"), expand)
        cursor = int((self._query().get("cursor") or ["0"])[-1])
        size = self.hub_server.tree_expand_page_size if expand else self.hub_server.tree_page_size
        headers = self._page_link(cursor=cursor + size) if cursor + size < len(entries) else {}
        self._json(entries[cursor : cursor + size], headers=headers)

    def _paths_info(self, view: RepoView, segments: list[str]) -> None:
        commit = self._resolve(view.repo, segments, False)[0]
        ctype = self.headers.get("Content-Type") or ""
        if "json" in ctype:
            body = json.loads(self._body or b"{}")
            paths = body.get("paths") or []
            paths = [paths] if isinstance(paths, str) else paths
            expand = bool(body.get("expand"))
        else:
            form = parse_qs(self._body.decode(), keep_blank_values=True)
            paths = form.get("paths", [])
            expand = (form.get("expand") or ["false"])[-1] in TRUE_VALUES
        self._json(view.paths_info(commit, paths, expand))

    def _file(self, repo_id: str, segments: list[str]) -> None:
        user = self._user()
        repo = self._repo(repo_id, user)
        self._check_gate(repo, user)
        commit, path = self._resolve(repo, segments, True)
        entry = commit.files.get(path)
        if entry is None:
            raise HubError(404, "Entry not found", "EntryNotFound", {"X-Repo-Commit": commit.id})
        headers = {
            "X-Repo-Commit": commit.id,
            "ETag": f'"{entry.etag}"',
            "Accept-Ranges": "bytes",
        }
        if entry.lfs:
            headers["X-Linked-Etag"] = f'"{entry.sha256}"'
            headers["X-Linked-Size"] = str(entry.size)
            name = path.rsplit("/", 1)[-1]
            headers["Content-Disposition"] = f"inline; filename*=UTF-8''{quote(name)}; filename=\"{name}\";"
        xet_hash = self.hub_server.xet.get(f"{repo_id}/{path}")
        if xet_hash:  # as the Hub answers for a Xet-backed file: its hash and where a Xet read token comes from
            headers["X-Xet-Hash"] = xet_hash
            token_url = f"{self._base_url()}/api/models/{repo_id}/xet-read-token/{commit.id}"
            headers["Link"] = f'<{token_url}>; rel="xet-auth"'
        ctype = "application/octet-stream" if entry.lfs else "text/plain; charset=utf-8"
        start, end, status = 0, entry.size - 1, 200
        rng = self.headers.get("Range")
        if rng and self.command == "GET":
            m = re.fullmatch(r"\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*", rng)
            if m and (m.group(1) or m.group(2)):
                if m.group(1):
                    start = int(m.group(1))
                    end = min(int(m.group(2)), entry.size - 1) if m.group(2) else entry.size - 1
                else:
                    start = max(entry.size - int(m.group(2)), 0)
                if start >= entry.size or start > end:
                    raise HubError(
                        416,
                        "Range Not Satisfiable",
                        None,
                        {"Content-Range": f"bytes */{entry.size}", "X-Repo-Commit": commit.id},
                    )
                status = 206
                headers["Content-Range"] = f"bytes {start}-{end}/{entry.size}"
        length = end - start + 1 if entry.size else 0
        self._log(status)
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(length))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        if self.command == "HEAD":
            return
        key = f"{repo_id}/{path}"
        with self.hub_server.lock:
            cut = self.hub_server.cut_after.pop(key, None)
        budget = length if cut is None else min(cut, length)
        fault = self._fault if self._fault is not None and self._fault.mode in ("stall", "trickle", "drop") else None
        sent = 0
        with open(self.hub_server.hub.blob_path(entry.sha256), "rb") as fh:
            fh.seek(start)
            while sent < budget:
                size = CHUNK
                if fault is not None and sent >= fault.after:
                    if fault.mode == "drop":
                        self.wfile.flush()
                        self.hub_server.released.wait(fault.interval)
                        self.close_connection = True
                        with contextlib.suppress(OSError):
                            self.connection.shutdown(socket.SHUT_RDWR)
                        return
                    if fault.mode == "stall":
                        self.wfile.flush()
                        self.hub_server.released.wait(fault.hold)
                        self.close_connection = True
                        return
                    size = fault.step
                    self.wfile.flush()
                    if self.hub_server.released.wait(fault.interval):
                        break
                elif fault is not None:
                    size = min(CHUNK, fault.after - sent)
                chunk = fh.read(min(size, budget - sent))
                if not chunk:
                    break
                self.wfile.write(chunk)
                sent += len(chunk)
                with self.hub_server.lock:
                    self.hub_server.bytes_served += len(chunk)
        if cut is not None and cut < length:
            self.wfile.flush()
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)


# --------------------------------------------------------------------------- script


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Offline Hugging Face Hub with the sparkfold fixture repos")
    parser.add_argument("--root", required=True, help="directory of the fixture hub (built if missing)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--shard-count", type=int, default=3)
    parser.add_argument("--shard-bytes", type=int, default=256 * 1024)
    parser.add_argument("--rebuild", action="store_true", help="rebuild even if ROOT/hub.json exists")
    parser.add_argument(
        "--cut-after",
        action="append",
        default=[],
        metavar="REPO/PATH=N",
        help="drop the first GET of that file after N body bytes (repeatable)",
    )
    parser.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="REGEX=MODE",
        help="requests whose path matches REGEX hang, stall, trickle, drop or are gone (see Fault; repeatable)",
    )
    parser.add_argument("--access-log", action="store_true", help="print one line per request on stdout")
    args = parser.parse_args(argv)

    os.makedirs(args.root, exist_ok=True)
    if args.rebuild or not os.path.exists(os.path.join(args.root, fixtures.HUB_JSON)):
        hub = fixtures.build_hub(args.root, shard_count=args.shard_count, shard_bytes=args.shard_bytes)
    else:
        hub = fixtures.load_hub(args.root)
    server = HubServer(hub, host=args.host, port=args.port)
    if args.access_log:
        server.access_log = sys.stdout
    for spec in args.cut_after:
        key, _sep, n = spec.rpartition("=")
        server.cut_after[key] = int(n)
    for spec in args.fault:
        pattern, _sep, mode = spec.rpartition("=")
        server.add_fault(pattern, mode)

    def _term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _term)
    httpd = server._bind()
    print(f"serving {args.root} on {server.url}", flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
