# SPDX-License-Identifier: GPL-3.0-or-later
"""Run a module's main() in-process, as the unit tests of plugins/modules do.

Imported as `from tests.unit.module_runner import module_runner` (tests/unit/conftest.py puts
the repository root on sys.path).
"""

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args


class ExitJson(Exception):
    """Raised in place of AnsibleModule.exit_json; args[0] is the result."""


class FailJson(Exception):
    """Raised in place of AnsibleModule.fail_json; args[0] is the result, with failed=True."""


def module_runner(monkeypatch, main):
    """Patch AnsibleModule's exit_json, fail_json and warn; return run(args) -> (kind, result, warnings).

    run(args) calls main() with args as the module arguments. kind is "exit" or "fail", result the
    dict the module passed to exit_json or fail_json, warnings the list of every AnsibleModule.warn
    message of this test so far (one list for all calls, also at run.warnings).
    """

    def exit_json(self, **kwargs):
        raise ExitJson(kwargs)

    def fail_json(self, **kwargs):
        kwargs["failed"] = True
        raise FailJson(kwargs)

    warnings = []

    def warn(self, warning):
        warnings.append(warning)

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)
    monkeypatch.setattr(basic.AnsibleModule, "warn", warn)

    def run(args):
        with patch_module_args(args):
            try:
                main()
            except ExitJson as exc:
                return "exit", exc.args[0], warnings
            except FailJson as exc:
                return "fail", exc.args[0], warnings
        raise AssertionError("module returned without exit_json or fail_json")

    run.warnings = warnings
    return run
