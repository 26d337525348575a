# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action plugin sparkfold.cluster.job_watch: follow an async job in one task, flatly.

One loop in one task replaces a task file that includes itself each round (Ansible dies with a
RecursionError after about 250 rounds). Documentation: plugins/modules/job_watch.py.
"""

from __future__ import annotations

import base64
import json
import time

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.vars import merge_hash

GIB = 1073741824

ARGUMENT_SPEC = {
    "jid": {"type": "str", "required": True},
    "interval": {"type": "float", "default": 15.0},
    "timeout": {"type": "float", "default": 86400.0},
    "progress_file": {"type": "str"},
    "kind": {"type": "str", "choices": ["download", "bench"]},
    "format": {"type": "str"},
    "label": {"type": "str", "default": ""},
    "async_dir": {"type": "str"},
}


def _download_line(p):
    """Today's weights line: GiB done of total, files done of total, the files in flight."""
    line = (
        f"{round((p.get('bytes_done') or 0) / GIB, 2)} of {round((p.get('bytes_total') or 0) / GIB, 2)} GiB, "
        f"{p.get('files_done', 0)} of {p.get('files_total', '?')} files"
    )
    current = p.get("current")
    if current:
        line += ", now " + ", ".join(str(c) for c in (current if isinstance(current, list) else [current]))
    return line


def _bench_line(p):
    """Today's bench line: steps done of total, seconds, phase and step, the last measurement."""
    try:
        elapsed = int(float(p.get("elapsed_s") or 0))
    except (TypeError, ValueError):
        elapsed = 0
    what = " ".join(str(x) for x in (p.get("phase") or "starting", p.get("step") or "") if x)
    last = f"; last: {p['last']}" if p.get("last") else ""
    return f"bench {p.get('done', 0)}/{p.get('total', '?')} steps, {elapsed} s: {what}{last}"


class _Fields(dict):
    """Fields of a format string: a field the progress file lacks shows as '?'."""

    def __missing__(self, key):
        return "?"


def progress_line(progress, kind=None, fmt=None, label="", waited=0.0):
    """The line of one round: by kind (after 'label: '), by format string, else a plain 'still running'."""
    if fmt:
        try:
            return fmt.format_map(_Fields(progress, label=label, waited_s=int(waited)))
        except (ValueError, TypeError, AttributeError, IndexError, KeyError) as exc:
            return f"(format {fmt!r} failed: {exc}) {json.dumps(progress, sort_keys=True)}"
    if kind == "download":
        line = _download_line(progress)
    elif kind == "bench":
        line = _bench_line(progress)
    else:
        line = f"still running after {int(waited)} s"
        if progress:
            line += f": {json.dumps(progress, sort_keys=True)}"
    return f"{label}: {line}" if label else line


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        args = self.validate_argument_spec(ARGUMENT_SPEC, mutually_exclusive=[("kind", "format")])[1]
        jid = (args["jid"] or "").strip()
        if not jid:
            if self._task.check_mode:
                result.update(skipped=True, changed=False, msg="check mode: no job was started, nothing to follow")
                return result
            raise AnsibleActionFail("jid is empty: give the ansible_job_id of a task run with async and poll: 0")
        if args["interval"] < 0 or args["timeout"] < 0:
            raise AnsibleActionFail("interval and timeout must be 0 or more")

        async_dir = self._remote_expand_user(
            args["async_dir"] or self.get_shell_option("async_dir", default="~/.ansible_async")
        )
        job_file = self._connection._shell.join_path(async_dir, jid)
        host = task_vars.get("inventory_hostname", "the target")
        started = time.monotonic()
        rounds, line = 0, ""
        while True:
            rounds += 1
            status = self._status(jid, async_dir, job_file, task_vars)
            waited = time.monotonic() - started
            if status.get("finished") or status.get("failed"):
                status["job_watch"] = {"rounds": rounds, "waited_s": round(waited, 1), "last_line": line}
                return merge_hash(result, status)
            progress = self._progress(args["progress_file"], task_vars)
            line = progress_line(progress, args["kind"], args["format"], args["label"], waited)
            self._display.display(f"[{host}] {line}")
            if waited >= args["timeout"]:
                raise AnsibleActionFail(self._timeout_message(jid, host, waited, line, status, progress, job_file))
            time.sleep(min(args["interval"], max(args["timeout"] - waited, 0)))

    def _status(self, jid, async_dir, job_file, task_vars):
        """async_status of the job, shaped as the async_status action returns it."""
        base = {
            "started": True, "finished": False, "ansible_job_id": jid, "results_file": job_file,
            "stdout": "", "stderr": "", "stdout_lines": [], "stderr_lines": [],
        }
        res = self._execute_module(
            module_name="ansible.builtin.async_status",
            module_args={"jid": jid, "_async_dir": async_dir},
            task_vars=task_vars,
        )
        status = merge_hash(base, res)
        for key in ("started", "finished"):
            status[key] = bool(status[key])
        return status

    def _progress(self, path, task_vars):
        """The job's progress file as a dict; {} while it is missing or unreadable."""
        if not path:
            return {}
        res = self._execute_module(module_name="ansible.builtin.slurp", module_args={"src": path}, task_vars=task_vars)
        if res.get("failed") or "content" not in res:
            return {}
        try:
            data = json.loads(base64.b64decode(res["content"]))
        except (TypeError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    @staticmethod
    def _timeout_message(jid, host, waited, line, status, progress, job_file):
        pid = status.get("pid") or status.get("child_pid") or progress.get("pid")
        if pid:
            stop = f"stop it with `kill {pid}` on {host}"
        else:
            stop = f"stop it by killing its process on {host} (its state file is {job_file})"
        return (
            f"async job {jid} on {host} still runs after {int(waited)} s of watching; last progress: "
            f"{line or 'none'}. The job keeps running until it ends or reaches its own async limit: {stop}, "
            f"or wait for it (its result will be in {job_file})."
        )
