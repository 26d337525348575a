# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""sparkfold.cluster.cuda: deb_packages, file and template declare the RDMA user space and the CUDA environment;
gpu_facts gives nvcc's release and NCCL's version as data, judged once.

Runs the role's tasks against this machine: the environment file under the test's directory; as the RDMA packages
and the NCCL package, one this machine has, where deb_packages is to be seen finding it
installed (elsewhere none); on the GPU path a stand-in nvidia-smi (the GB10 fixture) and a stand-in nvcc. No lab.
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import subprocess
import sys

from tests.unit.playbook import changed_count, run_playbook, task_result

PLAY = """
- name: cuda on this machine
  hosts: node
  gather_facts: false
  roles:
    - role: sparkfold.cluster.cuda
"""

ENV = "Write the CUDA environment for the engine units"
RDMA = "Install the RDMA user space (rdma-core, libibverbs)"
NCCL = "Install NCCL from NVIDIA's repository"
NVCC_13 = "Cuda compilation tools, release 13.0, V13.0.88"


def _run(tmp_path, extra=None, args=()):
    (tmp_path / "inventory.yml").write_text(
        "all:\n  hosts:\n    node:\n      ansible_connection: local\n"
        f"      ansible_python_interpreter: {sys.executable}\n")
    (tmp_path / "play.yml").write_text(PLAY)
    given = {"cuda_lab": True, "cuda_env_file": str(tmp_path / "etc" / "cuda.env"), "cuda_rdma_packages": []}
    return run_playbook(tmp_path / "play.yml", tmp_path / "inventory.yml", tmp_path,
                        ["-e", json.dumps({**given, **(extra or {})}), *args])


_task = functools.partial(task_result, role="cuda")
_changed = changed_count


def test_the_environment_is_written_then_left_alone_and_a_drift_repaired(tmp_path):
    env = tmp_path / "etc" / "cuda.env"
    proc = _run(tmp_path, args=["--check", "--diff"])
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert _task(proc.stdout, ENV) == "changed" and "+CUDA_HOME=/usr/local/cuda" in proc.stdout
    assert not env.exists()
    proc = _run(tmp_path)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert _task(proc.stdout, ENV) == "changed"
    assert "PATH=/usr/local/cuda/bin:/usr/local/sbin:" in env.read_text()
    assert env.stat().st_mode & 0o777 == 0o644
    # converged: apt finds the package installed, file and template find what they would write
    for args in ((), ("--check", "--diff")):
        proc = _run(tmp_path, {"cuda_rdma_packages": ["bash"]}, args)
        assert proc.returncode == 0, proc.stdout[-4000:]
        assert _task(proc.stdout, RDMA) == "ok" and _task(proc.stdout, ENV) == "ok", proc.stdout[-3000:]
        assert _changed(proc) == 0
    # a drift: another content and mode, then a new variable of the inventory
    env.write_text("CUDA_HOME=/opt/other\n")
    env.chmod(0o600)
    proc = _run(tmp_path, args=["--check", "--diff"])
    assert _task(proc.stdout, ENV) == "changed" and "-CUDA_HOME=/opt/other" in proc.stdout
    assert env.read_text() == "CUDA_HOME=/opt/other\n"
    proc = _run(tmp_path)
    assert _task(proc.stdout, ENV) == "changed" and _changed(proc) == 1
    assert "CUDA_HOME=/usr/local/cuda\n" in env.read_text() and env.stat().st_mode & 0o777 == 0o644


