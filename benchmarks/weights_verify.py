# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark of sparkfold.cluster.hub_snapshot against the `hf` CLI on a local, offline Hub.

Builds a model store of --files files totalling --gib GiB (real, non-sparse data: one block of
os.urandom repeated, with a per-file header, wrapped as safetensors), serves it with the test Hub
server (tests/hub/server.py) and prints, with ratios:

  download   hub_snapshot (module run as Ansible runs it: a subprocess with an args file)
             vs `hf download --local-dir` (same server, same max_workers), --repeats times each into an
             empty directory, alternating which goes first; medians and their ratio
  no-op      hub_snapshot verify=manifest on the complete store vs `hf download` again on its complete
             directory (both ask the Hub, neither transfers a byte); medians and their ratio
  re-verify  hub_snapshot verify=manifest (stat + manifest, no hashing)
             vs hub_snapshot verify=full (re-hash in parallel)
             vs `hf cache verify --local-dir` (re-hash, as the CLI does it)

Figures, not a test. The files were just written, so unless --drop-caches works (root only) the
hashing reads from the page cache: the full/`hf cache verify` figures are then CPU-bound.

    .venv/bin/python benchmarks/weights_verify.py --gib 5 --files 50
    .venv/bin/python benchmarks/weights_verify.py --gib 0.2        # quick check
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

# Run as a script from anywhere: the repository root must be on sys.path before tests.hub
# can be imported, hence these imports after the path set-up (E402).
from tests.hub import fixtures  # noqa: E402
from tests.hub.server import HubServer  # noqa: E402

REPO = "sparkfold-bench/weights"
BLOCK = 16 * 1024 * 1024
MODULE = os.path.join(ROOT, "plugins", "modules", "hub_snapshot.py")


def venv_bin(name):
    candidate = os.path.join(ROOT, ".venv", "bin", name)
    return candidate if os.path.exists(candidate) else shutil.which(name)


def safetensors_header(name, size):
    header = {"__metadata__": {"format": "pt"}, name: {"dtype": "U8", "shape": [size], "data_offsets": [0, size]}}
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * ((8 - len(raw) % 8) % 8)
    return struct.pack("<Q", len(raw)) + raw


def write_blob(hub_root, chunks):
    """Write the chunks to a temporary blob, hashing on the way; rename to blobs/<sha256>."""
    blobs = os.path.join(hub_root, "blobs")
    os.makedirs(blobs, exist_ok=True)
    tmp = os.path.join(blobs, "incoming")
    digest = hashlib.sha256()
    size = 0
    with open(tmp, "wb") as handle:
        for chunk in chunks:
            handle.write(chunk)
            digest.update(chunk)
            size += len(chunk)
    sha = digest.hexdigest()
    os.replace(tmp, os.path.join(blobs, sha))
    return sha, size


def build_store(hub_root, gib, files):
    """One repo, one commit: `files - 1` safetensors shards of equal size plus config.json."""
    total = int(gib * 1024**3)
    shards = max(1, files - 1)
    shard_data = total // shards
    block = os.urandom(BLOCK)
    entries = {}
    for i in range(shards):
        name = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        body = shard_data - len(safetensors_header("w", 0)) - 64

        def chunks(i=i, body=body):
            yield safetensors_header("w", body + 64)
            yield hashlib.sha512(f"shard {i}".encode()).digest()  # 64 unique bytes per shard
            left = body
            while left > 0:
                piece = block if left >= BLOCK else block[:left]
                yield piece
                left -= len(piece)

        sha, size = write_blob(hub_root, chunks())
        entries[name] = fixtures.FileEntry(name, sha, size, True)
    config = json.dumps({"model_type": "bench", "shards": shards}).encode() + b"\n"
    sha, size = write_blob(hub_root, [config])
    entry = fixtures.FileEntry("config.json", sha, size, False)
    entry.blob_id = fixtures.git_blob_sha1(config)
    entries["config.json"] = entry
    files_map = dict(sorted(entries.items()))
    cid = hashlib.sha1(json.dumps({p: f.sha256 for p, f in files_map.items()}).encode()).hexdigest()
    commit = fixtures.Commit(cid, "Upload weights", "", "2026-01-01T00:00:00.000Z", [], files_map, None, ["bench"])
    repo = fixtures.RepoData(REPO, {cid: commit}, {"main": cid}, {}, {}, False, False, {})
    hub = fixtures.HubData(hub_root, {REPO: repo})
    fixtures.save_hub(hub)
    return hub, cid, sum(f.size for f in files_map.values())


def drop_caches():
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as handle:
            handle.write("3\n")
        return True
    except OSError:
        return False


LAST_CPU = [0.0]  # CPU seconds (user + system) of the last timed command, from the children's rusage


def timed(cmd, env, ok_codes=(0,)):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    LAST_CPU[0] = used
    if proc.returncode not in ok_codes:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return elapsed, proc


