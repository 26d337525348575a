# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every notify of a role names a handler of that same role (its name or its listen topic).

A role that notifies another role's handler fails every play without that role ("The requested handler ... was not
found"): the engine and engine_inputs roles used to notify `sparkfold engine changed`, which only engine_service
defined. They report what they changed on disk instead (engine_service_stale_causes); engine_service decides the
restart once.
"""

from __future__ import annotations

import pytest
import yaml

from tests.unit.playbook import REPO

ROLES = sorted(path.parent.parent.name for path in (REPO / "roles").glob("*/tasks/main.yml"))


def walk_tasks(tasks):
    """Every task of a task list, blocks opened."""
    for task in tasks or []:
        yield task
        for key in ("block", "rescue", "always"):
            yield from walk_tasks(task.get(key))


def notified(role_dir):
    """(file, topic) of every notify in the role's tasks."""
    for path in sorted((role_dir / "tasks").glob("*.yml")):
        for task in walk_tasks(yaml.safe_load(path.read_text())):
            topics = task.get("notify") or []
            for topic in [topics] if isinstance(topics, str) else topics:
                yield path.relative_to(REPO), topic


def handler_topics(role_dir):
    """The names and listen topics of the role's handlers."""
    path = role_dir / "handlers" / "main.yml"
    topics = set()
    for handler in walk_tasks(yaml.safe_load(path.read_text()) if path.exists() else []):
        topics.add(handler.get("name"))
        listen = handler.get("listen") or []
        topics.update([listen] if isinstance(listen, str) else listen)
    return topics


@pytest.mark.parametrize("role", ROLES)
def test_a_role_notifies_only_its_own_handlers(role):
    role_dir = REPO / "roles" / role
    own = handler_topics(role_dir)
    foreign = [f"{path}: {topic}" for path, topic in notified(role_dir) if topic not in own]
    assert foreign == [], f"{role} notifies handlers it does not define: {foreign}"


def test_the_check_sees_the_notifies():
    """The walk finds notifies at all (a role known to notify its own handler)."""
    topics = [topic for path, topic in notified(REPO / "roles" / "storage") if path]
    assert "Reload NFS Exports" in topics
    assert "Reload NFS Exports" in handler_topics(REPO / "roles" / "storage")
