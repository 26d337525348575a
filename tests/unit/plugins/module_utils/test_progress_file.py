# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one progress-file writer (module_utils/progress_file.py) of engine_bench and hub_snapshot."""

from __future__ import annotations

import json
import os

from ansible_collections.sparkfold.cluster.plugins.module_utils.progress_file import (
    ProgressFile,
    SnapshotProgress,
    StepProgress,
)


def test_step_progress_file(tmp_path):
    path = tmp_path / "progress.json"
    progress = StepProgress(str(path), 3)
    assert json.loads(path.read_text())["phase"] == "starting"
    progress.step("decode", "prose run 1/3")
    progress.finished("decode prose run 1: 80 tok/s")
    data = json.loads(path.read_text())
    assert data["phase"] == "decode" and data["step"] == "prose run 1/3"
    assert data["done"] == 1 and data["total"] == 3 and data["last"].startswith("decode prose")
    assert data["pid"] == os.getpid()  # for job_watch's "kill <pid>" when the watch times out
    assert [p.name for p in tmp_path.iterdir()] == ["progress.json"]  # no temporary file left
    StepProgress(None, 1).finished("nothing written")


def test_snapshot_progress_writes_at_most_every_interval_unless_forced(tmp_path):
    path = tmp_path / "progress.json"
    progress = SnapshotProgress(str(path), "c" * 40, files_total=2, bytes_total=10, interval=3600)
    progress.update(force=True, phase="downloading")
    progress.add("bytes_done", 4)  # within the interval: not written
    assert json.loads(path.read_text())["bytes_done"] == 0
    progress.start("a.safetensors")
    progress.finish("a.safetensors")  # a finished file is always written
    data = json.loads(path.read_text())
    assert data["bytes_done"] == 4 and data["files_done"] == 1 and data["current"] == []
    assert data["pid"] == os.getpid() and data["commit"] == "c" * 40 and data["phase"] == "downloading"


def test_a_failed_write_is_remembered_and_does_not_stop_the_run(tmp_path):
    progress = ProgressFile(str(tmp_path / "missing-dir" / "progress.json"), {"phase": "x"})
    progress.update(force=True, phase="y")
    assert progress.failed_write.startswith(f"could not write progress_file {tmp_path}/missing-dir/progress.json")
    assert progress.state["phase"] == "y"
