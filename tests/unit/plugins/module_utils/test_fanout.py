# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plan of fabric_copy: rsync's dry-run lines read, files dealt to streams over the addresses."""

from __future__ import annotations

import pytest
from ansible_collections.sparkfold.cluster.plugins.module_utils.fanout import (
    PlanError,
    changes,
    files_from,
    parse_listing,
    shard,
)

LISTING = """\
created directory /srv/models/x
cd+++++++++|4096|./
>f+++++++++|300000|a.safetensors
cd+++++++++|4096|sub/
>f.st......|3|sub/b.json
.f....og...|7|c.txt
*deleting  |0|old.bin
"""


def test_listing_is_read():
    plan = parse_listing(LISTING)
    assert plan["transfer"] == [("a.safetensors", 300000), ("sub/b.json", 3)]
    assert plan["dirs"] == [".", "sub"]
    assert plan["delete"] == ["old.bin"]
    assert plan["other"] == [".f....og... c.txt"]
    assert changes(plan)[0] == "send a.safetensors (300000 bytes)"
    assert len(changes(plan)) == 6


def test_empty_listing_is_no_change():
    plan = parse_listing("receiving incremental file list\n")
    assert changes(plan) == []


def test_bad_size_is_refused():
    with pytest.raises(PlanError, match=r"a\.bin"):
        parse_listing(">f+++++++++|many|a.bin\n")


def test_streams_balance_bytes_and_alternate_addresses():
    files = [(f"shard-{i}", size) for i, size in enumerate([50, 40, 30, 20, 10, 10, 5])]
    streams = shard(files, 4, ["10.0.0.1", "10.0.1.1"])
    assert [s["address"] for s in streams] == ["10.0.0.1", "10.0.1.1", "10.0.0.1", "10.0.1.1"]
    assert sorted(p for s in streams for p in s["files"]) == sorted(p for p, _size in files)
    assert [s["bytes"] for s in streams] == [50, 40, 40, 35]  # largest first, each to the lightest stream


def test_no_more_streams_than_files():
    streams = shard([("a", 1), ("b", 2)], 8, ["10.0.0.1", "10.0.1.1"])
    assert len(streams) == 2
    with pytest.raises(ValueError):
        shard([("a", 1)], 0, ["10.0.0.1"])
    with pytest.raises(ValueError):
        shard([("a", 1)], 2, [])


def test_files_from_is_nul_separated():
    assert files_from(["a", "sub/b"]) == b"a\0sub/b\0"