def _tool(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return str(path)


def _gpu_host(tmp_path, fixtures_dir, nvcc_says=NVCC_13, **extra):
    """Variables of a host with a GB10 (the stand-in nvidia-smi) and an nvcc that prints ``nvcc_says``."""
    query = os.path.join(fixtures_dir, "nvidia-smi", "gb10-query-gpu.csv")
    table = os.path.join(fixtures_dir, "nvidia-smi", "gb10-nvidia-smi.txt")
    smi = _tool(tmp_path / "bin" / "nvidia-smi",
                f'#!/bin/sh\ncase "$1" in --query-gpu=*) cat {shlex.quote(query)};; "") cat {shlex.quote(table)};;'
                ' *) exit 64;; esac\n')
    nvcc = tmp_path / "cuda" / "bin" / "nvcc"
    nvcc.unlink(missing_ok=True)
    if nvcc_says is not None:
        _tool(nvcc, f"#!/bin/sh\n[ \"$1\" = --version ] && echo {shlex.quote(nvcc_says)}\n")
    return {"cuda_lab": False, "cuda_nvidia_smi": smi, "cuda_nvcc": str(nvcc), "cuda_home": str(tmp_path / "cuda"),
            "cuda_nccl_package": "bash", "cuda_install": "auto", **extra}


def test_a_gpu_host_is_checked_from_data_and_a_converged_one_changes_nothing(tmp_path, fixtures_dir):
    given = _gpu_host(tmp_path, fixtures_dir)
    bash = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "bash"], capture_output=True, text=True,
                          check=True).stdout
    proc = _run(tmp_path, {**given, "cuda_install": "never"})
    assert proc.returncode == 0, proc.stdout[-4000:]
    for args in ((), ("--check", "--diff")):
        proc = _run(tmp_path, given, args)
        assert proc.returncode == 0, proc.stdout[-4000:]
        # nvcc was found: no toolkit install; NCCL's package is installed: apt changes nothing
        assert _task(proc.stdout, "Install the CUDA toolkit") == "skipping", proc.stdout[-3000:]
        assert _task(proc.stdout, NCCL) == "ok", proc.stdout[-3000:]
        assert _task(proc.stdout, "Read nvcc's release and NCCL's version again after an install") == "skipping"
        assert _changed(proc) == 0
        upstream = bash.split(":")[-1].rsplit("-", 1)[0]
        assert f"driver 580.95.05 (CUDA 13.0), nvcc 13.0, NCCL {upstream} on " in proc.stdout, proc.stdout[-3000:]


def test_every_toolchain_problem_is_named_once(tmp_path, fixtures_dir):
    proc = _run(tmp_path, _gpu_host(tmp_path, fixtures_dir, nvcc_says="Cuda compilation tools, release 12.4, V12.4.131",
                                    cuda_nccl_package="sparkfold-no-such-nccl", cuda_install="never"))
    assert proc.returncode != 0
    assert f"nvcc at {tmp_path}/cuda/bin/nvcc is CUDA 12.4, expected 13.x" in proc.stdout, proc.stdout[-3000:]
    assert ("NCCL is not installed (sparkfold-no-such-nccl: dpkg-query: no packages found matching "
            "sparkfold-no-such-nccl)") in proc.stdout
    proc = _run(tmp_path, _gpu_host(tmp_path, fixtures_dir, nvcc_says=None, cuda_install="never"))
    assert f"nvcc not found at {tmp_path}/cuda/bin/nvcc; CUDA 13 is preinstalled on DGX OS" in proc.stdout
    assert "NCCL is not installed" not in proc.stdout
    proc = _run(tmp_path, _gpu_host(tmp_path, fixtures_dir, nvcc_says="Cuda compilation tools"))
    assert f"cannot read the CUDA release from {tmp_path}/cuda/bin/nvcc --version: Cuda compilation tools" \
        in proc.stdout, proc.stdout[-3000:]


def test_a_failing_nvidia_smi_stops_before_anything_is_installed(tmp_path, fixtures_dir):
    given = _gpu_host(tmp_path, fixtures_dir, nvcc_says=None, cuda_install="always")
    _tool(tmp_path / "bin" / "nvidia-smi", "#!/bin/sh\necho \"NVIDIA-SMI has failed because it couldn't communicate"
          " with the NVIDIA driver.\"\nexit 9\n")
    proc = _run(tmp_path, given)
    assert proc.returncode != 0
    assert "nvidia-smi: 1 problem(s) on node:" in proc.stdout, proc.stdout[-3000:]
    assert "the NVIDIA kernel driver is not loaded" in proc.stdout
    assert _task(proc.stdout, "Add NVIDIA's CUDA repository (cuda-keyring)") == "left out"
