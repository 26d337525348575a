# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for the sparkfold.cluster.engram_slim module (AnsibleModule run in-process), on the lab Hub's
real-format copy of deepseek-ai/DeepSeek-V4.1-Flash's Engram files (tests/hub/fixtures.py: config.json, the index
of all 48 shards, safetensors shards 47 and 48 with the layers' .engram.embed.weight and .scale)."""

import json
import os

import pytest
from ansible_collections.sparkfold.cluster.plugins.modules import engram_slim

from tests.hub import fixtures
from tests.unit.module_runner import module_runner

SHARDS = ["model-00047-of-00048.safetensors", "model-00048-of-00048.safetensors"]
EMBED = ["model.layers.1.engram.embed.scale", "model.layers.1.engram.embed.weight",
         "model.layers.14.engram.embed.scale", "model.layers.14.engram.embed.weight"]


@pytest.fixture
def run(monkeypatch):
    return module_runner(monkeypatch, engram_slim.main)


@pytest.fixture
def download(tmp_path):
    """The Engram download as the weights role leaves it (the recipe's engram.files of the original)."""
    src = tmp_path / "engram"
    src.mkdir()
    for name, data in fixtures._original_files().items():
        (src / name).write_bytes(data)
    return src


def _args(src, dest, check=False):
    return {"src": str(src), "dest": str(dest), "_ansible_check_mode": check, "_ansible_diff": True}


def test_the_download_names_absent_shards_and_the_slim_folder_does_not(run, download, tmp_path):
    raw = json.loads((download / "model.safetensors.index.json").read_text())
    absent = {shard for shard in raw["weight_map"].values() if not (download / shard).exists()}
    assert len(absent) == 46
    dest = tmp_path / "engram-src"
    kind, result, _diff = run(_args(download, dest, check=True))
    assert (kind, result["changed"], dest.exists()) == ("exit", True, False)
    kind, result, _diff = run(_args(download, dest))
    assert (kind, result["changed"], result["tensors"]) == ("exit", True, EMBED)
    assert result["files"] == {SHARDS[0]: "hardlink", SHARDS[1]: "hardlink",
                               "model.safetensors.index.json": "write", "config.json": "write"}
    assert sorted(os.listdir(dest)) == sorted([*SHARDS, "config.json", "model.safetensors.index.json"])
    for shard in SHARDS:
        assert os.stat(dest / shard).st_ino == os.stat(download / shard).st_ino
    slim = json.loads((dest / "model.safetensors.index.json").read_text())
    assert slim["metadata"] == {"total_size": raw["metadata"]["total_size"], "dsv41_engram_src": "embed-only"}
    assert sorted(slim["weight_map"]) == EMBED
    assert set(slim["weight_map"].values()) == set(SHARDS)
    assert (dest / "config.json").read_bytes() == (download / "config.json").read_bytes()
    kind, result, _diff = run(_args(download, dest))
    assert (kind, result["changed"], set(result["files"].values())) == ("exit", False, {"kept"})


def test_a_new_download_is_linked_again(run, download, tmp_path):
    dest = tmp_path / "engram-src"
    run(_args(download, dest))
    data = (download / SHARDS[1]).read_bytes()
    (download / SHARDS[1]).unlink()
    (download / SHARDS[1]).write_bytes(data)
    kind, result, _diff = run(_args(download, dest))
    assert (kind, result["changed"], result["files"][SHARDS[1]], result["files"][SHARDS[0]]) == (
        "exit", True, "hardlink", "kept")
    assert os.stat(dest / SHARDS[1]).st_ino == os.stat(download / SHARDS[1]).st_ino


@pytest.mark.parametrize("change, words", [
    (lambda src: (src / SHARDS[0]).unlink(), f"the Engram shard {{src}}/{SHARDS[0]} is missing"),
    (lambda src: (src / "model.safetensors.index.json").unlink(), "{src}/model.safetensors.index.json is missing"),
    (lambda src: (src / "model.safetensors.index.json").write_text('{"weight_map": {"a.weight": "' + SHARDS[0] + '"}}'),
     "names no tensor ending in .engram.embed.weight, .engram.embed.scale"),
    (lambda src: (src / "model.safetensors.index.json").write_text(
        '{"weight_map": {"model.layers.1.engram.embed.weight": "model-00046-of-00048.safetensors"}}'),
     "puts embed tables in model-00046-of-00048.safetensors"),
])
def test_an_incomplete_download_is_refused_before_anything_is_made(run, download, tmp_path, change, words):
    change(download)
    dest = tmp_path / "engram-src"
    kind, result, _diff = run(_args(download, dest))
    assert kind == "fail" and words.format(src=download) in result["msg"] and "Nothing was changed" in result["msg"]
    assert not dest.exists()


def test_dest_must_be_another_directory(run, download, tmp_path):
    kind, result, _diff = run(_args(download, download))
    assert kind == "fail" and "the slim folder must be another directory" in result["msg"]
    (tmp_path / "file").write_text("x")
    kind, result, _diff = run(_args(download, tmp_path / "file"))
    assert kind == "fail" and "is not a directory" in result["msg"]
