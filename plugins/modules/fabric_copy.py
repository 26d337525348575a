#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: fabric_copy
short_description: Pull a directory from another node with parallel rsync streams over every fabric address
version_added: "0.1.0"
description:
  - Makes O(dest) on this node a copy of O(src) on the node that answers at O(addresses) (the source node's
    fabric addresses, one per rail), as C(rsync --archive --copy-links --delete-after) would, but with
    O(streams) rsync processes at once.
  - One C(rsync --dry-run) over O(addresses[0]) lists what differs (the next address is tried when ssh cannot reach
    it, and the streams then leave out the addresses that failed). The files to send are dealt to the streams by
    size (largest first, each to the stream with the fewest bytes so far); the streams take O(addresses) in turn,
    so that they share every rail of the source. A file is never split between streams.
  - A final rsync pass over the whole tree then deletes what the source lacks (with C(--delete-after)), makes
    what is not a regular file and sets attributes; it sends nothing the streams already sent.
  - An interrupted file waits in C(.rsync-partial/) next to it (rsync C(--partial-dir)) and the next run
    resumes it from there; the copy already in O(dest), if any, is not touched until the file is complete. rsync
    protects that folder from C(--delete-after).
  - Many streams opening ssh connections at once (several workers pulling from one source, each with O(streams)
    streams) can exceed the source's sshd C(MaxStartups) (10 unauthenticated connections by default), which resets
    the surplus before anything is exchanged. A stream refused that way is started again after a short random
    wait, up to O(connect_retries) times; a stream cut after it began is not (the next run resumes it).
  - Nothing that differs means no stream and no change. The module does not verify content (rsync trusts size and
    mtime); verify the copy afterwards, for example with M(sparkfold.cluster.store_verify).
  - Why not C(fpsync) (Debian package fpart), which also runs rsync in parallel over a file list. It crawls the
    source on the node that runs it and writes to a destination it can reach, one address only; this pull needs
    the list of what differs and the source's addresses alternated between streams, and an Ansible-honest
    C(changed) and check mode.
author:
  - sparkfold developers (@sparkfold)
