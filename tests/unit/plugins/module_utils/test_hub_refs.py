# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for module_utils/hub_refs: force-push signs and unpinned revisions (no Hub needed)."""

from datetime import datetime, timezone
from types import SimpleNamespace

import pytest
from ansible_collections.sparkfold.cluster.plugins.module_utils import hub_refs

MAIN = "a" * 40
OLD = "b" * 40
TAGGED = "c" * 40


def commit(commit_id, day, title="t"):
    return SimpleNamespace(commit_id=commit_id, title=title, created_at=datetime(2026, 1, day, tzinfo=timezone.utc))


class FakeApi:
    def __init__(self, created=None, fail=False):
        self.created = created
        self.fail = fail

    def repo_info(self, repo_id, repo_type="model"):
        if self.fail:
            raise ConnectionError("no route to host")
        return SimpleNamespace(created_at=self.created)


def refs(tags=()):
    return {
        "branches": [{"name": "main", "commit": MAIN}],
        "tags": [{"name": name, "commit": target} for name, target in tags],
    }


def test_tag_on_an_unrelated_history_is_a_sign_without_created_at():
    histories = {MAIN: [commit(MAIN, 20, "Upload")], TAGGED: [commit(TAGGED, 3), commit(OLD, 2)]}
    forced = hub_refs.force_pushed(FakeApi(fail=True), "o/r", "model", refs([("v1", TAGGED)]), histories)
    assert forced == {
        "branch": "main",
        "root": {"commit": MAIN, "date": "2026-01-20T00:00:00+00:00", "title": "Upload"},
        "created_at": None,
        "unrelated_tags": ["v1"],
        "diverged_tags": [],
    }
    assert hub_refs.describe_force_push(forced, "f" * 40) == (
        f" The history of main looks force-pushed: it shares no commit with tag v1. main was replaced by unrelated "
        f"commits, so older commits such as {'f' * 40} were removed from the Hub and will not come back."
    )


def test_no_sign_on_a_history_that_reaches_the_repos_start():
    created = datetime(2026, 1, 2, tzinfo=timezone.utc)
    histories = {MAIN: [commit(MAIN, 20), commit(TAGGED, 3), commit(OLD, 2)], TAGGED: [commit(TAGGED, 3)]}
    api = FakeApi(created=created)
    assert hub_refs.force_pushed(api, "o/r", "model", refs([("v1", TAGGED)]), histories) is None
    # the first commit a few minutes after the repo was created is how the Hub makes repos: no sign either
    late_by_minutes = SimpleNamespace(commit_id=OLD, title="t", created_at=created.replace(minute=5))
    histories[MAIN][-1] = late_by_minutes
    assert hub_refs.force_pushed(api, "o/r", "model", refs(), histories) is None


def test_a_tag_main_dropped_in_a_rebase_style_push_is_a_sign():
    """main reset to OLD, a new commit on top; tag v1 (TAGGED, on OLD) is in no branch any more."""
    histories = {MAIN: [commit(MAIN, 20, "Requantize"), commit(OLD, 2, "Initial")],
                 TAGGED: [commit(TAGGED, 3), commit(OLD, 2, "Initial")]}
    forced = hub_refs.force_pushed(FakeApi(created=datetime(2026, 1, 2, tzinfo=timezone.utc)), "o/r", "model",
                                   refs([("v1", TAGGED)]), histories)
    assert forced["created_at"] is None and forced["unrelated_tags"] == []
    assert forced["diverged_tags"] == [
        {"name": "v1", "commit": TAGGED,
         "reset_to": {"commit": OLD, "date": "2026-01-02T00:00:00+00:00", "title": "Initial"}},
    ]
    assert hub_refs.describe_force_push(forced, "f" * 40) == (
        f" The history of main looks force-pushed: it no longer contains tag v1 ({TAGGED[:7]}), whose history it "
        f'shares only up to {OLD[:7]} (2026-01-02 00:00 UTC, "Initial"). main was reset to an older commit '
        f"({OLD[:7]} or before) and new commits were put on top, so the commits it had after that, such as "
        f"{'f' * 40}, were removed from the Hub and will not come back."
    )


def test_a_tag_another_branch_holds_is_no_sign():
    """A quant repo's size branch forks from main and carries its own tag: that is no rewrite of main."""
    size_branch = "d" * 40
    histories = {MAIN: [commit(MAIN, 20), commit(OLD, 2)],
                 size_branch: [commit(size_branch, 4), commit(TAGGED, 3), commit(OLD, 2)],
                 TAGGED: [commit(TAGGED, 3), commit(OLD, 2)]}
    both = refs([("v1", TAGGED)])
    both["branches"].append({"name": "2.9bpw", "commit": size_branch})
    api = FakeApi(created=datetime(2026, 1, 2, tzinfo=timezone.utc))
    assert hub_refs.force_pushed(api, "o/r", "model", both, histories) is None


def test_no_branch_or_history_no_sign():
    assert hub_refs.force_pushed(FakeApi(), "o/r", "model", {"branches": [], "tags": []}, {}) is None
    assert hub_refs.force_pushed(FakeApi(), "o/r", "model", refs(), {MAIN: []}) is None


@pytest.mark.parametrize(
    ("revision", "expected"),
    [
        (MAIN, "commit"),
        (MAIN[:7], "commit"),
        (MAIN.upper(), "commit"),
        ("main", "branch"),
        ("v1", "tag"),
        ("refs/heads/main", "branch"),
        ("refs/tags/v1", "tag"),
        ("refs/pr/3", "pull request ref"),
        ("release", "branch or tag"),
        ("abcdef0", "branch or tag"),  # hex, but not a prefix of the commit it resolved to
    ],
)
def test_revision_kind(revision, expected):
    assert hub_refs.revision_kind(revision, MAIN, refs([("v1", TAGGED)])) == expected


def test_unpinned_revision_warning():
    assert hub_refs.unpinned_revision_warning("o/r", MAIN, MAIN, "commit", "weights_revision") is None
    assert hub_refs.unpinned_revision_warning("o/r", "v1", MAIN, "tag", "weights_revision") == (
        f"revision v1 of o/r is a tag, not a pin: it resolved to commit {MAIN} on this run, but a tag can move, so "
        f"the next run may deploy another commit. To pin it, set weights_revision to {MAIN}"
    )


def test_format_date():
    assert hub_refs.format_date("2026-02-01T00:00:00.000Z") == "2026-02-01 00:00 UTC"
    assert hub_refs.format_date(datetime(2026, 2, 1, 1, 30)) == "2026-02-01 01:30 UTC"
    assert hub_refs.format_date(None) == "no date"
    assert hub_refs.format_date("yesterday") == "yesterday"


def test_ref_names_when_listing_fails():
    class Broken:
        def list_repo_refs(self, repo_id, repo_type="model"):
            raise ConnectionError("down")

    assert hub_refs.ref_names(Broken(), "o/r") is None
