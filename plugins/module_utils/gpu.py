# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Parse what ``nvidia-smi`` and ``/proc/meminfo`` say about a node's GPUs.

Pure functions over text, so unit tests can feed them recorded output.

``nvidia-smi --query-gpu=<QUERY_FIELDS> --format=csv,noheader,nounits`` prints one
line per GPU, fields separated by ``", "``.  A field the GPU cannot report reads
``[N/A]`` or ``[Not Supported]`` (older drivers print them without brackets).

On a DGX Spark (GB10) the GPU has no memory of its own: CPU and GPU share one pool
of LPDDR5X, and ``memory.total``, ``memory.used`` and ``memory.free`` read
``[N/A]``.  Such a GPU is reported with ``unified_memory: true``, its ``memory_*``
fields null, and ``usable_memory_mib`` taken from ``MemTotal`` of
``/proc/meminfo``.  A discrete GPU keeps its own numbers.

The CUDA version the driver supports appears only in the header of plain
``nvidia-smi`` output (``CUDA Version: 13.0``).

The installed toolkit's release is what ``nvcc --version`` prints on its
``Cuda compilation tools, release 13.0, V13.0.88`` line (the same line NVIDIA/apex
setup.py reads, get_cuda_bare_metal_version @8b7a1ff183741dd8f9b87e7bafd04cfde99cea28).
A Debian package version is ``[epoch:]upstream[-revision]`` (deb-version(7)):
``2.29.3-1+cuda13.0`` is NCCL 2.29.3.
"""

from __future__ import annotations

import csv
import re

# The --query-gpu fields, in the order the parser expects them.  `clocks.sm` and
# `clocks.mem` are nvidia-smi's short names of clocks.current.sm / .memory.
QUERY_FIELDS = (
    "index",
    "name",
    "uuid",
    "driver_version",
    "compute_cap",
    "memory.total",
    "memory.used",
    "memory.free",
    "clocks.sm",
    "clocks.mem",
    "clocks.max.sm",
    "clocks.max.mem",
    "power.draw",
    "power.limit",
    "temperature.gpu",
    "pstate",
    "pci.bus_id",
)

QUERY_ARGS = ("--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv,noheader,nounits")

# Values nvidia-smi prints for a field it cannot report.
_UNAVAILABLE = frozenset(("n/a", "not supported", "unknown error", "insufficient permissions", "not available", ""))
# Units nvidia-smi appends without `nounits` (kept tolerant: a header-and-units capture parses too).
_UNIT_RE = re.compile(r"^(.*?)\s*(?:MiB|MHz|W|%)$")
_CUDA_VERSION_RE = re.compile(r"CUDA Version\s*:\s*([0-9]+(?:\.[0-9]+)*)")
_DRIVER_VERSION_RE = re.compile(r"Driver Version\s*:\s*([0-9]+(?:\.[0-9]+)*)")
_NVCC_RELEASE_RE = re.compile(r"\brelease ([0-9]+)\.([0-9]+)\b")
_MEMINFO_RE = re.compile(r"^([A-Za-z0-9_()]+):\s+(\d+)(?:\s+kB)?\s*$")

NO_DEVICES = "No devices were found"


class GpuParseError(Exception):
    """nvidia-smi or /proc/meminfo printed something this module cannot interpret.

    The message names the line and what was expected.
    """


def is_unavailable(value):
    """True when a field holds nvidia-smi's "no value" marker (``[N/A]``, ``[Not Supported]``, ...)."""
    if value is None:
        return True
    text = value.strip()
    if text.startswith("[") and text.endswith("]"):
        return True
    return text.lower() in _UNAVAILABLE


def _strip_unit(value):
    match = _UNIT_RE.match(value)
    return match.group(1) if match else value


def to_int(value):
    """``"143771"`` (or ``"143771 MiB"``) -> 143771; an unavailable marker -> None."""
    if is_unavailable(value):
        return None
    text = _strip_unit(value.strip())
    try:
        return int(text)
    except ValueError:
        try:
            return int(float(text))
        except ValueError as exc:
            raise GpuParseError(f"expected a whole number, got {value!r}") from exc


def to_float(value):
    """``"119.07"`` (or ``"119.07 W"``) -> 119.07; an unavailable marker -> None."""
    if is_unavailable(value):
        return None
    text = _strip_unit(value.strip())
    try:
        return float(text)
    except ValueError as exc:
        raise GpuParseError(f"expected a number, got {value!r}") from exc


def to_text(value):
    """A field as text, stripped; an unavailable marker -> None."""
    if is_unavailable(value):
        return None
    return value.strip()


def _split_rows(text):
    """Yield the fields of each non-empty line, skipping a header line (``index, name, ...``)."""
    lines = [line for line in text.splitlines() if line.strip()]
    for fields in csv.reader(lines, skipinitialspace=True):
        if fields and fields[0].strip().lower() == "index":
            continue
        yield [field.strip() for field in fields]