options:
  src:
    description:
      - Absolute path of the directory on the source node (the one copied, not a parent of it).
      - Give O(src) and O(dest), or O(copies).
    type: path
  dest:
    description:
      - Absolute path of the directory on this node. Created when missing.
    type: path
  copies:
    description:
      - Several directories from the same source node in one module run, each with C(src), C(dest) and C(excludes)
        as O(src), O(dest) and O(excludes) describe them (the top-level O(excludes) does not apply to them). Every
        dry-run listing runs at once, then each copy in turn; the first that fails fails the module.
      - Give O(src) and O(dest), or O(copies).
    type: list
    elements: dict
    suboptions:
      src:
        description: Absolute path of the directory on the source node.
        type: path
        required: true
      dest:
        description: Absolute path of the directory on this node.
        type: path
        required: true
      excludes:
        description: rsync C(--exclude) patterns of this copy.
        type: list
        elements: str
        default: []
  addresses:
    description:
      - The source node's addresses to pull from, in order of preference (its fabric address on every rail).
      - Every address must reach the same node.
    type: list
    elements: str
    required: true
  user:
    description: Account on the source node.
    type: str
    default: root
  ssh_key:
    description:
      - Private key for ssh to the source node. Host keys are checked (C(StrictHostKeyChecking=yes)).
      - Ignored when O(rsh) is given.
    type: path
  rsh:
    description:
      - The remote shell command rsync runs (its C(--rsh)), in place of the ssh command built from O(ssh_key).
    type: str
  streams:
    description:
      - rsync processes that pull at the same time, dealt to O(addresses) in turn. At most one per file to send.
    type: int
    default: 8
  excludes:
    description:
      - rsync C(--exclude) patterns (relative to O(src); a leading C(/) anchors at O(src)). Excluded paths are neither
        copied nor deleted.
    type: list
    elements: str
    default: []
  delete:
    description: Delete what O(dest) holds and O(src) does not (C(--delete-after)).
    type: bool
    default: true
  io_timeout:
    description: Seconds without any data after which an rsync gives up (its C(--timeout)); V(0) waits forever.
    type: int
    default: 300
  connect_retries:
    description:
      - How many more times a stream is started when the source's sshd reset or closed its connection before
        anything was exchanged (C(MaxStartups) refusing a burst of connections), after a random wait that doubles
        each time (0.5 s, 1 s, 2 s ... up to 8 s). A host that cannot be reached at all is not retried.
    type: int
    default: 6
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Runs only the dry-run listing and returns what a real run would change. A source directory that does
      not exist yet (a fresh cluster whose head has downloaded nothing) is no error in check mode; RV(source_missing)
      says so.
  diff_mode:
    support: full
    details: The changes, one line each (C(send), C(mkdir), C(delete), or rsync's itemized change).
  platform:
    platforms: posix
requirements:
  - rsync on this node and on the source node; ssh on this node (unless O(rsh) says otherwise).
notes:
  - C(changed) is true when the dry-run listed any difference.
seealso:
  - module: sparkfold.cluster.store_verify
"""

EXAMPLES = r"""
- name: Pull the model store from the head over both rails
  sparkfold.cluster.fabric_copy:
    src: /srv/models/dsv41
    dest: /srv/models/dsv41
    addresses: [192.168.100.1, 192.168.101.1]
    ssh_key: /root/.ssh/sparkfold_fabric
    streams: 8
    excludes: [/.cache/]

- name: Pull the Engram tables and the kernel kit in one run, their listings at once
  sparkfold.cluster.fabric_copy:
    copies:
      - {src: /var/lib/sparkfold/engram, dest: /var/lib/sparkfold/engram, excludes: [/.cache/]}
      - {src: /opt/sparkfold/kit, dest: /opt/sparkfold/kit, excludes: [/.cache/]}
    addresses: [192.168.100.1, 192.168.101.1]
    ssh_key: /root/.ssh/sparkfold_fabric
  register: copied
"""

RETURN = r"""
transferred:
  description: Paths (relative to O(dest)) whose content was sent (in check mode, would be).
  returned: without O(copies)
  type: list
  elements: str
  sample: [model-00001-of-00040.safetensors]
deleted:
  description: Paths deleted because the source lacks them (in check mode, that would be).
  returned: without O(copies)
  type: list
  elements: str
bytes:
  description: Size of the files in RV(transferred) (rsync may send less when it resumes a partial file).
  returned: without O(copies)
  type: int
  sample: 5368709120
streams:
  description: One entry per rsync stream run, with C(address), C(files), C(bytes), C(seconds), C(rc) and C(attempts)
    (how many times it was started; more than 1 when sshd refused it at first).
    For a stream that failed, C(error) holds the last lines rsync printed.
  returned: without O(copies)
  type: list
  elements: dict
address:
  description: The address the listing was taken from.
  returned: without O(copies)
  type: str
  sample: 192.168.100.1
seconds:
  description: Wall time of the listing, the streams and the final pass.
  returned: without O(copies)
  type: float
copy_seconds:
  description: Wall time of the streams alone (V(0) when nothing was sent).
  returned: without O(copies)
  type: float
source_missing:
  description: Whether O(src) does not exist on the source node (check mode only; a real run fails).
  returned: without O(copies)
  type: bool
copies:
  description:
    - With O(copies), one entry per copy in their order, with C(src), C(dest) and the returns above
      (C(transferred), C(deleted), C(bytes), C(streams), C(address), C(seconds), C(copy_seconds), C(source_missing),
      C(changed)). The other returns are then not given at the top level, but C(changed) (any copy changed) is.
  returned: with O(copies)
  type: list
  elements: dict
"""

import os
import random
import shlex
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sparkfold.cluster.plugins.module_utils.fanout import (
    OUT_FORMAT,
    PARTIAL_DIR,
    PlanError,
    changes,
    files_from,
    parse_listing,
    shard,
)

# rsync's exit codes: ssh could not connect, or the stream closed before anything came (the next address is
# tried for the listing); and a partial transfer, whose cause may be a missing source directory.
RC_SSH = 255
RC_PROTOCOL = 12
RC_PARTIAL = 23


def unreachable(rc, err):
    """Whether rsync failed because the remote shell could not reach the node (nothing was exchanged)."""
    return rc == RC_SSH or (rc == RC_PROTOCOL and "(0 bytes received so far)" in err)


# What ssh prints when the source's sshd drops a connection before the key exchange (MaxStartups, a burst of
# connections): "kex_exchange_identification: read: Connection reset by peer", "Connection reset by A port 22",
# "Connection closed by A port 22".
REFUSED_AT_START = ("kex_exchange_identification", "Connection reset by", "Connection closed by")
# The first wait before a stream is started again, doubled each time up to BACKOFF_MAX_S, times 0.5-1.5 at random.
BACKOFF_S = 0.5
BACKOFF_MAX_S = 8.0


def refused_at_start(rc, err):
    """Whether sshd dropped the stream's connection before anything was exchanged (worth starting it again)."""
    return unreachable(rc, err) and any(marker in err for marker in REFUSED_AT_START)


def tail(text, lines=6):
    return " | ".join(text.strip().splitlines()[-lines:])


class FabricCopy:
    def __init__(self, module, rsync, params=None):
        self.module = module
        self.params = params or module.params
        self.rsync = rsync
        self.src = self.params["src"].rstrip("/") + "/"
        self.dest = self.params["dest"].rstrip("/") + "/"
        self.addresses = list(self.params["addresses"])
        self.unreachable = set()

    def rsh(self):
        if self.params["rsh"]:
            return self.params["rsh"]
        ssh = ["ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", "-o", "ConnectTimeout=10"]
        if self.params["ssh_key"]:
            ssh += ["-i", self.params["ssh_key"]]
        return shlex.join(ssh)

    def base(self):
        argv = [self.rsync, "--archive", "--copy-links", "--omit-dir-times", f"--partial-dir={PARTIAL_DIR}",
                f"--rsh={self.rsh()}", f"--timeout={self.params['io_timeout']}"]
        argv += [f"--exclude={pattern}" for pattern in self.params["excludes"]]
        return argv

    def remote(self, address):
        host = f"[{address}]" if ":" in address else address
        return f"{self.params['user']}@{host}:{self.src}"

    def listing_argv(self, address, dry_run):
        argv = [*self.base(), f"--out-format={OUT_FORMAT}"]
        if self.params["delete"]:
            argv.append("--delete-after")
        if dry_run:
            argv.append("--dry-run")
        return [*argv, self.remote(address), self.dest]

    def probe(self):
        """The dry run over the first address that ssh reaches: ((address, rc, stdout, stderr) or None when none
        does, the addresses tried in vain). Exits nothing, so that several copies can probe at once."""
        tried = []
        for address in self.params["addresses"]:
            rc, out, err = self.module.run_command(self.listing_argv(address, True))
            if not unreachable(rc, err):
                # the streams leave out the addresses ssh could not reach
                self.addresses = [a for a in self.params["addresses"] if a not in self.unreachable]
                return (address, rc, out, err), tried
            self.unreachable.add(address)
            tried.append(f"{address} ({tail(err, 2)})")
        return None, tried

    def list_changes(self, probed=None):
        """The dry run (probed already, or now): (address, rc, stdout, stderr); fails when no address answers."""
        listing, tried = probed or self.probe()
        if listing is None:
            self.module.fail_json(
                msg=(f"rsync could not reach the source node over any of {', '.join(self.params['addresses'])} "
                     f"({'; '.join(tried)}); check the fabric (ip addr, ping) and that {self.params['user']} accepts "
                     "the key on the source node"),
                kind="unreachable",
            )
        if tried:
            self.module.warn(f"the source node did not answer at {'; '.join(tried)}: copying over the other "
                             "addresses only")
        return listing

    def prepare(self):
        """Refuse a dest that is not a directory; make it (a dry run compares a missing one as an empty one)."""
        if os.path.lexists(self.dest.rstrip("/")) and not os.path.isdir(self.dest):
            self.module.fail_json(msg=f"dest {self.dest} exists and is not a directory; move it away", changed=False)
        if not self.module.check_mode:
            os.makedirs(self.dest, exist_ok=True)

    def run(self, probed=None):
        """Copy; ``probed``: the result of probe() when the dry run was taken already (after prepare())."""
        start = time.monotonic()
        result = {"changed": False, "transferred": [], "deleted": [], "bytes": 0, "streams": [], "seconds": 0.0,
                  "copy_seconds": 0.0, "source_missing": False, "address": None}
        if probed is None:
            self.prepare()
        address, rc, out, err = self.list_changes(probed)
        result["address"] = address
        if rc != 0:
            missing = rc == RC_PARTIAL and ("No such file or directory" in err or "change_dir" in err)
            if missing and self.module.check_mode:
                result["source_missing"] = True
                self.module.warn(f"{self.src} does not exist on {address} yet: nothing to compare with")
                result["seconds"] = round(time.monotonic() - start, 3)
                return result
            self.module.fail_json(
                msg=(f"listing {self.remote(address)} failed (rsync exit {rc}): {tail(err)}"
                     + (f"; {self.src} does not exist on the source node: copy only once it holds the files"
                        if missing else "")),
                **result,
            )
        try:
            plan = parse_listing(out)
        except PlanError as exc:
            self.module.fail_json(msg=f"cannot read rsync's listing: {exc}", **result)
        lines = changes(plan)
        result.update(
            changed=bool(lines),
            transferred=[path for path, _size in plan["transfer"]],
            deleted=plan["delete"],
            bytes=sum(size for _path, size in plan["transfer"]),
        )
        if self.module._diff:
            result["diff"] = {"prepared": "\n".join(lines) + ("\n" if lines else "")}
        if self.module.check_mode or not lines:
            result["seconds"] = round(time.monotonic() - start, 3)
            return result

        # Parallel rsyncs creating the same folder race on mkdir: make every folder of the plan first.
        for path in plan["dirs"]:
            os.makedirs(os.path.join(self.dest, path), exist_ok=True)
        for path, _size in plan["transfer"]:
            os.makedirs(os.path.dirname(os.path.join(self.dest, path)), exist_ok=True)

        if plan["transfer"]:
            copy_start = time.monotonic()
            result["streams"] = self.run_streams(plan["transfer"])
            result["copy_seconds"] = round(time.monotonic() - copy_start, 3)
            failed = [s for s in result["streams"] if s["rc"] != 0]
            if failed:
                self.module.fail_json(
                    msg=(f"{len(failed)} of {len(result['streams'])} rsync streams failed: "
                         + "; ".join(f"{s['address']} (exit {s['rc']}): {s['error']}" for s in failed)
                         + f". What was cut waits under {PARTIAL_DIR}/ next to each file (the old copy, if any, is "
                         "untouched) and the next run resumes it"),
                    **result,
                )

        # The final pass: deletions, what is not a regular file, attributes; anything that changed since the listing.
        rc, out, err = self.module.run_command(self.listing_argv(address, False))
        if rc != 0:
            self.module.fail_json(msg=f"the final rsync pass from {address} failed (exit {rc}): {tail(err)}", **result)
        late = parse_listing(out)
        sent = set(result["transferred"])
        result["transferred"] += [path for path, _size in late["transfer"] if path not in sent]
        result["bytes"] += sum(size for path, size in late["transfer"] if path not in sent)
        result["deleted"] = sorted(set(result["deleted"]) | set(late["delete"]))
        result["seconds"] = round(time.monotonic() - start, 3)
        return result

    def run_streams(self, files):
        """Run one rsync per shard, all at once (a thread each waits for its process); one report per stream."""
        shards = shard(files, self.params["streams"], self.addresses)
        with tempfile.TemporaryDirectory(prefix="fabric_copy-") as tmp:
            def stream(number, part):
                listing = os.path.join(tmp, f"stream-{number}")
                with open(listing, "wb") as handle:
                    handle.write(files_from(part["files"]))
                argv = [*self.base(), f"--files-from={listing}", "--from0", self.remote(part["address"]), self.dest]
                started = time.monotonic()
                attempts = 0
                while True:
                    attempts += 1
                    rc, _out, err = self.module.run_command(argv)
                    if rc == 0 or attempts > self.params["connect_retries"] or not refused_at_start(rc, err):
                        break
                    wait = min(BACKOFF_MAX_S, BACKOFF_S * 2 ** (attempts - 1))
                    time.sleep(wait * random.uniform(0.5, 1.5))
                return {"address": part["address"], "files": len(part["files"]), "bytes": part["bytes"],
                        "seconds": round(time.monotonic() - started, 3), "rc": rc, "attempts": attempts,
                        "error": tail(err, 3) if rc else ""}

            with ThreadPoolExecutor(max_workers=len(shards)) as pool:
                return list(pool.map(stream, range(len(shards)), shards))


def run_copies(module, rsync):
    """Several copies from one source node: every dry run at once (one thread each), then each copy in turn."""
    copies = [FabricCopy(module, rsync, dict(module.params, src=c["src"], dest=c["dest"], excludes=c["excludes"]))
              for c in module.params["copies"]]
    for copy in copies:
        copy.prepare()
    with ThreadPoolExecutor(max_workers=len(copies)) as pool:
        probed = list(pool.map(FabricCopy.probe, copies))
    results = []
    for copy, probe in zip(copies, probed):
        result = copy.run(probe)
        results.append(dict(result, src=copy.params["src"], dest=copy.params["dest"]))
    combined = {"changed": any(r["changed"] for r in results), "copies": results}
    if module._diff:
        combined["diff"] = [{"prepared": f"{r['dest']}:\n{r['diff']['prepared']}"} for r in results
                            if r.get("diff", {}).get("prepared")]
        for r in results:
            r.pop("diff", None)
    return combined


def main():
    module = AnsibleModule(
        argument_spec={
            "src": {"type": "path"},
            "dest": {"type": "path"},
            "copies": {"type": "list", "elements": "dict", "options": {
                "src": {"type": "path", "required": True},
                "dest": {"type": "path", "required": True},
                "excludes": {"type": "list", "elements": "str", "default": []},
            }},
            "addresses": {"type": "list", "elements": "str", "required": True},
            "user": {"type": "str", "default": "root"},
            "ssh_key": {"type": "path", "no_log": False},
            "rsh": {"type": "str"},
            "streams": {"type": "int", "default": 8},
            "excludes": {"type": "list", "elements": "str", "default": []},
            "delete": {"type": "bool", "default": True},
            "io_timeout": {"type": "int", "default": 300},
            "connect_retries": {"type": "int", "default": 6},
        },
        mutually_exclusive=[["src", "copies"], ["dest", "copies"]],
        required_one_of=[["src", "copies"]],
        required_together=[["src", "dest"]],
        supports_check_mode=True,
    )
    params = module.params
    addresses = [a.strip() for a in params["addresses"] if a and a.strip()]
    if not addresses:
        module.fail_json(msg="addresses is empty: give the source node's fabric addresses (one per rail)")
    params["addresses"] = addresses
    if params["streams"] < 1:
        module.fail_json(msg=f"streams is {params['streams']}: give 1 or more parallel rsync streams")
    if params["connect_retries"] < 0:
        module.fail_json(msg=f"connect_retries is {params['connect_retries']}: give 0 (never retry) or more")
    if params["io_timeout"] < 0:
        module.fail_json(msg="io_timeout must be 0 (wait forever) or a number of seconds")
    pairs = [(c["src"], c["dest"]) for c in params["copies"]] if params["copies"] is not None else [
        (params["src"], params["dest"])]
    if not pairs:
        module.fail_json(msg="copies is empty: give at least one src and dest")
    for pair in pairs:
        for name, path in zip(("src", "dest"), pair):
            if not os.path.isabs(path) or path.rstrip("/") == "":
                module.fail_json(msg=f"{name} must be an absolute path of a directory other than /, got {path!r}")
    rsync = module.get_bin_path("rsync", required=True)
    if params["copies"] is not None:
        module.exit_json(**run_copies(module, rsync))
    module.exit_json(**FabricCopy(module, rsync).run())


if __name__ == "__main__":
    main()
