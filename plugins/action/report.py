# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action plugin sparkfold.cluster.report: print a report (a table, a verdict) whatever the callback hides.

Documentation: plugins/modules/report.py.
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase


def report_text(msg):
    """The text of ``msg``: a string as it is, a list of lines joined with newlines."""
    if isinstance(msg, str):
        return msg
    if isinstance(msg, (list, tuple)) and all(isinstance(line, str) for line in msg):
        return "\n".join(msg)
    raise AnsibleActionFail(f"msg must be a text or a list of lines, got {type(msg).__name__}: pass the report's "
                            "lines (e.g. doctor_result.table) or its text")


class ActionModule(ActionBase):
    """Displays ``msg`` once for this task's host (with run_once, once for the play); changes nothing."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(("msg",))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        if "msg" not in self._task.args:
            raise AnsibleActionFail("msg is required: the report's text or its lines")
        text = report_text(self._task.args["msg"])
        result["changed"] = False
        if self._task.no_log:
            result["msg"] = "the report is hidden: no_log is set on this task"
            return result
        self._display.display(text)
        result["report_lines"] = len(text.splitlines())
        return result
