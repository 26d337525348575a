# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for the sparkfold.cluster.containerfile_pin module (AnsibleModule run in-process).

The Containerfiles are shaped as the recipes' published ones are (issue 25 A3): ashhart/TensorFold
deploy/dsv41-tp2/Dockerfile @751ba641668aa5ccfb4fb49c291129043d5d0d20 writes `FROM nvcr.io/nvidia/pytorch:26.07-py3`
and declares only `ARG TF_REVISION` after it; MiaAI-Lab/DeepSeek-v4.1-Flash-DGX-Sparks Dockerfile
@1ce7beed1b0cf9b0a9a87c7c12ad71dab994651b writes `FROM lmsysorg/sglang:dev-dsv41` after two comment lines. Neither
declares `ARG BASE`, so `--build-arg BASE=...@digest` pinned nothing.
"""

import os
import stat

import pytest
from ansible_collections.sparkfold.cluster.plugins.modules import containerfile_pin

from tests.unit.module_runner import module_runner

TORCH = "nvcr.io/nvidia/pytorch:26.07-py3"
TORCH_DIGEST = "sha256:2140e699b3beaf7f96a0081fd9c9406bc3832b435cdb60dfa2d261f7d2f34a1c"
SGLANG = "lmsysorg/sglang:dev-dsv41"
SGLANG_DIGEST = "sha256:3dbc313030a6ef2c5d7de8ecf48e9aece722694a82182cb618cc82b588816349"

TFPY = f"""# the serving image: the NGC base, the dependencies, the source snapshot
FROM {TORCH}

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1
RUN python -c "import torch" \\
 && pip install --no-cache-dir "tokenizers==0.23.1"
COPY tensorfold /opt/tensorfold
ARG TF_REVISION=unknown
LABEL org.opencontainers.image.revision="${{TF_REVISION}}"
"""

SGLANG_FILE = f"""# Arm64 sibling of another pin
# (a digest of the other architecture named in a comment).
FROM {SGLANG}
WORKDIR /opt/dsv41
COPY boot.py /opt/dsv41/boot.py
ENTRYPOINT ["python3", "-u", "/opt/dsv41/boot.py"]
CMD ["run"]
"""


@pytest.fixture
def run(monkeypatch):
    return module_runner(monkeypatch, containerfile_pin.main)


def _file(tmp_path, text, mode=0o644):
    path = tmp_path / "Dockerfile"
    path.write_text(text)
    os.chmod(path, mode)
    return path


def _args(path, base, digest, check=False):
    return {"path": str(path), "base": base, "digest": digest, "_ansible_check_mode": check, "_ansible_diff": True}


@pytest.mark.parametrize("text, base, digest, repo", [
    (TFPY, TORCH, TORCH_DIGEST, "nvcr.io/nvidia/pytorch"),
    (SGLANG_FILE, SGLANG, SGLANG_DIGEST, "lmsysorg/sglang"),
])
def test_the_published_dockerfiles_build_on_the_digest_after_the_pin(run, tmp_path, text, base, digest, repo):
    path = _file(tmp_path, text, 0o640)
    # what the build-arg left: the FROM line names the moving tag
    assert f"FROM {base}\n" in path.read_text() and "ARG BASE" not in path.read_text()
    kind, result, _diff = run(_args(path, base, digest, check=True))
    assert (kind, result["changed"], path.read_text()) == ("exit", True, text)
    assert f"FROM {repo}@{digest}\n" in result["diff"]["after"]
    kind, result, _diff = run(_args(path, base, digest))
    assert (kind, result["changed"], result["pinned"], result["from"]) == (
        "exit", True, f"{repo}@{digest}", [f"{repo}@{digest}"])
    after = path.read_text()
    assert after == text.replace(f"FROM {base}\n", f"FROM {repo}@{digest}\n")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    kind, result, _diff = run(_args(path, base, digest))
    assert (kind, result["changed"], path.read_text()) == ("exit", False, after)


def test_a_global_arg_default_is_followed_and_the_from_line_written_literally(run, tmp_path):
    path = _file(tmp_path, f"ARG BASE={TORCH}\nFROM --platform=linux/arm64 ${{BASE}} AS build\nFROM build\nRUN true\n")
    kind, result, _diff = run(_args(path, TORCH, TORCH_DIGEST))
    assert kind == "exit" and result["changed"]
    assert path.read_text() == (f"ARG BASE={TORCH}\nFROM --platform=linux/arm64 nvcr.io/nvidia/pytorch@{TORCH_DIGEST}"
                                " AS build\nFROM build\nRUN true\n")


def test_a_from_continued_over_lines_becomes_one_line(run, tmp_path):
    path = _file(tmp_path, f"FROM \\\n  {SGLANG}\nRUN true\n")
    kind, _result, _diff = run(_args(path, SGLANG, SGLANG_DIGEST))
    assert kind == "exit" and path.read_text() == f"FROM lmsysorg/sglang@{SGLANG_DIGEST}\nRUN true\n"


def test_a_registry_port_is_not_taken_for_a_tag(run, tmp_path):
    path = _file(tmp_path, "FROM registry.local:5000/team/base:1.2\n")
    kind, result, _diff = run(_args(path, "registry.local:5000/team/base:1.2", TORCH_DIGEST))
    assert kind == "exit" and result["pinned"] == f"registry.local:5000/team/base@{TORCH_DIGEST}"


@pytest.mark.parametrize("text, base, words", [
    (TFPY, SGLANG, f"no FROM names {SGLANG} (it builds on {TORCH})"),
    (f"FROM {TORCH}\nFROM ubuntu:24.04\nCOPY --from=0 /a /a\n", TORCH,
     "line 2: FROM ubuntu:24.04 is another outside image and no digest pins it"),
    ("FROM scratch\nCOPY a /a\n", TORCH, f"no FROM names {TORCH} (it builds on only scratch or earlier stages)"),
    ("# escape=`\nFROM scratch\n", TORCH, "its escape directive is '`'"),
])
def test_a_containerfile_that_does_not_build_on_the_base_is_refused_unchanged(run, tmp_path, text, base, words):
    path = _file(tmp_path, text)
    kind, result, _diff = run(_args(path, base, TORCH_DIGEST))
    assert kind == "fail" and words in result["msg"] and "Nothing was changed" in result["msg"]
    assert path.read_text() == text


@pytest.mark.parametrize("base, digest, words", [
    (TORCH, "sha256:abc", "digest must be sha256: and 64 hex digits"),
    (f"{TORCH}@{TORCH_DIGEST}", TORCH_DIGEST, "base must be the image as FROM names it"),
])
def test_bad_arguments_are_named(run, tmp_path, base, digest, words):
    kind, result, _diff = run(_args(_file(tmp_path, TFPY), base, digest))
    assert kind == "fail" and words in result["msg"]


def test_a_missing_containerfile_is_named(run, tmp_path):
    kind, result, _diff = run(_args(tmp_path / "Dockerfile", TORCH, TORCH_DIGEST))
    assert kind == "fail" and "cannot read the Containerfile" in result["msg"]
