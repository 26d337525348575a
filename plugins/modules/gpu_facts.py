#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_facts
short_description: Gather NVIDIA GPUs, driver and CUDA version with nvidia-smi, and the memory the GPUs can use
version_added: "0.1.0"
description:
  - Runs C(nvidia-smi --query-gpu=index,name,uuid,driver_version,compute_cap,memory.total,memory.used,memory.free,
    clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,power.draw,power.limit,temperature.gpu,pstate,pci.bus_id
    --format=csv,noheader,nounits) and plain C(nvidia-smi) (for the C(CUDA Version) of its header), reads
    C(/proc/meminfo), and returns the fact C(sparkfold_gpu).
  - On an NVIDIA DGX Spark (GB10) the GPU has no memory of its own; CPU and GPU share one pool, and nvidia-smi
    reports C(memory.total), C(memory.used) and C(memory.free) as C([N/A]) (C(Memory-Usage) "Not Supported" in its
    table). Such a GPU is returned with C(unified_memory) true, its C(memory_*)
    fields null, and C(usable_memory_mib) set to C(MemTotal) of
    C(/proc/meminfo). A discrete GPU keeps its own numbers.
  - Every other field that nvidia-smi cannot report (C([N/A]), C([Not Supported])) is returned as null; GB10 also
    reports its power limit and memory clocks that way.
  - A driver that sees no GPU (C(No devices were found)) is not an error; the module returns
    RV(ansible_facts.sparkfold_gpu.count=0) and warns.
  - Fails when nvidia-smi is not found, or when it fails (for example C(NVIDIA-SMI has failed because it couldn't
    communicate with the NVIDIA driver)), with its message and what to do.
  - Read-only; never reports a change.
author:
  - sparkfold developers (@sparkfold)
options:
  nvidia_smi:
    description:
      - Path of C(nvidia-smi).
      - When left out, C(nvidia-smi) is looked up on the E(PATH) of the target (and the usual sbin directories).
    type: path
  meminfo_path:
    description:
      - The file to read system memory from, normally C(/proc/meminfo).
      - Point it at a copy to inspect another machine's state or in tests.
    type: path
    default: /proc/meminfo
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.facts
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  facts:
    support: full
  platform:
    platforms: linux
notes:
  - C(cudaMemGetInfo) on GB10 tracks C(MemFree), so page cache counts as used; compare
    RV(ansible_facts.sparkfold_gpu.system_memory_available_mib) (C(MemAvailable)) with what the engine needs,
    and drop caches before a large allocation.
  - The CUDA version is the newest one the driver supports, not the installed toolkit; ask C(nvcc --version) for that.
seealso:
  - name: DGX Spark known issues, memory reporting with unified memory
    description: Why nvidia-smi reports no GPU memory on GB10 and reading /proc/meminfo instead.
    link: https://docs.nvidia.com/dgx/dgx-spark/known-issues.html
  - name: nvidia-smi documentation
    description: The query fields and their units.
    link: https://docs.nvidia.com/deploy/nvidia-smi/index.html
"""

EXAMPLES = r"""
- name: Gather GPU facts
  sparkfold.cluster.gpu_facts:

- name: The node must have exactly one GPU on driver branch 580
  ansible.builtin.assert:
    that:
      - sparkfold_gpu.count == 1
      - sparkfold_gpu.driver_version is match('580\.')

