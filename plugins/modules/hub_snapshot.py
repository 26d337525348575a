#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: hub_snapshot
short_description: Download a pinned Hugging Face Hub revision into a verified directory of real files
version_added: "0.1.0"
description:
  - Resolves O(revision) of O(repo_id) to a commit with the Hub's repository API (which lists every file with its
    size and hash) before fetching anything, so a revision that no longer exists (a force-squashed pin) fails
    before the first byte is downloaded.
  - A run that completes keeps that listing of the commit in C(<local_dir>/.cache/huggingface/.sparkfold-listing.json)
    (a commit's files never change on the Hub). A later run asks the Hub with one C(HEAD) of the smallest file of
    that listing at O(revision) instead; when the Hub answers that O(revision) still resolves to that commit and
    the file is unchanged (size and hash), the kept listing is used, else the commit is listed again as above,
    which says what changed (a vanished pin fails as before). A Hub that cannot be reached fails the run either
    way. So a re-run that has nothing to fetch asks the Hub one light question, as C(hf download) does.
  - Downloads the files of that commit selected by O(allow_patterns) and O(ignore_patterns) into O(local_dir)
    as real files (no symlinks into a Hub cache), O(max_workers) files at a time, with huggingface_hub.
  - Every downloaded file is hashed while it streams and compared with the hash the Hub publishes (sha256 for LFS
    files, the git blob id for the others) before it is moved into place; a file that does not match is never
    put in O(local_dir).
  - Moves the bytes as O(transfer) says. With V(auto), a file the Hub stores with Xet (its HEAD answers
    C(X-Xet-Hash); its listing has C(xetHash)) is downloaded by huggingface_hub's C(hf_hub_download) through
    hf_xet into C(<local_dir>/.cache/huggingface/xet/), as C(hf download) fetches it; every other file, and every
    file with V(http), by the module's own HTTP Range download described below.
  - Keeps partial HTTP downloads under C(<local_dir>/.cache/huggingface/download/) and resumes them with HTTP Range
    requests on the next run, so a run killed in the middle of a 5 GB shard loses nothing already transferred.
  - Records every verified file (path, size, mtime in nanoseconds, sha256 or blob id, time of verification, with the
    repository and commit) in C(<local_dir>/.sparkfold-manifest.json). See O(verify) for how a run uses it.
  - Refuses to start, before any download, when the filesystem of O(local_dir) lacks room for the bytes still
    needed plus O(min_free_bytes).
  - Switching revisions never leaves a mixed store. When the manifest records another commit (or another
    repository) than the one O(revision) resolves to, files identical in both (same hash) are kept; the files of
    the new commit that differ are downloaded and verified under C(<local_dir>/.cache/huggingface/download/)
    first, and only once all of them are there are they moved into place, the files recorded for the previous
    commit that the new selection lacks deleted, and the manifest rewritten with the new commit's files alone.
    A switch that fails (network, hash, disk, a killed run) leaves the previous commit complete, verified and
    recorded as it was; the next run resumes the downloads and then switches. RV(previous_commit) tells that a
    switch happened.
  - A switch killed inside its final move (some new files moved into place, the manifest not yet rewritten) is
    told by its journal, C(<local_dir>/.cache/huggingface/.sparkfold-switch.json), written before the first move.
    A later run for the new commit goes on with it; a run for any other commit (a rollback) deletes the files the
    switch moved in that its selection lacks and fetches again those it has (whatever O(verify) says), so the
    store holds exactly one revision. The journal is removed once a run completes.
  - Within one commit no verified file is deleted, and files of O(local_dir) outside the selection are left
    alone (narrowing O(allow_patterns) keeps the records of files verified before). Files never recorded in the
    manifest are left alone, switch or not.
  - Every Hub call times out (O(connect_timeout), O(read_timeout)), and an answer or a download that trickles is
    cut off by O(stall_timeout), so that a Hub or CDN that stops answering fails the task with a message naming the
    host instead of hanging it. A file given up that way keeps its partial download for the next run, and the
    task fails once the other files are done.
  - A download either makes progress or gives up. A CDN that drops the connection on every attempt is given up
    after O(download_retries) attempts in a row without progress, and a file that averages less than O(min_rate)
    over O(rate_window), retries included, is given up too.
  - Within one commit, a file in the store that fails verification (wrong size or hash, a symlink, a partial
    copy) is renamed to C(<file>.corrupt) and fetched again; the C(.corrupt) copy is deleted once a good copy is
    in place. During a switch it stays until the new file replaces it.
  - A run that cannot put a file of the selection in place (a download or a repair that fails) lists it under
    C(pending) in the manifest (and drops its record), so the store counts as incomplete, and
    M(sparkfold.cluster.store_verify) fails naming the file, until a run fetches it. A store is complete only when
    every selected file of the commit is present and verified.
author:
  - sparkfold developers (@sparkfold)
options:
  revision:
    description:
      - Branch, tag or full 40-hex commit to download. It is resolved to a commit before anything is fetched; the
        module fails when the Hub does not know it.
      - Pin a commit in production, and keep the check; a commit can vanish when its history is squashed.
    type: str
    default: main
  local_dir:
    description:
      - Directory of the store. Created when missing (with its parents).
      - The download's bookkeeping lives under C(<local_dir>/.cache/huggingface/).
    type: path
    required: true
  allow_patterns:
    description:
      - Download only the files whose repository path matches one of these glob patterns (C(fnmatch); C(*) also
        matches C(/); a pattern ending in C(/) selects a folder), as C(hf download --include).
      - The module fails when the patterns select no file at all (a typo would otherwise pass silently).
    type: list
    elements: str
  ignore_patterns:
    description:
      - Skip the files whose repository path matches one of these glob patterns, as C(hf download --exclude).
    type: list
    elements: str
  verify:
    description:
      - How files already in O(local_dir) are checked before the module trusts them. Downloaded files are always
        hashed, whatever this says.
      - V(manifest) trusts a file whose size and mtime equal its manifest record and whose recorded hash equals the
        Hub's. That costs one C(stat) per file. A file without an agreeing record (new, touched, copied in by other
        means) but with the right size is hashed once, then recorded; one of the wrong size is fetched again.
        A change that keeps size and mtime (for example a byte flipped and the mtime set back with C(touch -d))
        is not seen; use V(full) for that.
      - V(full) hashes every file again, O(max_workers) at a time, compares with the Hub's hashes, refetches what
        differs and refreshes C(verified_at) in the manifest. Use it after copying a store from another node or
        when the disk is suspect.
      - V(none) trusts any regular file of the right size.
    type: str
    default: manifest
    choices: [manifest, full, none]
  max_workers:
    description:
      - Files downloaded, or hashed by O(verify=full), at the same time.
    type: int
    default: 8
  progress_file:
    description:
      - While it runs, the module rewrites this JSON file atomically (at most twice a second, and after each file) so
        that a play can poll an C(async) run with M(ansible.builtin.slurp).
      - Keys are C(files_total), C(files_done), C(bytes_total), C(bytes_done) (the selection, with files already
        present counted as done), C(current) (list of the files in flight), C(updated) (Unix time), C(phase)
        (V(verifying), V(downloading), V(done), V(failed)), C(error) (the failure message, with V(failed)),
        C(commit), C(pid) (the module's process), and C(verify_bytes_total) and C(verify_bytes_done) for the hashing
        before the download.
      - Its directory must exist; a file that cannot be written only gives a warning.
      - The file is first written after the revision is resolved; a poller should allow for it not to exist yet.
      - Not written in check mode.
    type: path
  min_free_bytes:
    description:
      - Bytes that must remain free on the filesystem of O(local_dir) after the download. The module refuses to
        start when the free space is less than the bytes still needed plus this margin.
    type: int
    default: 1073741824
  transfer:
    description:
      - How the bytes of a file move.
      - V(auto) hands each file that the Hub stores with Xet to huggingface_hub's C(hf_hub_download), which
        downloads it through hf_xet (chunk-level, several connections at once, deduplicated), as C(hf download)
        does, into C(<local_dir>/.cache/huggingface/xet/); the module then hashes it against the Hub's sha256
        before it goes anywhere near the store. On the real Hub, large model repositories are stored with Xet, so
        this is the path of the shards. Files not stored with Xet, and every file when hf_xet is not installed or
        E(HF_HUB_DISABLE_XET=1) is set, go over HTTP as with V(http).
      - V(http) downloads every file with the module's own HTTP Range download through the Hub's
        C(/resolve) URL (the Hub's HTTP bridge for Xet files), one stream per file, O(max_workers) files at once.
      - On its Xet files, V(auto) hands the module's bounds to hf_xet, which reads them from the environment
        (unless the task's environment sets them itself). The lower of O(stall_timeout) and O(read_timeout) becomes
        E(HF_XET_CLIENT_READ_TIMEOUT), a connection that brings no byte for that long counts as stalled and times
        out. O(connect_timeout) becomes E(HF_XET_CLIENT_CONNECT_TIMEOUT), and O(download_retries) becomes
        E(HF_XET_CLIENT_RETRY_MAX_ATTEMPTS), the retries of one request before hf_xet fails the file.
      - What V(auto) gives up on its Xet files, because huggingface_hub 2.4.0 and hf_xet cannot do it, stated
        exactly. hf_xet's stall bound asks for any byte, not 1 MiB, within the time. O(min_rate) does not apply.
        A failed or killed Xet download is not resumed, since C(hf_hub_download) writes each attempt to a
        process-unique C(.<uuid>.incomplete) file and deletes it on failure, so the next run fetches that file
        again from its first byte. The progress file counts a Xet file's bytes as hf_xet writes them.
      - A Xet download that fails gives its file up with C(kind=xet) and a message that names the file and
        hf_xet's error, says the next run fetches it again and that O(transfer=http) fetches it over HTTP instead;
        an error of the Hub on the way (a refused token, a missing file) keeps its own kind, the file named.
      - The library's own HTTP path is not used. It would bring no speed (one stream per file, as here) and it
        lacks the Range resume across runs, the stall deadline and the bound on attempts without progress.
      - E(HF_XET_HIGH_PERFORMANCE=1) in the task's environment makes hf_xet try to saturate the network and use
        every CPU core for parallel downloads. It is what replaces E(HF_HUB_ENABLE_HF_TRANSFER), deprecated with
        hf_transfer (huggingface_hub 2.4.0 C(constants.py) warns when the latter is set). It only changes Xet files
        under V(auto); the module's HTTP downloads ignore it.
    type: str
    default: auto
    choices: [auto, http]
  download_retries:
    description:
      - HTTP attempts in a row at one file that end early (the connection dropped or closed before the end of
        the file) without progress, after which the file is given up with kind V(network). Its partial download
        is kept for the next run. An attempt makes progress when it brings 1 MiB, or the rest of the file; a CDN
        that sends a few KiB and then drops the connection every time does not.
      - Attempts are 1, 2, 4, 8 and 8 s apart.
      - A Xet file under O(transfer=auto) is bounded by hf_xet instead, with this many retries of one request (see
        O(transfer)).
    type: int
    default: 5
  min_rate:
    description:
      - Bytes per second that an HTTP download of one file must average over any O(rate_window) seconds of it,
        reconnections and their waits included; a file slower than that is given up with kind V(slow), its
        partial download kept for the next run. V(0) sets no minimum.
      - The default, 64 KiB/s, is far below any working link; O(max_workers) files share the link.
    type: int
    default: 65536
  rate_window:
    description:
      - Seconds over which O(min_rate) is measured. A file is measured once it has been downloading this long.
    type: float
    default: 300
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - sparkfold.cluster.hub
  - sparkfold.cluster.hub.repo
  - sparkfold.cluster.hub.timeouts
attributes:
  check_mode:
    support: full
    details: Lists the files that would be fetched and their bytes (RV(would_download), RV(download_bytes)). Files
      without an agreeing manifest record are hashed (read only) to tell. Nothing is written, the progress file
      included. The disk space check applies.
  diff_mode:
    support: full
    details: Before and after are the verified files of the selection, one C(path size hash) line each.
  platform:
    platforms: posix
requirements:
  - huggingface_hub >= 1.0 on the target (the hf_cli role installs it into a venv; point
    C(ansible_python_interpreter) at that venv's python for this task)
  - hf_xet on the target for O(transfer=auto) to use Xet (the hf_cli role installs it with huggingface_hub)
notes:
  - C(changed) is true when file bytes were written or the manifest's content changed (for example files adopted
    into it); refreshing only the C(verified_at) stamps of V(full) is not a change.
  - Two runs on the same O(local_dir) at once are refused (a lock under C(<local_dir>/.cache/huggingface/), which
    holds the PID of the run that has it). The refused run fails with C(kind=locked), naming that PID and the lock
    file, and says how to wait for the run or stop it.
  - O(transfer=http), or E(HF_HUB_DISABLE_XET=1) in the task's environment, forces plain HTTP downloads (with
    Range resumes and the stall bounds) of every file.
  - Copying a store with C(rsync -a) keeps sizes and mtimes, so the copied manifest would vouch for the copies
    without reading them; run the receiving node once with O(verify=full).
seealso:
  - name: Download files to a local folder (huggingface_hub)
    description: How huggingface_hub lays out a local_dir download.
    link: https://huggingface.co/docs/huggingface_hub/guides/download#download-files-to-a-local-folder
"""

EXAMPLES = r"""
- name: Download the pinned quant into the model store
  sparkfold.cluster.hub_snapshot:
    repo_id: sfxnz/DeepSeek-V4.1-Flash-EXL3
    revision: 3f1c2a9e0b7d4c5a8e6f1b2d3c4a5e6f7a8b9c0d
    local_dir: /srv/models/dsv41-exl3

- name: The same over a link where every file must resume and obey the stall bounds (no Xet)
  sparkfold.cluster.hub_snapshot:
    repo_id: sfxnz/DeepSeek-V4.1-Flash-EXL3
    revision: 3f1c2a9e0b7d4c5a8e6f1b2d3c4a5e6f7a8b9c0d
    local_dir: /srv/models/dsv41-exl3
    transfer: http
    min_rate: 1048576
    rate_window: 120

- name: Only the tokenizer and config files of the base model
  sparkfold.cluster.hub_snapshot:
    repo_id: deepseek-ai/DeepSeek-V4.1-Flash
    revision: main
    local_dir: /srv/models/dsv41-exl3
    allow_patterns: ["tokenizer*", "*.json"]
    ignore_patterns: ["*.safetensors.index.json"]

- name: Long download as an async task that reports progress
  sparkfold.cluster.hub_snapshot:
    repo_id: "{{ model_repo }}"
    revision: "{{ model_commit }}"
    local_dir: /srv/models/current
    progress_file: /run/sparkfold/hub_snapshot.progress.json
    max_workers: 8
  async: 14400
  poll: 0
  register: snapshot_job

- name: Report progress until done
  ansible.builtin.slurp:
    src: /run/sparkfold/hub_snapshot.progress.json
  register: progress
  until: (progress.content | b64decode | from_json).phase in ['done', 'failed']
  retries: 1440
  delay: 10

- name: Re-hash every file after copying the store from the head node
  sparkfold.cluster.hub_snapshot:
    repo_id: "{{ model_repo }}"
    revision: "{{ model_commit }}"
    local_dir: /srv/models/current
    verify: full
"""

RETURN = r"""
commit:
  description: The commit the revision resolved to.
  returned: always
  type: str
  sample: 3f1c2a9e0b7d4c5a8e6f1b2d3c4a5e6f7a8b9c0d
previous_commit:
  description:
    - The commit the manifest recorded before this run (null without a usable manifest). When it differs from
      RV(commit), the run switched the store from that commit (or, in check mode, would).
    - Also returned, with RV(commit), when the run fails.
  returned: always
  type: str
  sample: 9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b
removed:
  description:
    - Repository paths of the previous commit deleted by a switch because the new selection lacks them, and those a
      killed switch had moved in that this run's commit lacks (in check mode, those a real run would delete). Empty
      when no switch happened.
  returned: always
  type: list
  elements: str
  sample: [model-00040-of-00040.safetensors]
verified:
  description: The O(verify) mode used.
  returned: always
  type: str
  sample: manifest
manifest:
  description: Path of the manifest.
  returned: always
  type: str
  sample: /srv/models/current/.sparkfold-manifest.json
local_dir:
  description: Absolute path of the store.
  returned: always
  type: str
  sample: /srv/models/current
downloaded_bytes:
  description: Bytes written to files of the store by this run (V(0) in check mode).
  returned: always
  type: int
  sample: 5368709120
files:
  description:
    - The selected files, sorted by path, each with C(path), C(size), C(sha256) (LFS files) or C(blob_id) (others)
      and C(status).
    - C(status) is V(present) (verified, untouched), V(downloaded) (was missing) or V(refetched) (was in the store
      but failed verification). In check mode it says what a real run would do.
  returned: always
  type: list
  elements: dict
  sample:
    - path: config.json
      size: 1043
      blob_id: 8c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d
      status: present
    - path: model-00001-of-00040.safetensors
      size: 5368709120
      sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
      status: downloaded
xet_files:
  description: Repository paths this run downloaded through huggingface_hub and hf_xet (O(transfer=auto)).
  returned: always
  type: list
  elements: str
  sample: [model-00001-of-00040.safetensors]
would_download:
  description: Repository paths a real run would fetch (missing or failing verification).
  returned: in check mode
  type: list
  elements: str
  sample: [model-00001-of-00040.safetensors]
download_bytes:
  description: Bytes a real run would transfer (partial downloads it would resume are subtracted).
  returned: in check mode
  type: int
  sample: 5368709120
"""

import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.common.text.converters import to_native
from ansible_collections.sparkfold.cluster.plugins.module_utils.hub import (
    HAS_HF,
    HF_IMPORT_ERROR,
    HUB_COMMON_ARG_SPEC,
    HubError,
)
from ansible_collections.sparkfold.cluster.plugins.module_utils.hub_download import (
    DEFAULT_DOWNLOAD_RETRIES,
    DEFAULT_MIN_RATE,
    DEFAULT_RATE_WINDOW,
    TRANSFERS,
)
from ansible_collections.sparkfold.cluster.plugins.module_utils.hub_timeouts import HUB_TIMEOUT_ARG_SPEC
from ansible_collections.sparkfold.cluster.plugins.module_utils.snapshot import HubSnapshot

try:
    from huggingface_hub.utils import disable_progress_bars
except ImportError:  # pragma: no cover - reported through HAS_HF
    disable_progress_bars = None


def argument_spec():
    spec = dict(HUB_COMMON_ARG_SPEC)
    spec.update(HUB_TIMEOUT_ARG_SPEC)
    spec.update(
        local_dir={"type": "path", "required": True},
        allow_patterns={"type": "list", "elements": "str"},
        ignore_patterns={"type": "list", "elements": "str"},
        verify={"type": "str", "default": "manifest", "choices": ["manifest", "full", "none"]},
        max_workers={"type": "int", "default": 8},
        progress_file={"type": "path"},
        min_free_bytes={"type": "int", "default": 1073741824},
        transfer={"type": "str", "default": "auto", "choices": list(TRANSFERS)},
        download_retries={"type": "int", "default": DEFAULT_DOWNLOAD_RETRIES},
        min_rate={"type": "int", "default": DEFAULT_MIN_RATE},
        rate_window={"type": "float", "default": DEFAULT_RATE_WINDOW},
    )
    return spec


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    if not HAS_HF:
        module.fail_json(msg=missing_required_lib("huggingface_hub"), exception=HF_IMPORT_ERROR)
    disable_progress_bars()

    snapshot = HubSnapshot(module)
    try:
        result = snapshot.run()
    except HubError as exc:
        module.fail_json(msg=exc.msg, kind=exc.kind, **exc.details)
    except OSError as exc:
        module.fail_json(msg=f"hub_snapshot: {to_native(exc)}", kind="io", exception=traceback.format_exc())
    except Exception as exc:  # an unexpected failure still says where it happened
        module.fail_json(msg=f"hub_snapshot failed: {to_native(exc)}", exception=traceback.format_exc())
    module.exit_json(**result)


if __name__ == "__main__":
    main()
