#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_facts
short_description: Gather NVIDIA GPUs, driver, CUDA toolkit and NCCL versions, and the memory the GPUs can use
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
  - With O(nvcc), also runs C(nvcc --version) and returns the toolkit's release (RV(ansible_facts.sparkfold_gpu.nvcc));
    a missing or failing nvcc is reported there, not as a failure of the module.
  - With O(nccl_package), also asks dpkg for that package's version (C(dpkg-query -W -f ${Version})) and returns it
    with its upstream part (RV(ansible_facts.sparkfold_gpu.nccl)); a package that is not installed is reported there.
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
  nvcc:
    description:
      - Path of the C(nvcc) whose release to report (C(/usr/local/cuda/bin/nvcc)).
      - When left out, nvcc is not asked and RV(ansible_facts.sparkfold_gpu.nvcc) is not returned.
    type: path
    version_added: 0.2.0
  nccl_package:
    description:
      - Debian package of the NCCL runtime whose installed version to report (C(libnccl2)).
      - When left out, dpkg is not asked and RV(ansible_facts.sparkfold_gpu.nccl) is not returned.
    type: str
    version_added: 0.2.0
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

- name: Also the toolkit's release and the NCCL package's version
  sparkfold.cluster.gpu_facts:
    nvcc: /usr/local/cuda/bin/nvcc
    nccl_package: libnccl2

- name: The toolkit must be CUDA 13
  ansible.builtin.assert:
    that: sparkfold_gpu.nvcc.major == 13

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
        architecture:
          description: The machine's architecture as the kernel names it (C(uname -m)).
          returned: always
          type: str
          sample: aarch64
          version_added: 0.2.0
        nvcc:
          description:
            - What O(nvcc) answered. C(path); C(found) (false when there is no executable file there); C(rc) of
              C(nvcc --version) (null when not found); C(release) (C(13.0)) and C(major) (C(13), an int), null when
              nvcc failed or its output has no C(release X.Y); C(message), why there is no release (nvcc's error,
              or the last line it printed), else null.
          returned: when O(nvcc) is given
          type: dict
          sample: {path: /usr/local/cuda/bin/nvcc, found: true, rc: 0, release: "13.0", major: 13, message: null}
          version_added: 0.2.0
        nccl:
          description:
            - The installed version of O(nccl_package). C(package); C(version), the Debian version
              (C(2.29.3-1+cuda13.0)), and C(upstream_version) (C(2.29.3), epoch and Debian revision dropped), null
              when the package is not installed; C(message), dpkg's reason then, else null.
          returned: when O(nccl_package) is given
          type: dict
          sample: {package: libnccl2, version: 2.29.3-1+cuda13.0, upstream_version: 2.29.3, message: null}
          version_added: 0.2.0
"""

import os
import platform

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native
from ansible_collections.sparkfold.cluster.plugins.module_utils.gpu import (
    NO_DEVICES,
    QUERY_ARGS,
    GpuParseError,
    debian_upstream_version,
    gpu_facts,
    parse_nvcc_release,
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


def _one_line(text):
    return " ".join(text.split())


def nvcc_facts(module, path):
    """What ``path --version`` says: the release, or why there is none."""
    facts = {"path": path, "found": False, "rc": None, "release": None, "major": None, "message": None}
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        facts["message"] = f"no executable file at {path}"
        return facts
    facts["found"] = True
    rc, out, err = module.run_command([path, "--version"], environ_update={"LC_ALL": "C"})
    facts["rc"] = rc
    if rc != 0:
        facts["message"] = _one_line(err) or _one_line(out) or "no output"
        return facts
    facts["release"], facts["major"] = parse_nvcc_release(out)
    if facts["release"] is None:
        lines = out.strip().splitlines()
        facts["message"] = lines[-1].strip() if lines else "no output"
    return facts


def nccl_facts(module, package):
    """The installed version of the Debian package ``package``, or dpkg's reason why there is none."""
    facts = {"package": package, "version": None, "upstream_version": None, "message": None}
    dpkg_query = module.get_bin_path("dpkg-query")
    if dpkg_query is None:
        facts["message"] = "dpkg-query not found (not a Debian or Ubuntu host)"
        return facts
    rc, out, err = module.run_command([dpkg_query, "-W", "-f", "${db:Status-Status} ${Version}", package],
                                      environ_update={"LC_ALL": "C"})
    status, _sep, version = out.strip().partition(" ")
    if rc != 0 or status != "installed" or not version:
        facts["message"] = _one_line(err) or f"{package} is {status or 'not installed'}"
        return facts
    facts["version"] = version
    facts["upstream_version"] = debian_upstream_version(version)
    return facts


def main():
    module = AnsibleModule(
        argument_spec={
            "nvidia_smi": {"type": "path"},
            "meminfo_path": {"type": "path", "default": "/proc/meminfo"},
            "nvcc": {"type": "path"},
            "nccl_package": {"type": "str"},
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

    facts["architecture"] = platform.machine()
    if module.params["nvcc"]:
        facts["nvcc"] = nvcc_facts(module, module.params["nvcc"])
    if module.params["nccl_package"]:
        facts["nccl"] = nccl_facts(module, module.params["nccl_package"])

    if facts["count"] == 0:
        module.warn(f"{nvidia_smi}: {NO_DEVICES}; the driver sees no GPU")

    module.exit_json(changed=False, ansible_facts={"sparkfold_gpu": facts})


if __name__ == "__main__":
    main()
