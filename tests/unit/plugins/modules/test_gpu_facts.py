# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for the sparkfold.cluster.gpu_facts module (AnsibleModule run in-process).

nvidia-smi is a small shell script written to tmp_path that prints a fixture: the query
output for the module's exact --query-gpu arguments, the plain table when called without
arguments. The module runs it as a real subprocess.
"""

import os
import platform
import shlex
import stat

import pytest
from ansible_collections.sparkfold.cluster.plugins.module_utils.gpu import QUERY_ARGS
from ansible_collections.sparkfold.cluster.plugins.modules import gpu_facts

from tests.unit.module_runner import module_runner

FAILED_DRIVER = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running."
)

H200 = {
    "index": 0,
    "name": "NVIDIA H200",
    "uuid": "GPU-c460002c-adcd-2680-9c2e-48f3c1995f67",
    "driver_version": "580.159.04",
    "compute_cap": "9.0",
    "memory_total_mib": 143771,
    "memory_used_mib": 0,
    "memory_free_mib": 143156,
    "clocks": {"sm_mhz": 510, "mem_mhz": 3201, "max_sm_mhz": 1980, "max_mem_mhz": 3201},
    "power": {"draw_w": 119.07, "limit_w": 700.0},
    "temperature_c": 34,
    "pstate": "P0",
    "pci_bus_id": "00000000:00:06.0",
    "unified_memory": False,
    "usable_memory_mib": 143771,
}

GB10 = {
    "index": 0,
    "name": "NVIDIA GB10",
    "uuid": "GPU-5e0a1d93-7c3b-4f0e-a1f6-2b9d8c4e7a10",
    "driver_version": "580.95.05",
    "compute_cap": "12.1",
    "memory_total_mib": None,
    "memory_used_mib": None,
    "memory_free_mib": None,
    "clocks": {"sm_mhz": 2405, "mem_mhz": None, "max_sm_mhz": 3003, "max_mem_mhz": None},
    "power": {"draw_w": 11.23, "limit_w": None},
    "temperature_c": 45,
    "pstate": "P0",
    "pci_bus_id": "0000000F:01:00.0",
    "unified_memory": True,
    # MemTotal 124563548 kB of gb10-meminfo.txt, in MiB
    "usable_memory_mib": 121644,
}


@pytest.fixture
def module_result(monkeypatch):
    """Run gpu_facts.main() with the given args; return (kind, result dict, warnings)."""
    return module_runner(monkeypatch, gpu_facts.main)


def _fixture(fixtures_dir, name):
    return os.path.join(fixtures_dir, "nvidia-smi", name)


def fake_nvidia_smi(directory, query_file=None, plain_file=None, fail_text=None, fail_rc=9):
    """Write an executable `nvidia-smi` into directory; return its path.

    With the module's exact query arguments it prints query_file, without arguments plain_file;
    any other arguments exit 64. With fail_text it prints that and exits fail_rc for every call,
    as nvidia-smi does when the driver is not loaded. Every call's arguments are appended to
    directory/calls.log.
    """
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "nvidia-smi"
    log = directory / "calls.log"
    lines = ["#!/bin/sh", f'echo "$*" >> {shlex.quote(str(log))}']
    if fail_text is not None:
        lines += [f"echo {shlex.quote(fail_text)}", f"exit {fail_rc}"]
    else:
        query = " ".join(QUERY_ARGS)
        lines += [
            f'if [ "$*" = {shlex.quote(query)} ]; then cat {shlex.quote(str(query_file))}; exit 0; fi',
            f'if [ "$#" -eq 0 ]; then cat {shlex.quote(str(plain_file))}; exit 0; fi',
            'echo "fake nvidia-smi: unexpected arguments: $*" >&2',
            "exit 64",
        ]
    path.write_text("\n".join(lines) + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def _calls(path):
    return (path.parent / "calls.log").read_text().splitlines()


def test_h200_discrete_gpu_keeps_its_own_memory(module_result, fixtures_dir, tmp_path):
    smi = fake_nvidia_smi(
        tmp_path / "bin",
        _fixture(fixtures_dir, "h200-query-gpu.csv"),
        _fixture(fixtures_dir, "h200-nvidia-smi.txt"),
    )
    kind, result, warnings = module_result(
        {"nvidia_smi": str(smi), "meminfo_path": _fixture(fixtures_dir, "h200-meminfo.txt")}
    )
    assert kind == "exit", result
    assert warnings == []
    assert result["changed"] is False
    assert result["ansible_facts"] == {
        "sparkfold_gpu": {
            "gpus": [H200],
            "count": 1,
            "cuda_version": "13.0",
            "driver_version": "580.159.04",
            "unified_memory": False,
            # MemTotal 131981020 kB, MemAvailable 131482080 kB
            "system_memory_total_mib": 128887,
            "system_memory_available_mib": 128400,
            "architecture": platform.machine(),
        }
    }
    # the exact query, then the plain table for the CUDA version
    assert _calls(smi) == [" ".join(QUERY_ARGS), ""]


def test_gb10_unified_memory_uses_system_memory(module_result, fixtures_dir, tmp_path):
    smi = fake_nvidia_smi(
        tmp_path / "bin",
        _fixture(fixtures_dir, "gb10-query-gpu.csv"),
        _fixture(fixtures_dir, "gb10-nvidia-smi.txt"),
    )
    kind, result, warnings = module_result(
        {"nvidia_smi": str(smi), "meminfo_path": _fixture(fixtures_dir, "gb10-meminfo.txt")}
    )
    assert kind == "exit", result
    assert warnings == []
    assert result["changed"] is False
    assert result["ansible_facts"] == {
        "sparkfold_gpu": {
            "gpus": [GB10],
            "count": 1,
            "cuda_version": "13.0",
            "driver_version": "580.95.05",
            "unified_memory": True,
            # MemTotal 124563548 kB, MemAvailable 118926340 kB
            "system_memory_total_mib": 121644,
            "system_memory_available_mib": 116139,
            "architecture": platform.machine(),
        }
    }


def test_gb10_not_supported_spelling(module_result, fixtures_dir, tmp_path):
    """Some drivers and tools spell the missing memory fields [Not Supported]; same facts."""
    with open(_fixture(fixtures_dir, "gb10-query-gpu.csv"), encoding="utf-8") as handle:
        text = handle.read()
    query = tmp_path / "gb10-not-supported.csv"
    query.write_text(text.replace("[N/A], [N/A], [N/A], 2405", ", ".join(["[Not Supported]"] * 3) + ", 2405"))
    assert "[Not Supported]" in query.read_text()
    smi = fake_nvidia_smi(tmp_path / "bin", query, _fixture(fixtures_dir, "gb10-nvidia-smi.txt"))
    kind, result, _warnings = module_result(
        {"nvidia_smi": str(smi), "meminfo_path": _fixture(fixtures_dir, "gb10-meminfo.txt")}
    )
    assert kind == "exit", result
    assert result["ansible_facts"]["sparkfold_gpu"]["gpus"] == [GB10]


def test_check_mode_returns_same_facts(module_result, fixtures_dir, tmp_path):
    smi = fake_nvidia_smi(
        tmp_path / "bin",
        _fixture(fixtures_dir, "gb10-query-gpu.csv"),
        _fixture(fixtures_dir, "gb10-nvidia-smi.txt"),
    )
    kind, result, _warnings = module_result(
        {
            "nvidia_smi": str(smi),
            "meminfo_path": _fixture(fixtures_dir, "gb10-meminfo.txt"),
            "_ansible_check_mode": True,
        }
    )
    assert kind == "exit", result
    assert result["changed"] is False
    assert result["ansible_facts"]["sparkfold_gpu"]["gpus"] == [GB10]


def test_nvidia_smi_found_on_path(module_result, fixtures_dir, tmp_path, monkeypatch):
    smi = fake_nvidia_smi(
        tmp_path / "bin",
        _fixture(fixtures_dir, "h200-query-gpu.csv"),
        _fixture(fixtures_dir, "h200-nvidia-smi.txt"),
    )
    monkeypatch.setenv("PATH", f"{smi.parent}{os.pathsep}/usr/bin{os.pathsep}/bin")
    kind, result, _warnings = module_result({"meminfo_path": _fixture(fixtures_dir, "h200-meminfo.txt")})
    assert kind == "exit", result
    assert result["ansible_facts"]["sparkfold_gpu"]["gpus"] == [H200]
    assert _calls(smi) == [" ".join(QUERY_ARGS), ""]


def test_missing_nvidia_smi_fails_clearly(module_result, tmp_path, monkeypatch):
    if any(os.path.exists(os.path.join(d, "nvidia-smi")) for d in ("/sbin", "/usr/sbin", "/usr/local/sbin")):
        pytest.skip("this machine has nvidia-smi in an sbin directory, which get_bin_path always searches")
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    kind, result, _warnings = module_result({})
    assert kind == "fail"
    assert result["msg"] == (
        "nvidia-smi not found: it is not on PATH; install the NVIDIA driver (DGX OS ships it) "
        "or set nvidia_smi to its path"
    )


def test_nvidia_smi_option_pointing_nowhere(module_result, tmp_path):
    missing = tmp_path / "no" / "nvidia-smi"
    kind, result, _warnings = module_result({"nvidia_smi": str(missing)})
    assert kind == "fail"
    assert result["msg"] == (
        f"nvidia-smi not found at {missing} (option nvidia_smi); install the NVIDIA driver (DGX OS ships it) "
        "or set nvidia_smi to its path"
    )


def test_nvidia_smi_not_executable(module_result, tmp_path):
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\n")
    smi.chmod(0o644)
    kind, result, _warnings = module_result({"nvidia_smi": str(smi)})
    assert kind == "fail"
    assert result["msg"].startswith(f"nvidia-smi at {smi} is not executable; ")


def test_driver_not_loaded_fails_with_its_message_and_what_to_do(module_result, fixtures_dir, tmp_path):
    smi = fake_nvidia_smi(tmp_path / "bin", fail_text=FAILED_DRIVER, fail_rc=9)
    kind, result, _warnings = module_result(
        {"nvidia_smi": str(smi), "meminfo_path": _fixture(fixtures_dir, "gb10-meminfo.txt")}
    )
    assert kind == "fail"
    assert result["rc"] == 9
    assert result["msg"] == (
        f"{smi} {' '.join(QUERY_ARGS)} failed (rc 9): {FAILED_DRIVER}; the NVIDIA kernel driver is not loaded: "
        "check `lsmod | grep nvidia` and `dmesg | grep -i nvrm`; reboot after a driver update, else reinstall "
        "the driver (DGX OS: the nvidia-driver-580 packages)"
    )


def test_driver_library_mismatch_says_reboot(module_result, tmp_path):
    text = "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.95"
    smi = fake_nvidia_smi(tmp_path / "bin", fail_text=text, fail_rc=18)
    kind, result, _warnings = module_result({"nvidia_smi": str(smi)})
    assert kind == "fail"
    assert result["msg"].endswith(
        "failed (rc 18): Failed to initialize NVML: Driver/library version mismatch NVML library version: 580.95; "
        "the loaded kernel module and the driver libraries differ, usually after a driver update: reboot the node"
    )


def test_no_devices_is_not_an_error(module_result, fixtures_dir, tmp_path):
    smi = fake_nvidia_smi(tmp_path / "bin", fail_text="No devices were found", fail_rc=6)
    kind, result, warnings = module_result(
        {"nvidia_smi": str(smi), "meminfo_path": _fixture(fixtures_dir, "h200-meminfo.txt")}
    )
    assert kind == "exit", result
    assert warnings == [f"{smi}: No devices were found; the driver sees no GPU"]
    assert result["ansible_facts"] == {
        "sparkfold_gpu": {
            "gpus": [],
            "count": 0,
            "cuda_version": None,
            "driver_version": None,
            "unified_memory": False,
            "system_memory_total_mib": 128887,
            "system_memory_available_mib": 128400,
            "architecture": platform.machine(),
        }
    }


def test_unreadable_meminfo_fails(module_result, fixtures_dir, tmp_path):
    smi = fake_nvidia_smi(
        tmp_path / "bin",
        _fixture(fixtures_dir, "h200-query-gpu.csv"),
        _fixture(fixtures_dir, "h200-nvidia-smi.txt"),
    )
    missing = tmp_path / "meminfo"
    kind, result, _warnings = module_result({"nvidia_smi": str(smi), "meminfo_path": str(missing)})
    assert kind == "fail"
    assert result["msg"].startswith(f"cannot read {missing}: ")


def test_garbled_query_output_fails_naming_the_field(module_result, fixtures_dir, tmp_path):
    query = tmp_path / "garbled.csv"
    query.write_text(
        "0, NVIDIA H200, GPU-c460002c-adcd-2680-9c2e-48f3c1995f67, 580.159.04, 9.0, lots, 0, 143156, "
        "510, 3201, 1980, 3201, 119.07, 700.00, 34, P0, 00000000:00:06.0\n"
    )
    smi = fake_nvidia_smi(tmp_path / "bin", query, _fixture(fixtures_dir, "h200-nvidia-smi.txt"))
    kind, result, _warnings = module_result(
        {"nvidia_smi": str(smi), "meminfo_path": _fixture(fixtures_dir, "h200-meminfo.txt")}
    )
    assert kind == "fail"
    assert result["msg"].startswith(
        "nvidia-smi --query-gpu field memory.total: expected a whole number, got 'lots' (line "
    )


def _executable(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


NVCC_13 = """#!/bin/sh
[ "$1" = --version ] || exit 64
echo 'nvcc: NVIDIA (R) Cuda compiler driver'
echo 'Copyright (c) 2005-2025 NVIDIA Corporation'
echo 'Built on Wed_Aug_20_01:57:39_PM_PDT_2025'
echo 'Cuda compilation tools, release 13.0, V13.0.88'
echo 'Build cuda_13.0.r13.0/compiler.36424714_0'
"""


def _gb10(fixtures_dir, tmp_path, **extra):
    smi = fake_nvidia_smi(tmp_path / "bin", _fixture(fixtures_dir, "gb10-query-gpu.csv"),
                          _fixture(fixtures_dir, "gb10-nvidia-smi.txt"))
    return {"nvidia_smi": str(smi), "meminfo_path": _fixture(fixtures_dir, "gb10-meminfo.txt"), **extra}


def test_nvcc_release_is_reported_as_data(module_result, fixtures_dir, tmp_path):
    nvcc = _executable(tmp_path / "cuda" / "nvcc", NVCC_13)
    kind, result, _warnings = module_result(_gb10(fixtures_dir, tmp_path, nvcc=str(nvcc)))
    assert kind == "exit", result
    assert result["ansible_facts"]["sparkfold_gpu"]["nvcc"] == {
        "path": str(nvcc), "found": True, "rc": 0, "release": "13.0", "major": 13, "message": None}
    assert result["changed"] is False


@pytest.mark.parametrize(("script", "expected"), [
    (None, {"found": False, "rc": None, "release": None, "major": None}),
    ("#!/bin/sh\necho 'libcudart.so.13: cannot open shared object file' >&2\nexit 127\n",
     {"found": True, "rc": 127, "release": None, "major": None,
      "message": "libcudart.so.13: cannot open shared object file"}),
    ("#!/bin/sh\necho 'Cuda compilation tools'\necho 'garbled'\n",
     {"found": True, "rc": 0, "release": None, "major": None, "message": "garbled"}),
    ("#!/bin/sh\necho 'Cuda compilation tools, release 12.4, V12.4.131'\n",
     {"found": True, "rc": 0, "release": "12.4", "major": 12, "message": None}),
])
def test_a_missing_failing_or_other_nvcc_is_data_not_a_failure(module_result, fixtures_dir, tmp_path, script,
                                                               expected):
    nvcc = tmp_path / "cuda" / "nvcc"
    if script is not None:
        _executable(nvcc, script)
    kind, result, _warnings = module_result(_gb10(fixtures_dir, tmp_path, nvcc=str(nvcc)))
    assert kind == "exit", result
    found = result["ansible_facts"]["sparkfold_gpu"]["nvcc"]
    assert {key: found[key] for key in expected} == expected
    if script is None:
        assert found["message"] == f"no executable file at {nvcc}"


def _dpkg_query(directory, answer, rc=0, err=""):
    """A dpkg-query on PATH that prints ``answer`` for the module's exact arguments."""
    return _executable(directory / "dpkg-query", "#!/bin/sh\n"
                       "[ \"$1 $2 $3\" = '-W -f ${db:Status-Status} ${Version}' ] || exit 64\n"
                       f"printf '%s' {shlex.quote(answer)}\n"
                       f"[ -z {shlex.quote(err)} ] || echo {shlex.quote(err)} >&2\nexit {rc}\n")


