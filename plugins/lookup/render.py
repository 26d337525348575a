# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Lookup sparkfold.cluster.render: a role's template rendered with the task's variables, without a deep copy."""

from __future__ import annotations

DOCUMENTATION = r"""
name: render
author: sparkfold developers (@sparkfold)
version_added: "0.1.0"
short_description: Render a role's template file with the task's variables, as the template lookup does
description:
  - Returns the text of each template file, found in the role's C(templates) directory as
    P(ansible.builtin.template#lookup) finds it, rendered with the task's variables plus
    C(ansible_managed) and the C(template_*) variables that the M(ansible.builtin.template) module
    gives a template.
  - The text is the one P(ansible.builtin.template#lookup) returns with its default options (the
    sparkfold roles compare it with the files on the node, so one character more would rewrite them).
  - P(ansible.builtin.template#lookup) deep-copies every variable of the task before it renders; the
    sparkfold roles render a dozen templates on every run, and those copies cost a run that changes
    nothing about a second of the controller's time. This lookup takes a shallow copy instead, as the
    M(ansible.builtin.template) module does. A template cannot change the task's variables either way.
  - It takes no options; the Jinja delimiters, C(trim_blocks) and C(template_vars) are the defaults of
    P(ansible.builtin.template#lookup). Use that lookup for anything else.
options:
  _terms:
    description: Template files, each found as P(ansible.builtin.template#lookup) finds it.
    type: list
    elements: str
    required: true
seealso:
  - plugin: ansible.builtin.template
    plugin_type: lookup
"""

EXAMPLES = r"""
- name: Compare the rendered environment file with the one on the node
  ansible.builtin.set_fact:
    env_text: "{{ lookup('sparkfold.cluster.render', 'engine.env.j2') }}"
"""

RETURN = r"""
_raw:
  description: The rendered text of each template, in the order of the terms.
  type: list
  elements: str
"""

import os

from ansible.errors import AnsibleError
from ansible.plugins.lookup import LookupBase
from ansible.template import generate_ansible_template_vars, trust_as_template


class LookupModule(LookupBase):
    """Renders role templates from a shallow copy of the task's variables."""

    def run(self, terms, variables=None, **kwargs):
        if kwargs:
            raise AnsibleError(
                f"sparkfold.cluster.render takes no options (got {', '.join(sorted(kwargs))}); "
                "use ansible.builtin.template's lookup for those"
            )
        variables = variables or {}
        texts = []
        for term in terms:
            path = self.find_file_in_search_path(variables, 'templates', term)
            if not path:
                raise AnsibleError(
                    f"sparkfold.cluster.render found no template {term!r} in the role's templates directory"
                )
            text = trust_as_template(self._loader.get_text_file_contents(path))
            # Jinja's includes look beside the template first, then in each search path and its templates/.
            searchpath = [os.path.dirname(path)]
            for directory in variables.get('ansible_search_path', []):
                searchpath.extend((os.path.join(directory, 'templates'), directory))
            local = dict(variables)
            local.update(generate_ansible_template_vars(path=term, fullpath=path))
            if 'ansible_managed' in variables:
                local['ansible_managed'] = variables['ansible_managed']
            templar = self._templar.copy_with_new_env(available_variables=local, searchpath=searchpath)
            texts.append(templar.template(text, escape_backslashes=False))
        return texts
