#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: check_role_vars
short_description: Check sparkfold roles' variables against their argument specs, failing with the errors alone
version_added: "0.1.0"
description:
  - Validates the variables of the sparkfold roles O(roles) against the options of the entry point C(main) of their
    C(meta/argument_specs.yml), as Ansible's own role validation (M(ansible.builtin.validate_argument_spec)) does -
    types, choices, required options, the options of list elements.
  - >-
    On a wrong variable it fails with the errors alone, each naming its variable; a value of the wrong type is said
    plainly, with what the option wants, its default and the fix, for example C(sparkfold.cluster.fabric - fabric_mtu
    is '9k', not a whole number) then the default (9000) and C(set it to a whole number or leave it out), where Ansible
    says
    C(argument 'fabric_mtu' is of type str and we were unable to convert to int) and its own failure also prints the
    role's whole specification.
  - Returns the host and the errors (RV(problems)), so that a task after it can fail once for the play, naming the
    hosts of each error, as the role M(sparkfold.cluster.common) does (it registers this task with
    C(failed_when=false)).
  - One task on the controller, no round trip to the node. The recipe role, first in every sparkfold play, runs it
    through M(sparkfold.cluster.common) once a run for every role, so a wrong variable is refused once, in plain
    words, before Ansible's own validation of each role (which stays on) would refuse it once per host with the
    role's whole specification.
options:
  roles:
    description:
      - The short names of the sparkfold.cluster roles whose variables are checked, e.g. C([fabric]).
      - Empty, every role of the collection that has an argument spec (C(common) aside).
    type: list
    elements: str
    default: []
author:
  - sparkfold developers (@sparkfold)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.conn
  - ansible.builtin.action_common_attributes.flow
attributes:
  action:
    support: full
  async:
    support: none
  become:
    support: none
  bypass_host_loop:
    support: none
  connection:
    support: none
  check_mode:
    support: full
  delegation:
    support: none
  diff_mode:
    support: none
  platform:
    platforms: all
seealso:
  - module: ansible.builtin.validate_argument_spec
"""

EXAMPLES = r"""
- name: Check the fabric role's variables
  sparkfold.cluster.check_role_vars:
    roles: [fabric]

- name: Check the variables of every sparkfold role
  sparkfold.cluster.check_role_vars:
"""

RETURN = r"""
msg:
  description: The errors, each naming its variable, after the role's name; or that the variables match the spec.
  returned: always
  type: str
  sample: "sparkfold.cluster.fabric - fabric_mtu is '9k', not a whole number (the default is 9000): set it to a whole
    number or leave it out"
host:
  description: The inventory name of the host whose variables were checked.
  returned: always
  type: str
  sample: spark-a
problems:
  description: The errors, each naming its variable; empty when the variables match the spec.
  returned: always
  type: list
  elements: str
  sample: ["fabric_mtu is '9k', not a whole number (the default is 9000): set it to a whole number or leave it out"]
"""
