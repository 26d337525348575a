# SPDX-License-Identifier: GPL-3.0-or-later
"""sparkfold.cluster.report: a report prints as plain text under the repository's ansible.cfg, which hides ok results
(issue 28), once per host or once with run_once; no_log hides it; a wrong msg is named."""

from __future__ import annotations

import re
import sys

import pytest
from ansible.errors import AnsibleActionFail
from ansible_collections.sparkfold.cluster.plugins.action.report import report_text

from tests.unit.playbook import run_playbook

PLAY = """\
- name: Reports
  hosts: all
  gather_facts: false
  tasks:
    - name: A task whose ok result the output hides
      ansible.builtin.debug:
        msg: hidden by display_ok_hosts
    - name: A table, for each host
      sparkfold.cluster.report:
        msg: ["--- {{ inventory_hostname }} ---", "check  state  seen: a 'quoted' value, with a colon"]
    - name: A verdict, once
      sparkfold.cluster.report:
        msg: "HEALTHY: every check passed on {{ ansible_play_hosts_all | join(', ') }}\\n  second line"
      run_once: true
    - name: A secret
      sparkfold.cluster.report:
        msg: the secret report
      no_log: true
"""


def _run(tmp_path, quiet=True):
    (tmp_path / "inventory.yml").write_text("all:\n  hosts:\n" + "".join(
        f"    {h}:\n      ansible_connection: local\n      ansible_python_interpreter: {sys.executable}\n"
        for h in ("node-a", "node-b")))
    (tmp_path / "play.yml").write_text(PLAY)
    return run_playbook(tmp_path / "play.yml", tmp_path / "inventory.yml", tmp_path, quiet=quiet)


def test_reports_print_as_plain_text_where_ok_results_are_hidden(tmp_path):
    proc = _run(tmp_path)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-2000:]
    assert "hidden by display_ok_hosts" not in out and "ok: [" not in out  # ansible.cfg hides ok results
    for host in ("node-a", "node-b"):
        assert f"\n--- {host} ---\ncheck  state  seen: a 'quoted' value, with a colon\n" in out
    assert out.count("HEALTHY: every check passed on node-a, node-b\n  second line\n") == 1
    assert "the secret report" not in out
    assert re.search(r"node-a\s+: ok=4\s+changed=0", out), out[-1000:]


def test_with_every_result_shown_the_report_comes_once_before_its_ok_result(tmp_path):
    out = _run(tmp_path, quiet=False).stdout
    assert "hidden by display_ok_hosts" in out
    assert out.count("HEALTHY: every check passed on node-a, node-b") == 1


@pytest.mark.parametrize(("msg", "text"), [("a\nb", "a\nb"), (["a", "b"], "a\nb"), ([], "")])
def test_the_text_of_a_report(msg, text):
    assert report_text(msg) == text


def test_a_msg_that_is_no_report_is_named():
    with pytest.raises(AnsibleActionFail, match=r"msg must be a text or a list of lines, got dict"):
        report_text({"a": 1})
