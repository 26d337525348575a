# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The benchmark playbooks show their figures under the project's ansible.cfg, which hides ok results
(display_ok_hosts = false): a figure printed with ansible.builtin.debug is an ok result and never appeared
(benchmarks/fanout.yml printed nothing but the task names until it used sparkfold.cluster.report)."""

from __future__ import annotations

import configparser
import pathlib

import pytest
import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
SHOWING = ("Print", "Show")


def tasks(node):
    """Every task of a play list or task list, blocks and play sections opened."""
    for item in node if isinstance(node, list) else []:
        if not isinstance(item, dict):
            continue
        for key in ("tasks", "pre_tasks", "post_tasks", "handlers", "block", "rescue", "always"):
            yield from tasks(item.get(key))
        if "hosts" not in item and "block" not in item:
            yield item


def test_ansible_cfg_hides_ok_results():
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "ansible.cfg")
    assert cfg.getboolean("defaults", "display_ok_hosts") is False


@pytest.mark.parametrize("path", sorted((REPO / "benchmarks").glob("*.yml")), ids=lambda p: p.name)
def test_what_a_benchmark_prints_is_shown(path):
    showing = [t for t in tasks(yaml.safe_load(path.read_text())) if str(t.get("name", "")).startswith(SHOWING)]
    for task in showing:
        assert "ansible.builtin.debug" not in task and "debug" not in task, (
            f"{path.name}: '{task['name']}' prints with debug, which ansible.cfg hides; use sparkfold.cluster.report")
        assert "sparkfold.cluster.report" in task, task