@pytest.mark.parametrize(("answer", "rc", "err", "expected"), [
    ("installed 2.29.3-1+cuda13.0", 0, "", {"version": "2.29.3-1+cuda13.0", "upstream_version": "2.29.3",
                                            "message": None}),
    ("installed 1:2.28.9-1+cuda13.0", 0, "", {"version": "1:2.28.9-1+cuda13.0", "upstream_version": "2.28.9",
                                              "message": None}),
    ("config-files 2.29.3-1+cuda13.0", 0, "", {"version": None, "upstream_version": None,
                                               "message": "libnccl2 is config-files"}),
    ("", 1, "dpkg-query: no packages found matching libnccl2", {
        "version": None, "upstream_version": None, "message": "dpkg-query: no packages found matching libnccl2"}),
])
def test_the_nccl_package_version_is_reported_as_data(module_result, fixtures_dir, tmp_path, monkeypatch, answer,
                                                      rc, err, expected):
    _dpkg_query(tmp_path / "dpkg", answer, rc, err)
    monkeypatch.setenv("PATH", f"{tmp_path / 'dpkg'}:{os.environ['PATH']}")
    kind, result, _warnings = module_result(_gb10(fixtures_dir, tmp_path, nccl_package="libnccl2"))
    assert kind == "exit", result
    assert result["ansible_facts"]["sparkfold_gpu"]["nccl"] == {"package": "libnccl2", **expected}


def test_nvcc_and_nccl_are_left_out_unless_asked(module_result, fixtures_dir, tmp_path):
    kind, result, _warnings = module_result(_gb10(fixtures_dir, tmp_path))
    assert kind == "exit", result
    assert "nvcc" not in result["ansible_facts"]["sparkfold_gpu"]
    assert "nccl" not in result["ansible_facts"]["sparkfold_gpu"]
