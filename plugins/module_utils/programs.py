# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The ``run(argv) -> (rc, stdout, stderr)`` the reading modules hand to their readers (doctor_probe and others).

A program is found by name on PATH, then in ``opt_dirs`` and the sbin directories (AnsibleModule.get_bin_path), or
taken as given when its path is absolute. One that is not installed is a finding (rc 127 and why), never a failure
of the whole module. Every program runs under ``LC_ALL=C``, so the readers see its messages in one language.
"""

from __future__ import annotations

import os


def program_runner(module, opt_dirs=None):
    """``run(argv)`` through ``module.run_command``, rc 127 for a program not installed."""

    def run(argv):
        program = argv[0] if os.path.isabs(argv[0]) else module.get_bin_path(argv[0], opt_dirs=opt_dirs or [])
        if program is None:
            return 127, "", f"{argv[0]}: not found on PATH"
        return module.run_command([program, *argv[1:]], environ_update={"LC_ALL": "C"})

    return run
