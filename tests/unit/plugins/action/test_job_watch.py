# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for the sparkfold.cluster.job_watch action plugin.

ActionModule.run is driven with a fake _execute_module standing for the target: async_status
answers from a scripted job, slurp from a dict of files. A fake clock replaces time, so intervals
and timeouts cost nothing.
"""

import base64
import json
import sys
from unittest.mock import MagicMock

import pytest
from ansible.errors import AnsibleActionFail
from ansible.plugins.shell.sh import ShellModule
from ansible_collections.sparkfold.cluster.plugins.action import job_watch

JID = "j123456789012.4242"
HOME = "/home/spark"
JOB_FILE = f"{HOME}/.ansible_async/{JID}"
PROGRESS = "/srv/models/store/.sparkfold-progress.json"


def stack_depth():
    frame, depth = sys._getframe(), 0
    while frame:
        depth, frame = depth + 1, frame.f_back
    return depth


class Target:
    """The target: a job that is running for `running` polls then ends with `final`, and files for slurp."""

    def __init__(self, running, final=None, files=None, progress=None):
        self.running = running
        self.final = final if final is not None else {"rc": 0, "changed": True, "msg": "done", "started": 1,
                                                      "finished": 1, "ansible_job_id": JID}
        self.files = dict(files or {})
        self.progress = progress  # progress(poll) -> dict written to PROGRESS before that poll's slurp
        self.calls = []
        self.depths = []

    def execute_module(self, module_name=None, module_args=None, task_vars=None, **kwargs):
        self.calls.append((module_name, dict(module_args)))
        self.depths.append(stack_depth())
        if module_name == "ansible.builtin.async_status":
            polls = sum(1 for call in self.calls if call[0] == module_name)
            if polls > self.running:
                return dict(self.final)
            return {"started": 1, "finished": 0, "ansible_job_id": JID, "results_file": JOB_FILE}
        assert module_name == "ansible.builtin.slurp"
        if self.progress:
            self.files[PROGRESS] = self.progress(self.polls)
        if module_args["src"] not in self.files:
            return {"failed": True, "msg": f"file not found: {module_args['src']}"}
        content = self.files[module_args["src"]]
        raw = content if isinstance(content, bytes) else json.dumps(content).encode()
        return {"content": base64.b64encode(raw).decode(), "encoding": "base64", "source": module_args["src"]}

    @property
    def polls(self):
        return sum(1 for call in self.calls if call[0] == "ansible.builtin.async_status")


class Clock:
    """time.monotonic and time.sleep of the plugin: sleeping moves the clock on."""

    def __init__(self):
        self.now = 1000.0
        self.slept = []

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    fake = Clock()
    monkeypatch.setattr(job_watch, "time", fake)
    return fake


@pytest.fixture
def watch(clock):
    """watch(target, check_mode=False, **args) -> (result, lines): ActionModule.run against target."""

    def _watch(target, check_mode=False, **args):
        task = MagicMock()
        task.args = args
        task.async_val = 0
        task.check_mode = check_mode
        connection = MagicMock()
        connection._shell = ShellModule()
        connection._shell.tmpdir = "/tmp/ansible-tmp"
        action = job_watch.ActionModule(task, connection, MagicMock(), loader=None, templar=None)
        action._execute_module = target.execute_module
        action._remote_expand_user = lambda path, **kwargs: path.replace("~", HOME, 1)
        action.get_shell_option = lambda option, default=None: default
        lines = []
        action._display = MagicMock()
        action._display.display.side_effect = lines.append
        _watch.lines = lines
        return action.run(task_vars={"inventory_hostname": "spark-a"}), lines

    return _watch


def download_progress(poll):
    return {"pid": 4242, "phase": "downloading", "files_total": 3, "files_done": min(poll, 3),
            "bytes_total": 3 * 1073741824, "bytes_done": poll * 1048576, "current": ["model-00002.safetensors"]}


def test_400_rounds_run_flat(watch, clock):
    target = Target(400, progress=download_progress)
    result, lines = watch(target, jid=JID, interval=0, progress_file=PROGRESS, kind="download", label="r@abc")
    assert target.polls == 401
    assert len(lines) == 400
    assert result["job_watch"]["rounds"] == 401
    assert result["finished"] is True and result["started"] is True
    assert result["rc"] == 0 and result["changed"] is True and result["msg"] == "done"
    assert len(set(target.depths)) == 1  # round 400 runs at the depth of round 1: no recursion
    assert lines[0] == "[spark-a] r@abc: 0.0 of 3.0 GiB, 1 of 3 files, now model-00002.safetensors"
    assert lines[-1] == "[spark-a] r@abc: 0.39 of 3.0 GiB, 3 of 3 files, now model-00002.safetensors"
    assert result["job_watch"]["last_line"] == lines[-1][len("[spark-a] "):]
    assert clock.slept == [0.0] * 400


def test_every_round_asks_async_status_then_reads_the_progress(watch, clock):
    target = Target(2, files={PROGRESS: {"files_done": 1}})
    result, lines = watch(target, jid=JID, interval="15", timeout="600", progress_file=PROGRESS)
    assert target.calls == [
        ("ansible.builtin.async_status", {"jid": JID, "_async_dir": f"{HOME}/.ansible_async"}),
        ("ansible.builtin.slurp", {"src": PROGRESS}),
    ] * 2 + [("ansible.builtin.async_status", {"jid": JID, "_async_dir": f"{HOME}/.ansible_async"})]
    assert clock.slept == [15.0, 15.0]
    assert lines == ['[spark-a] still running after 0 s: {"files_done": 1}',
                     '[spark-a] still running after 15 s: {"files_done": 1}']
    assert result["results_file"] == JOB_FILE and result["ansible_job_id"] == JID
    # the keys the async_status action adds, as the calling task registered them before
    assert result["stdout_lines"] == [] and result["stderr"] == ""


def test_a_job_done_at_the_first_look_prints_nothing(watch, clock):
    target = Target(0)
    result, lines = watch(target, jid=JID, progress_file=PROGRESS, kind="bench")
    assert lines == [] and clock.slept == []
    assert [call[0] for call in target.calls] == ["ansible.builtin.async_status"]
    assert result["job_watch"] == {"rounds": 1, "waited_s": 0.0, "last_line": ""}


def test_async_dir_option(watch):
    target = Target(0)
    watch(target, jid=JID, async_dir="~/jobs")
    assert target.calls[0][1]["_async_dir"] == f"{HOME}/jobs"


def test_a_failed_job_returns_its_own_failure(watch):
    final = {"failed": True, "rc": 1, "msg": "revision abc no longer exists", "kind": "revision_not_found",
             "started": 1, "finished": 1, "ansible_job_id": JID, "changed": False}
    result, lines = watch(Target(3, final=final), jid=JID, interval=0, kind="download", label="r@abc")
    assert len(lines) == 3
    assert result["failed"] is True and result["rc"] == 1 and result["kind"] == "revision_not_found"
    assert result["msg"] == "revision abc no longer exists"
    assert result["finished"] is True


def test_a_lost_job_fails_as_async_status_does(watch):
    final = {"failed": True, "msg": "could not find job", "ansible_job_id": JID, "started": True, "finished": True}
    result = watch(Target(0, final=final), jid=JID)[0]
    assert result["failed"] is True and result["msg"] == "could not find job"


def test_a_failing_status_module_ends_the_watch(watch):
    final = {"failed": True, "msg": "MODULE FAILURE", "module_stderr": "python: not found"}
    result = watch(Target(1, final=final), jid=JID, interval=0)[0]
    assert result["failed"] is True and result["msg"] == "MODULE FAILURE"
    assert result["finished"] is False


def test_timeout_names_the_job_the_wait_the_last_line_and_the_pid(watch, clock):
    target = Target(10**6, progress=download_progress)
    with pytest.raises(AnsibleActionFail) as err:
        watch(target, jid=JID, interval=15, timeout=60, progress_file=PROGRESS, kind="download", label="r@abc")
    msg = str(err.value)
    assert target.polls == 5  # at 0, 15, 30, 45 and 60 s
    assert f"async job {JID} on spark-a still runs after 60 s" in msg
    assert "last progress: r@abc: 0.0 of 3.0 GiB, 3 of 3 files, now model-00002.safetensors" in msg
    assert "`kill 4242` on spark-a" in msg
    assert JOB_FILE in msg
    assert len(watch.lines) == 5


def test_timeout_without_pid_names_the_job_file(watch, clock):
    with pytest.raises(AnsibleActionFail) as err:
        watch(Target(10**6), jid=JID, interval=1, timeout=2.5)
    msg = str(err.value)
    assert "still runs after 2 s" in msg and "last progress: still running after 2 s" in msg
    assert f"killing its process on spark-a (its state file is {JOB_FILE})" in msg
    assert clock.slept == [1.0, 1.0, 0.5]  # the last sleep ends at the timeout


def test_check_mode_with_no_job_skips(watch):
    target = Target(0)
    result, lines = watch(target, check_mode=True, jid="", kind="download")
    assert result["skipped"] is True and "nothing to follow" in result["msg"]
    assert target.calls == [] and lines == []


def test_check_mode_follows_a_job_that_runs(watch):
    result = watch(Target(1), check_mode=True, jid=JID, interval=0)[0]
    assert result["finished"] is True and result["rc"] == 0


def test_an_empty_jid_outside_check_mode_fails(watch):
    with pytest.raises(AnsibleActionFail, match="jid is empty"):
        watch(Target(0), jid="  ")


@pytest.mark.parametrize(
    "args, match",
    [
        ({"kind": "bench", "format": "{done}"}, "mutually exclusive"),
        ({"kind": "other"}, "kind"),
        ({"interval": -1}, "0 or more"),
        ({}, "jid"),
    ],
)
def test_bad_options(watch, args, match):
    if args:
        args["jid"] = JID
    with pytest.raises(AnsibleActionFail, match=match):
        watch(Target(0), **args)


# --- the lines, as the roles' self-including progress.yml printed them ---------------------------------
@pytest.mark.parametrize(
    "progress, line",
    [
        ({}, "r@abc: 0.0 of 0.0 GiB, 0 of ? files"),
        (
            {"bytes_done": 1610612736, "bytes_total": 3221225472, "files_done": 1, "files_total": 3,
             "current": ["a.safetensors", "b.safetensors"]},
            "r@abc: 1.5 of 3.0 GiB, 1 of 3 files, now a.safetensors, b.safetensors",
        ),
        ({"bytes_done": 123456789, "bytes_total": 987654321, "files_done": 0, "files_total": 2, "current": []},
         "r@abc: 0.11 of 0.92 GiB, 0 of 2 files"),
        ({"current": "c.json", "files_total": 1}, "r@abc: 0.0 of 0.0 GiB, 0 of 1 files, now c.json"),
    ],
)
def test_download_line(progress, line):
    assert job_watch.progress_line(progress, kind="download", label="r@abc") == line


@pytest.mark.parametrize(
    "progress, line",
    [
        ({}, "bench 0/? steps, 0 s: starting"),
        ({"phase": "starting", "step": "", "last": "", "done": 0, "total": 12, "elapsed_s": 0.4},
         "bench 0/12 steps, 0 s: starting"),
        (
            {"phase": "decode", "step": "code run 1/3", "last": "decode prose run 3: 41.2 tok/s", "done": 3,
             "total": 12, "elapsed_s": 84.9},
            "bench 3/12 steps, 84 s: decode code run 1/3; last: decode prose run 3: 41.2 tok/s",
        ),
    ],
)
def test_bench_line(progress, line):
    assert job_watch.progress_line(progress, kind="bench") == line


def test_format_line():
    fmt = "{label} {phase}: {files_done}/{files_total} after {waited_s} s"
    assert job_watch.progress_line({"phase": "x", "files_done": 2}, fmt=fmt, label="L", waited=7.9) == (
        "L x: 2/? after 7 s"
    )
    line = job_watch.progress_line({"n": "a"}, fmt="{n:d}")
    assert line.startswith("(format '{n:d}' failed:") and line.endswith('{"n": "a"}')


def test_plain_line():
    assert job_watch.progress_line({}, waited=12.3) == "still running after 12 s"
    assert job_watch.progress_line({"a": 1}, label="job", waited=0) == 'job: still running after 0 s: {"a": 1}'


def test_unreadable_progress_counts_as_empty(watch):
    target = Target(1, files={PROGRESS: b"{half a json"})
    lines = watch(target, jid=JID, interval=0, progress_file=PROGRESS, kind="bench")[1]
    assert lines == ["[spark-a] bench 0/? steps, 0 s: starting"]
    target = Target(1, files={PROGRESS: [1, 2]})
    lines = watch(target, jid=JID, interval=0, progress_file=PROGRESS, kind="bench")[1]
    assert lines == ["[spark-a] bench 0/? steps, 0 s: starting"]
