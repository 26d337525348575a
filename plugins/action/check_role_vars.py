# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action of sparkfold.cluster.check_role_vars: a sparkfold role's variables against its argument spec, one task.

Documentation: plugins/modules/check_role_vars.py.
"""

from __future__ import annotations

import os
import re

import yaml
from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.errors import ArgumentTypeError
from ansible.plugins.action import ActionBase

# The collection's roles: plugins/action/ -> the collection's root.
ROLES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "roles")


def role_options(role, roles_dir=ROLES_DIR):
    """The options of the entry point main of a sparkfold role's meta/argument_specs.yml."""
    if not isinstance(role, str) or not re.fullmatch(r"[a-z][a-z0-9_]*", role):
        raise AnsibleActionFail(f"role must name a sparkfold.cluster role by its short name, e.g. fabric; got {role!r}")
    path = os.path.join(roles_dir, role, "meta", "argument_specs.yml")
    try:
        with open(path, encoding="utf-8") as handle:
            specs = yaml.safe_load(handle) or {}
    except FileNotFoundError as exc:
        known = sorted(name for name in os.listdir(roles_dir)
                       if os.path.isfile(os.path.join(roles_dir, name, "meta", "argument_specs.yml")))
        raise AnsibleActionFail(f"sparkfold.cluster.{role} has no argument spec ({path}); the roles are: "
                                f"{', '.join(known)}") from exc
    try:
        return specs["argument_specs"]["main"].get("options") or {}
    except (KeyError, TypeError, AttributeError) as exc:
        raise AnsibleActionFail(f"{path} has no entry point main under argument_specs") from exc


# What each type of the argument specs asks for, in the words of a refusal.
_WANTED = {"int": "a whole number", "float": "a number", "bool": "true or false", "list": "a list",
           "dict": "a mapping", "str": "a text", "path": "a path", "raw": "a value"}


def problems(options, provided):
    """The errors of ``provided`` against ``options``, each naming its variable. A top-level value of the wrong
    type is said once, plainly, with what the option wants and its default: "fabric_mtu is '9k', not a whole
    number (the default is 9000)", instead of Ansible's "argument 'fabric_mtu' is of type str and we were unable
    to convert to int: ..."."""
    out = []
    # Only the values given are judged: a spec's default may be a template of what the run computes later, and a
    # required option may be one a role sets for another it includes (engine_service for engine_capacity); Ansible's
    # own validation judges both when the role starts.
    given = {name: {key: value for key, value in spec.items() if key not in ("default", "required")}
             for name, spec in options.items()}
    for error in ArgumentSpecValidator(given).validate(provided, validate_role_argument_spec=True).errors:
        message = error.error_message
        if isinstance(error, ArgumentTypeError) and " found in " not in message:
            named = [name for name in provided if message.startswith(f"argument '{name}' ")]
            if len(named) == 1:
                name, spec = named[0], options[named[0]]
                wanted = _WANTED.get(str(spec.get("type", "str")), f"of type {spec.get('type')}")
                default = f" (the default is {spec['default']!r})" if spec.get("default") is not None else ""
                message = f"{name} is {provided[name]!r}, not {wanted}{default}: set it to {wanted} or leave it out"
        if message not in out:
            out.append(message)
    return out


def all_roles(roles_dir=ROLES_DIR):
    """Every sparkfold role with an argument spec, but common (its options are set by the roles, not by users)."""
    return sorted(name for name in os.listdir(roles_dir) if name != "common"
                  and os.path.isfile(os.path.join(roles_dir, name, "meta", "argument_specs.yml")))


class ActionModule(ActionBase):
    """Checks the roles' variables as Ansible's role validation does, failing with the errors alone."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(("roles",))

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        roles = self._task.args.get("roles") or all_roles()
        if not isinstance(roles, list):
            raise AnsibleActionFail(f"roles must be a list of sparkfold.cluster roles, e.g. [fabric]; got {roles!r}")
        found, messages = [], []
        for role in roles:
            options = role_options(role)
            provided = {}
            for name in options:
                if name not in task_vars:
                    continue
                try:
                    provided[name] = self._templar.template(task_vars[name])
                except AnsibleError:
                    # A role's default naming what the run computes later (engine_* defaults read recipe_spec, which
                    # the recipe role sets after this check): Ansible's own validation judges it when the role starts.
                    continue
            errors = problems(options, provided)
            found.extend(errors)
            if errors:
                messages.append(f"sparkfold.cluster.{role} - {'; '.join(errors)}")
        result["changed"] = False
        # The host and the errors, for the common role's one failure of the play (it groups the hosts by message).
        result["host"] = task_vars.get("inventory_hostname")
        result["problems"] = found
        if messages:
            result["failed"] = True
            result["msg"] = "; ".join(messages)
        else:
            names = ", ".join(f"sparkfold.cluster.{role}" for role in roles)
            result["msg"] = f"the variables of {names} match their argument specs"
        return result