def parse_gpu_row(fields):
    """Turn the fields of one --query-gpu line into a GPU dict (without ``usable_memory_mib``)."""
    if len(fields) != len(QUERY_FIELDS):
        raise GpuParseError(
            f"nvidia-smi --query-gpu printed {len(fields)} fields where {len(QUERY_FIELDS)} were expected "
            f"({', '.join(QUERY_FIELDS)}): {', '.join(fields)!r}"
        )
    raw = dict(zip(QUERY_FIELDS, fields))

    def field(name, convert):
        try:
            return convert(raw[name])
        except GpuParseError as exc:
            raise GpuParseError(f"nvidia-smi --query-gpu field {name}: {exc} (line {', '.join(fields)!r})") from exc

    index = field("index", to_int)
    if index is None:
        raise GpuParseError(f"nvidia-smi --query-gpu printed a line without a GPU index: {', '.join(fields)!r}")
    memory_total = field("memory.total", to_int)
    return {
        "index": index,
        "name": field("name", to_text),
        "uuid": field("uuid", to_text),
        "driver_version": field("driver_version", to_text),
        "compute_cap": field("compute_cap", to_text),
        "memory_total_mib": memory_total,
        "memory_used_mib": field("memory.used", to_int),
        "memory_free_mib": field("memory.free", to_int),
        "clocks": {
            "sm_mhz": field("clocks.sm", to_int),
            "mem_mhz": field("clocks.mem", to_int),
            "max_sm_mhz": field("clocks.max.sm", to_int),
            "max_mem_mhz": field("clocks.max.mem", to_int),
        },
        "power": {
            "draw_w": field("power.draw", to_float),
            "limit_w": field("power.limit", to_float),
        },
        "temperature_c": field("temperature.gpu", to_int),
        "pstate": field("pstate", to_text),
        "pci_bus_id": field("pci.bus_id", to_text),
        # No memory of its own to report: the GPU shares system memory (GB10).
        "unified_memory": memory_total is None,
    }


def parse_query_gpu(text):
    """Parse the whole --query-gpu output into a list of GPU dicts, in nvidia-smi's order.

    ``No devices were found`` (a driver without GPUs) yields an empty list.
    """
    if NO_DEVICES in text:
        return []
    return [parse_gpu_row(fields) for fields in _split_rows(text)]


def parse_cuda_version(text):
    """The ``CUDA Version: 13.0`` of plain nvidia-smi output, as text, or None when absent."""
    match = _CUDA_VERSION_RE.search(text)
    return match.group(1) if match else None


def parse_driver_version(text):
    """The ``Driver Version: 580.95.05`` of plain nvidia-smi output, as text, or None when absent."""
    match = _DRIVER_VERSION_RE.search(text)
    return match.group(1) if match else None


def parse_nvcc_release(text):
    """The release of ``nvcc --version`` output as (text, major int), e.g. ("13.0", 13), or (None, None)."""
    match = _NVCC_RELEASE_RE.search(text)
    if not match:
        return None, None
    return f"{match.group(1)}.{match.group(2)}", int(match.group(1))


def debian_upstream_version(version):
    """The upstream part of a Debian package version (epoch and Debian revision dropped), or None when empty."""
    version = (version or "").strip()
    if not version:
        return None
    version = version.split(":", 1)[1] if ":" in version else version
    return version.rsplit("-", 1)[0] if "-" in version else version


def parse_meminfo(text):
    """``/proc/meminfo`` as a dict of name -> value (kB for sizes, a count for HugePages_*)."""
    values = {}
    for line in text.splitlines():
        match = _MEMINFO_RE.match(line.strip())
        if match:
            values[match.group(1)] = int(match.group(2))
    return values


def gpu_facts(query_text, plain_text, meminfo_text):
    """Build the ``sparkfold_gpu`` fact from the three texts.

    ``usable_memory_mib`` of each GPU is MemTotal (MiB) for a unified-memory GPU and its own
    memory.total for a discrete one.
    """
    meminfo = parse_meminfo(meminfo_text)
    if "MemTotal" not in meminfo:
        raise GpuParseError("the meminfo file has no MemTotal line")
    system_total = meminfo["MemTotal"] // 1024
    available_kib = meminfo.get("MemAvailable")
    system_available = None if available_kib is None else available_kib // 1024

    gpus = parse_query_gpu(query_text)
    for gpu in gpus:
        gpu["usable_memory_mib"] = system_total if gpu["unified_memory"] else gpu["memory_total_mib"]

    driver_versions = [gpu["driver_version"] for gpu in gpus if gpu["driver_version"]]
    return {
        "gpus": gpus,
        "count": len(gpus),
        "cuda_version": parse_cuda_version(plain_text),
        "driver_version": driver_versions[0] if driver_versions else parse_driver_version(plain_text),
        "unified_memory": any(gpu["unified_memory"] for gpu in gpus),
        "system_memory_total_mib": system_total,
        "system_memory_available_mib": system_available,
    }
