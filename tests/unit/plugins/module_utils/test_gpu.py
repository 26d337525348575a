# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for sparkfold.cluster module_utils.gpu against recorded and reconstructed nvidia-smi output."""

import os

import pytest
from ansible_collections.sparkfold.cluster.plugins.module_utils import gpu


def _read(fixtures_dir, name):
    with open(os.path.join(fixtures_dir, "nvidia-smi", name), encoding="utf-8") as handle:
        return handle.read()


@pytest.mark.parametrize(
    "value, expected",
    [
        ("[N/A]", True),
        ("[Not Supported]", True),
        ("N/A", True),
        ("Not Supported", True),
        ("[Unknown Error]", True),
        ("", True),
        (None, True),
        ("0", False),
        ("P0", False),
    ],
)
def test_is_unavailable(value, expected):
    assert gpu.is_unavailable(value) is expected


def test_numbers_with_and_without_units():
    assert gpu.to_int("143771") == 143771
    assert gpu.to_int("143771 MiB") == 143771
    assert gpu.to_int("[N/A]") is None
    assert gpu.to_float("117.32 W") == 117.32
    assert gpu.to_float("700.00") == 700.0
    assert gpu.to_float("[N/A]") is None
    with pytest.raises(gpu.GpuParseError, match="expected a whole number, got 'lots'"):
        gpu.to_int("lots")


def test_header_and_units_capture_parses_like_the_plain_one(fixtures_dir):
    """The recorded --format=csv capture (header, units) gives the same GPU, bar the live power draw."""
    plain = gpu.parse_query_gpu(_read(fixtures_dir, "h200-query-gpu.csv"))
    header = gpu.parse_query_gpu(_read(fixtures_dir, "h200-query-gpu-header.csv"))
    assert len(plain) == len(header) == 1
    assert plain[0]["power"]["draw_w"] == 119.07
    assert header[0]["power"]["draw_w"] == 117.32
    for row in (plain[0], header[0]):
        row["power"]["draw_w"] = None
    assert header == plain


def test_header_names_the_queried_fields(fixtures_dir):
    """The recorded header lists the fields in QUERY_FIELDS order (clocks.sm is clocks.current.sm)."""
    header = _read(fixtures_dir, "h200-query-gpu-header.csv").splitlines()[0]
    names = [name.split(" [")[0] for name in header.split(", ")]
    aliases = {
        "clocks.sm": "clocks.current.sm",
        "clocks.mem": "clocks.current.memory",
        "clocks.max.mem": "clocks.max.memory",
    }
    assert names == [aliases.get(field, field) for field in gpu.QUERY_FIELDS]


def test_two_gpus_one_discrete_one_unified(fixtures_dir):
    query = _read(fixtures_dir, "h200-query-gpu.csv") + _read(fixtures_dir, "gb10-query-gpu.csv").replace(
        "0, NVIDIA GB10", "1, NVIDIA GB10"
    )
    facts = gpu.gpu_facts(query, _read(fixtures_dir, "h200-nvidia-smi.txt"), _read(fixtures_dir, "gb10-meminfo.txt"))
    assert facts["count"] == 2
    assert [(g["index"], g["unified_memory"], g["usable_memory_mib"]) for g in facts["gpus"]] == [
        (0, False, 143771),
        (1, True, 121644),
    ]
    assert facts["unified_memory"] is True
    assert facts["driver_version"] == "580.159.04"


def test_cuda_and_driver_version_from_the_plain_table(fixtures_dir):
    h200 = _read(fixtures_dir, "h200-nvidia-smi.txt")
    gb10 = _read(fixtures_dir, "gb10-nvidia-smi.txt")
    assert gpu.parse_cuda_version(h200) == "13.0"
    assert gpu.parse_driver_version(h200) == "580.159.04"
    assert gpu.parse_cuda_version(gb10) == "13.0"
    assert gpu.parse_driver_version(gb10) == "580.95.05"
    assert gpu.parse_cuda_version("NVIDIA-SMI 470.256.02   Driver Version: 470.256.02") is None


def test_no_devices():
    assert gpu.parse_query_gpu("No devices were found\n") == []


def test_wrong_field_count_names_the_fields():
    with pytest.raises(gpu.GpuParseError, match=r"printed 3 fields where 17 were expected \(index, name, uuid"):
        gpu.parse_query_gpu("0, NVIDIA GB10, [N/A]\n")


def test_meminfo(fixtures_dir):
    values = gpu.parse_meminfo(_read(fixtures_dir, "gb10-meminfo.txt"))
    assert values["MemTotal"] == 124563548
    assert values["MemAvailable"] == 118926340
    assert values["HugePages_Total"] == 0
    assert values["Active(file)"] == 643704


def test_meminfo_without_memtotal_fails():
    with pytest.raises(gpu.GpuParseError, match="no MemTotal line"):
        gpu.gpu_facts("", "", "MemFree: 1 kB\n")


def test_meminfo_without_memavailable():
    facts = gpu.gpu_facts("", "", "MemTotal: 2048 kB\n")
    assert facts["system_memory_total_mib"] == 2
    assert facts["system_memory_available_mib"] is None
    assert facts["gpus"] == []


@pytest.mark.parametrize(("text", "expected"), [
    ("Cuda compilation tools, release 13.0, V13.0.88\nBuild cuda_13.0.r13.0/compiler.36424714_0\n", ("13.0", 13)),
    ("Cuda compilation tools, release 12.4, V12.4.131", ("12.4", 12)),
    ("nvcc: NVIDIA (R) Cuda compiler driver\n", (None, None)),
])
def test_nvcc_release(text, expected):
    assert gpu.parse_nvcc_release(text) == expected


@pytest.mark.parametrize(("version", "expected"), [
    ("2.29.3-1+cuda13.0", "2.29.3"),
    ("1:2.28.9-1+cuda13.0", "2.28.9"),
    ("2.29.3", "2.29.3"),
    ("1.2-rc1-3", "1.2-rc1"),
    ("", None),
])
def test_debian_upstream_version(version, expected):
    assert gpu.debian_upstream_version(version) == expected