- name: Memory the engine can use (system memory on a DGX Spark, the GPU's own on a discrete card)
  ansible.builtin.debug:
    msg: "{{ sparkfold_gpu.gpus[0].name }}: {{ (sparkfold_gpu.gpus[0].usable_memory_mib / 1024) | round(1) }} GiB"

- name: Use an nvidia-smi outside PATH
  sparkfold.cluster.gpu_facts:
    nvidia_smi: /usr/lib/wsl/lib/nvidia-smi
"""

RETURN = r"""
ansible_facts:
  description: Facts to add to the host's variables.
  returned: always
  type: dict
  contains:
    sparkfold_gpu:
      description: GPUs, driver, CUDA version and system memory.
      returned: always
      type: dict
      contains:
        gpus:
          description:
            - One entry per GPU in nvidia-smi's order, each with C(index) (int), C(name), C(uuid),
              C(driver_version), C(compute_cap) (text, C(12.1) on GB10), C(memory_total_mib), C(memory_used_mib),
              C(memory_free_mib) (int, null when not reported), C(clocks) (C(sm_mhz), C(mem_mhz), C(max_sm_mhz),
              C(max_mem_mhz)), C(power) (C(draw_w), C(limit_w), floats), C(temperature_c), C(pstate) (C(P0)),
              C(pci_bus_id), C(unified_memory) and C(usable_memory_mib).
            - C(unified_memory) is true when the GPU reports no memory of its own (C(memory.total) C([N/A]) or
              C([Not Supported]), as on GB10).
            - C(usable_memory_mib) is the memory the GPU can allocate from, C(MemTotal) for a unified-memory GPU and
              C(memory_total_mib) for a discrete one.
            - Any field nvidia-smi does not report is null.
          returned: always
          type: list
          elements: dict
          sample:
            - index: 0
              name: NVIDIA GB10
              uuid: GPU-5e0a1d93-7c3b-4f0e-a1f6-2b9d8c4e7a10
              driver_version: 580.95.05
              compute_cap: "12.1"
              memory_total_mib: null
              memory_used_mib: null
              memory_free_mib: null
              clocks: {sm_mhz: 2405, mem_mhz: null, max_sm_mhz: 3003, max_mem_mhz: null}
              power: {draw_w: 11.23, limit_w: null}
              temperature_c: 45
              pstate: P0
              pci_bus_id: 0000000F:01:00.0
              unified_memory: true
              usable_memory_mib: 121630
        count:
          description: Number of GPUs.
          returned: always
          type: int
          sample: 1
        cuda_version:
          description:
            - Newest CUDA version the driver supports (C(CUDA Version) in nvidia-smi's header); null when absent.
          returned: always
          type: str
          sample: "13.0"
        driver_version:
          description: Driver version (of the first GPU, else from nvidia-smi's header); null when there is none.
          returned: always
          type: str
          sample: 580.95.05
        unified_memory:
          description: Whether any GPU shares system memory.
          returned: always
          type: bool
          sample: true
        system_memory_total_mib:
          description: C(MemTotal) of C(/proc/meminfo) in MiB.
          returned: always
          type: int
          sample: 121630
        system_memory_available_mib:
          description: C(MemAvailable) of C(/proc/meminfo) in MiB; null when the kernel does not report it.
          returned: always
          type: int
          sample: 116290
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native
from ansible_collections.sparkfold.cluster.plugins.module_utils.gpu import (
    NO_DEVICES,
    QUERY_ARGS,
    GpuParseError,
    gpu_facts,
)

NOT_FOUND_HINT = "install the NVIDIA driver (DGX OS ships it) or set nvidia_smi to its path"


def _hint(output):
    """What to do about a failing nvidia-smi, from what it printed."""
    if "couldn't communicate with the NVIDIA driver" in output:
        return (
            "the NVIDIA kernel driver is not loaded: check `lsmod | grep nvidia` and `dmesg | grep -i nvrm`; "
            "reboot after a driver update, else reinstall the driver (DGX OS: the nvidia-driver-580 packages)"
        )
    if "version mismatch" in output.lower():
        return (
            "the loaded kernel module and the driver libraries differ, usually after a driver update: reboot the node"
        )
    return "check that the NVIDIA driver is installed and loaded (run nvidia-smi by hand on the node)"


def _run(module, nvidia_smi, args):
    """Run nvidia-smi; fail with its message and a hint when it fails. Returns stdout."""
    cmd = [nvidia_smi, *args]
    rc, out, err = module.run_command(cmd, environ_update={"LC_ALL": "C"})
    if rc != 0:
        if NO_DEVICES in out or NO_DEVICES in err:
            return NO_DEVICES
        message = " ".join((err.strip() or out.strip() or "no output").split())
        module.fail_json(
            msg=f"{' '.join(cmd)} failed (rc {rc}): {message}; {_hint(message)}",
            rc=rc,
            stdout=out,
            stderr=err,
        )
    return out


def main():
    module = AnsibleModule(
        argument_spec={
            "nvidia_smi": {"type": "path"},
            "meminfo_path": {"type": "path", "default": "/proc/meminfo"},
        },
        supports_check_mode=True,
    )
    nvidia_smi = module.params["nvidia_smi"]
    meminfo_path = module.params["meminfo_path"]

    if nvidia_smi is None:
        nvidia_smi = module.get_bin_path("nvidia-smi")
        if nvidia_smi is None:
            module.fail_json(msg=f"nvidia-smi not found: it is not on PATH; {NOT_FOUND_HINT}")
    elif not os.path.isfile(nvidia_smi):
        module.fail_json(msg=f"nvidia-smi not found at {nvidia_smi} (option nvidia_smi); {NOT_FOUND_HINT}")
    elif not os.access(nvidia_smi, os.X_OK):
        module.fail_json(msg=f"nvidia-smi at {nvidia_smi} is not executable; {NOT_FOUND_HINT}")

    query = _run(module, nvidia_smi, QUERY_ARGS)
    plain = "" if query == NO_DEVICES else _run(module, nvidia_smi, ())

    try:
        with open(meminfo_path, encoding="utf-8", errors="replace") as handle:
            meminfo = handle.read()
    except OSError as exc:
        module.fail_json(msg=f"cannot read {meminfo_path}: {to_native(exc)}; set meminfo_path (default /proc/meminfo)")

    try:
        facts = gpu_facts(query, plain, meminfo)
    except GpuParseError as exc:
        module.fail_json(msg=f"{to_native(exc)} (nvidia-smi: {nvidia_smi}, meminfo: {meminfo_path})")

    if facts["count"] == 0:
        module.warn(f"{nvidia_smi}: {NO_DEVICES}; the driver sees no GPU")

    module.exit_json(changed=False, ansible_facts={"sparkfold_gpu": facts})


if __name__ == "__main__":
    main()