def run_module(args, env, workdir):
    path = os.path.join(workdir, "args.json")
    with open(path, "w") as handle:
        json.dump({"ANSIBLE_MODULE_ARGS": args}, handle)
    elapsed, proc = timed([sys.executable, MODULE, path], env)
    result = json.loads(proc.stdout)
    if result.get("failed"):
        raise RuntimeError(f"hub_snapshot failed: {result.get('msg')}")
    return elapsed, result


def rate(nbytes, seconds):
    return f"{nbytes / seconds / 1024**2:8.1f} MiB/s" if seconds > 0 else "n/a"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gib", type=float, default=5.0, help="total size of the store in GiB (default 5)")
    parser.add_argument("--files", type=int, default=50, help="number of files (default 50)")
    parser.add_argument("--workers", type=int, default=8, help="max_workers / --max-workers (default 8)")
    parser.add_argument("--tmp", help="directory for the hub and the stores (default: a new temporary one)")
    parser.add_argument("--drop-caches", action="store_true", help="drop the page cache before each verify (root)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--repeats", type=int, default=3, help="downloads and no-op runs of each (default 3)")
    parser.add_argument("--fixture", action="store_true",
                        help="the unit tests' fixture Hub instead (tests/hub/fixtures.py: its quant repo at its pin, "
                             "small files; the lab serves the same repos)")
    parser.add_argument("--transfer", choices=["auto", "http"], default="auto", help="hub_snapshot's transfer option")
    opts = parser.parse_args()

    work = tempfile.mkdtemp(prefix="sparkfold-bench-", dir=opts.tmp)
    env = dict(os.environ)
    # hf_xet installed and enabled for both tools, as a user runs them; the test Hub stores no file with Xet
    # (it has no Xet storage), so both move every byte over HTTP here: what Xet changes is not measured.
    env.pop("HF_HUB_DISABLE_XET", None)
    env.update(
        HF_HOME=os.path.join(work, "hf-home"),
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_HUB_DISABLE_PROGRESS_BARS="1",
        PYTHONPATH=os.pathsep.join(filter(None, [os.path.join(ROOT, ".collections"), env.get("PYTHONPATH")])),
    )
    env.pop("HF_TOKEN", None)
    server = None
    try:
        t0 = time.perf_counter()
        if opts.fixture:
            hub = fixtures.build_hub(os.path.join(work, "hub"))
            repo_id, commit = fixtures.QUANT, fixtures.QUANT_PIN
            total = sum(f.size for f in hub.repos[repo_id].files(commit).values())
        else:
            hub, commit, total = build_store(os.path.join(work, "hub"), opts.gib, opts.files)
            repo_id = REPO
        build_s = time.perf_counter() - t0
        server = HubServer(hub)
        url = server.start()
        env["HF_ENDPOINT"] = url
        nfiles = len(hub.repos[repo_id].files(commit))
        print(f"store: {nfiles} files, {total / 1024**3:.2f} GiB ({total} bytes), built in {build_s:.1f} s")
        print(f"server: {url}   workers: {opts.workers}   cpus: {os.cpu_count()}   transfer: {opts.transfer}   "
              f"load average: {os.getloadavg()[0]:.1f}")
        print()

        ours = os.path.join(work, "store-hub_snapshot")
        theirs = os.path.join(work, "store-hf")
        base = {"repo_id": repo_id, "revision": commit, "endpoint": url, "local_dir": ours, "max_workers": opts.workers,
                "transfer": opts.transfer}
        hf = venv_bin("hf")
        hf_cmd = [hf, "download", repo_id, "--revision", commit, "--local-dir", theirs,
                  "--max-workers", str(opts.workers)]

        # what a no-op run of the module cannot do without: Ansible's module support and huggingface_hub's HEAD
        baseline, _proc = timed(
            [sys.executable, "-c", "import ansible.module_utils.basic, huggingface_hub.file_download"], env
        )

        def ours_download():
            shutil.rmtree(ours, ignore_errors=True)
            served = server.bytes_served
            seconds, result = run_module(dict(base, min_free_bytes=0), env, work)
            if result["downloaded_bytes"] != total:
                raise RuntimeError(f"hub_snapshot downloaded {result['downloaded_bytes']} of {total} bytes")
            cpu_ours.append(LAST_CPU[0])
            return seconds, server.bytes_served - served

        def hf_download():
            shutil.rmtree(theirs, ignore_errors=True)
            served = server.bytes_served
            seconds, _proc = timed(hf_cmd, env)
            cpu_hf.append(LAST_CPU[0])
            return seconds, server.bytes_served - served

        dl_ours_all, dl_hf_all, cpu_ours, cpu_hf = [], [], [], []
        for rep in range(opts.repeats):
            # alternate the order: the second of a pair finds the server's files in the page cache too
            pair = [(ours_download, dl_ours_all), (hf_download, dl_hf_all)]
            for fn, into in pair if rep % 2 == 0 else reversed(pair):
                into.append(fn())
        dl_ours, served_ours = statistics.median(s for s, _served in dl_ours_all), dl_ours_all[-1][1]
        dl_hf, served_hf = statistics.median(s for s, _served in dl_hf_all), dl_hf_all[-1][1]

        def ours_noop():
            served = server.bytes_served
            seconds, res = run_module(dict(base, verify="manifest"), env, work)
            if res["changed"] or res["downloaded_bytes"] or server.bytes_served != served:
                raise RuntimeError(f"the no-op hub_snapshot run changed the store: {res}")
            return seconds

        def hf_noop():
            served = server.bytes_served
            seconds, _proc = timed(hf_cmd, env)
            if server.bytes_served != served:
                raise RuntimeError(f"the no-op hf download fetched {server.bytes_served - served} bytes")
            return seconds

        noop_ours_all, noop_hf_all = [], []
        for rep in range(opts.repeats):
            pair = [(ours_noop, noop_ours_all), (hf_noop, noop_hf_all)]
            for fn, into in pair if rep % 2 == 0 else reversed(pair):
                into.append(fn())
        noop_ours, noop_hf = statistics.median(noop_ours_all), statistics.median(noop_hf_all)

        dropped = []

        def verify_run(label, fn):
            if opts.drop_caches:
                dropped.append(drop_caches())
            served = server.bytes_served
            seconds = fn()
            if server.bytes_served != served:
                raise RuntimeError(f"{label} downloaded {server.bytes_served - served} bytes")
            return seconds

        def ours_verify(mode):
            seconds, res = run_module(dict(base, verify=mode), env, work)
            if res["changed"] or res["downloaded_bytes"]:
                raise RuntimeError(f"verify={mode} changed the store: {res}")
            return seconds

        v_manifest = verify_run("verify=manifest", lambda: ours_verify("manifest"))
        v_full = verify_run("verify=full", lambda: ours_verify("full"))

        def hf_verify():
            seconds, proc = timed(
                [hf, "cache", "verify", repo_id, "--revision", commit, "--local-dir", ours, "--fail-on-missing-files"],
                env,
            )
            hf_verify_out.append((proc.stdout + proc.stderr).strip())
            return seconds

        hf_verify_out = []
        v_hf = verify_run("hf cache verify", hf_verify)

        def runs(values):
            return " ".join(f"{v:.2f}" for v in values)

        print(f"download (empty store -> complete), median of {opts.repeats}")
        print(f"  hub_snapshot        {dl_ours:8.2f} s  {rate(total, dl_ours)}  served {served_ours} bytes"
              f"  runs: {runs(s for s, _served in dl_ours_all)}")
        print(f"  hf download         {dl_hf:8.2f} s  {rate(total, dl_hf)}  served {served_hf} bytes"
              f"  runs: {runs(s for s, _served in dl_hf_all)}")
        print(f"  ratio hub_snapshot/hf download time: {dl_ours / dl_hf:.2f}x (target <= 1.00)")
        print(f"  CPU seconds (user + system), median: hub_snapshot {statistics.median(cpu_ours):.2f}  "
              f"hf download {statistics.median(cpu_hf):.2f}  (hub_snapshot hashes every byte against the Hub's "
              "sha256 and fsyncs each file; hf download 2.4.0 does neither)")
        rounds = [hf_s / ours_s for (ours_s, _a), (hf_s, _b) in zip(dl_ours_all, dl_hf_all)]
        print(f"  speed hub_snapshot/hf download per round: {runs(rounds)}x (target >= 1.00 in every round: "
              f"{'met' if min(rounds) >= 1.0 else 'missed'})")
        print()
        print(f"no-op re-run on the complete store (nothing to fetch), median of {opts.repeats}")
        print(f"  hub_snapshot manifest {noop_ours:8.2f} s  runs: {runs(noop_ours_all)}")
        print(f"  hf download           {noop_hf:8.2f} s  runs: {runs(noop_hf_all)}")
        print(f"  ratio hub_snapshot/hf download time: {noop_ours / noop_hf:.2f}x (target <= 1.10)")
        print(f"  per round: {runs(o / h for o, h in zip(noop_ours_all, noop_hf_all))}x")
        print()
        caches = "page cache dropped" if dropped and all(dropped) else "page cache warm"
        print(f"re-verify of the complete store ({caches})")
        print(f"  hub_snapshot manifest {v_manifest:8.2f} s  (stat only)")
        print(f"  hub_snapshot full     {v_full:8.2f} s  {rate(total, v_full)}")
        print(f"  hf cache verify       {v_hf:8.2f} s  {rate(total, v_hf)}")
        print(f"  ratio full/manifest: {v_full / v_manifest:.1f}x   hf-cache-verify/manifest: {v_hf / v_manifest:.1f}x"
              f"   hf-cache-verify/full: {v_hf / v_full:.2f}x")
        print()
        print("hf cache verify said: " + " | ".join(hf_verify_out[0].splitlines()[-3:]))
        print(
            f"each time includes interpreter start-up and imports ({baseline:.2f} s here) and a question to the Hub "
            "(hub_snapshot: the listing call, or one HEAD on a re-run that kept the listing; hf download: the listing)"
        )
        print(f"load average at the end: {os.getloadavg()[0]:.1f} (other work on this machine slows both tools)")
    finally:
        if server is not None:
            server.stop()
        if opts.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
