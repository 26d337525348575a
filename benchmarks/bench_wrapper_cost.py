# SPDX-License-Identifier: GPL-3.0-or-later
"""Cost of the Ansible wrapper around one sparkfold.cluster.engine_bench call (issue 31).

Starts tests' fake server (tests/unit/fake_openai.py, a stdlib OpenAI-compatible server that answers at
once) in a process of its own and runs the same smallest measurement (decode phase, one case, one run of
4 tokens) -n times in each of these ways:

    direct      engine_bench's run_phases in this process: the measurement itself
    ping        ansible-playbook, one ansible.builtin.ping task on localhost: the floor of any Ansible call
    module      the module as a process of its own (python engine_bench.py ARGS.json): start-up and imports
    task        ansible-playbook, one engine_bench task on localhost (connection local)
    async       ansible-playbook, the role's way: the task with async and poll 0, then
                sparkfold.cluster.job_watch (interval --interval s; the role's default is 15 s)

and prints, per way, the median wall time and CPU time (user + system of every process it started, the
async job's too: this process is their subreaper), what each costs over the direct measurement, and the
wall time in units of the ping playbook's (a figure that holds on a busy machine too). The
wrapper's cost is paid once per module call: the bench role makes one call for every phase and the whole
grid. Figures, not a test.

    .venv/bin/python benchmarks/bench_wrapper_cost.py
    .venv/bin/python benchmarks/bench_wrapper_cost.py -n 5 --interval 0.5
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / ".collections"))

# Run as a script from anywhere: the repository root and .collections must be on sys.path before
# these imports, hence their place after the path set-up (E402).
from ansible_collections.sparkfold.cluster.plugins.module_utils import engine_bench as eb  # noqa: E402
from ansible_collections.sparkfold.cluster.plugins.module_utils.bench_setup import ARGUMENT_SPEC  # noqa: E402
from ansible_collections.sparkfold.cluster.plugins.module_utils.engine_client import EngineClient  # noqa: E402

from tests.unit.playbook import ANSIBLE_PLAYBOOK, collections_path  # noqa: E402

SERVER = """
import sys, time
sys.path.insert(0, {root!r})
from tests.unit.fake_openai import FakeEngine, PrefixCache
fake = PrefixCache().route(FakeEngine()).__enter__()
print(fake.url, flush=True)
time.sleep(86400)
"""
CASES = [{"name": "prose_t0", "prompt": "prose", "temperature": 0.0, "thinking": False}]
PR_SET_CHILD_SUBREAPER = 36


def module_args(url):
    return {"url": url, "model": "m", "phases": ["decode"], "decode_cases": CASES, "decode_repeats": 1,
            "decode_max_tokens": 4}


def reap():
    """Collect every finished descendant left to this process (the subreaper), so its CPU time counts."""
    time.sleep(0.2)
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def timed(command, env, cwd):
    """(wall s, CPU s of every process started) of ``command``; fails on a non-zero exit."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    reap()
    wall = time.monotonic() - t0 - 0.2
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"{' '.join(map(str, command))} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def direct(url):
    params = {key: spec.get("default") for key, spec in ARGUMENT_SPEC.items()}
    params.update(module_args(url))
    c0, t0 = time.process_time(), time.monotonic()
    eb.run_phases(EngineClient(url, model="m"), params, ["decode"], None, None, None)
    return time.monotonic() - t0, time.process_time() - c0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("-n", type=int, default=5, help="runs of each way (the median is printed)")
    parser.add_argument("--interval", type=float, default=0.5, help="job_watch interval of the async way, s")
    args = parser.parse_args()
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)

    tmp = pathlib.Path(tempfile.mkdtemp(prefix="bench-wrapper-"))
    server = subprocess.Popen([sys.executable, "-c", SERVER.format(root=str(ROOT))], stdout=subprocess.PIPE,
                              text=True)
    try:
        url = server.stdout.readline().strip()
        margs = module_args(url)
        (tmp / "args.json").write_text(json.dumps({"ANSIBLE_MODULE_ARGS": margs}))
        (tmp / "hosts.yml").write_text(json.dumps({"all": {"hosts": {"localhost": {
            "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
        (tmp / "ping.yml").write_text(json.dumps([{"hosts": "all", "gather_facts": False, "tasks": [
            {"ansible.builtin.ping": {}}]}]))
        (tmp / "task.yml").write_text(json.dumps([{"hosts": "all", "gather_facts": False, "tasks": [
            {"sparkfold.cluster.engine_bench": margs}]}]))
        progress = str(tmp / "progress.json")
        (tmp / "async.yml").write_text(json.dumps([{"hosts": "all", "gather_facts": False, "tasks": [
            {"sparkfold.cluster.engine_bench": dict(margs, progress_file=progress), "async": 600, "poll": 0,
             "register": "job"},
            {"sparkfold.cluster.job_watch": {"jid": "{{ job.ansible_job_id }}", "progress_file": progress,
                                             "kind": "bench", "interval": args.interval}}]}]))
        env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=collections_path(),
                   ANSIBLE_LOCAL_TEMP=str(tmp / "ansible-tmp"), ANSIBLE_HOME=str(tmp / "ansible-home"),
                   PYTHONPATH=collections_path())
        module = ROOT / "plugins" / "modules" / "engine_bench.py"
        ways = {
            "direct": lambda: direct(url),
            "module": lambda: timed([sys.executable, str(module), str(tmp / "args.json")], env, tmp),
            "ping": lambda: timed([str(ANSIBLE_PLAYBOOK), "-i", "hosts.yml", "ping.yml"], env, tmp),
            "task": lambda: timed([str(ANSIBLE_PLAYBOOK), "-i", "hosts.yml", "task.yml"], env, tmp),
            "async": lambda: timed([str(ANSIBLE_PLAYBOOK), "-i", "hosts.yml", "async.yml"], env, tmp),
        }
        figures = {}
        for name, way in ways.items():
            way()  # once untimed: warm caches (pyc files, the page cache)
            runs = [way() for _i in range(args.n)]
            figures[name] = (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs))
    finally:
        server.kill()
        server.wait()

    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; {args.n} runs per way (median); "
          f"one engine_bench call measuring one 4-token decode run against a fake server; job_watch interval "
          f"{args.interval:g} s\n")
    print(f"{'way':<8} {'wall s':>8} {'CPU s':>8} {'wall over direct':>17} {'CPU over direct':>16} {'wall / ping':>12}")
    print("-" * 74)
    base_wall, base_cpu = figures["direct"]
    ping = figures["ping"][0]
    for name, (wall, cpu) in figures.items():
        print(f"{name:<8} {wall:8.2f} {cpu:8.2f} {wall - base_wall:17.2f} {cpu - base_cpu:16.2f} {wall / ping:12.2f}")
    wall, cpu = figures["async"]
    print(f"\nper module call, the role's way: {wall - base_wall:.2f} s of wall time and {cpu - base_cpu:.2f} s of "
          "CPU over the measurement itself, paid once per benchmark run (one call for all phases and the grid)")


if __name__ == "__main__":
    main()
