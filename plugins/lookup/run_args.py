# Copyright: sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: run_args
author:
  - sparkfold developers (@sparkfold)
version_added: "0.1.0"
short_description: The arguments a child ansible-playbook needs to see what this run was given
description:
  - The command line arguments of this C(ansible-playbook) run that a run it starts (one per cluster of a fleet,
    C(playbooks/fleet.yml), and C(site.yml) over several clusters) must be given to see what this run saw, one
    list item each, in the C(--option=value) form.
  - Each C(--extra-vars) as the command line gave it, JSON included (an C(@file) with the full path
    ansible-playbook made of it; the child runs in the same working directory anyway); C(--vault-id) and
    C(--vault-password-file); C(--become), C(--become-method), C(--become-user), C(--become-password-file);
    C(--user), C(--private-key), C(--connection), C(--connection-password-file), C(--timeout); the SSH arguments
    (C(--ssh-common-args), C(--ssh-extra-args), C(--sftp-extra-args), C(--scp-extra-args)); C(--forks);
    C(--force-handlers). An option with no value is left out.
  - Not these, which the caller passes itself from the run's variables - the inventory
    (C(ansible_inventory_sources)), C(--limit) (each child its own), C(--tags) and C(--skip-tags)
    (C(ansible_run_tags), C(ansible_skip_tags)), C(--check), C(--diff), C(-v).
  - Fails when this run asked for a password (C(--ask-pass), C(--ask-become-pass), C(--ask-vault-password), or
    the same set in C(ansible.cfg)), or steps through its tasks (C(--step)) - a child run has no terminal to ask
    on. The message says what to do instead - a vaulted C(ansible_become_password), C(--become-password-file) or
    passwordless sudo, SSH keys or C(--connection-password-file), C(--vault-password-file) or C(--vault-id);
    or one cluster in this run, with C(--limit cluster_<name>).
  - Takes no terms. Call it with P(ansible.builtin.query#lookup) (or C(wantlist=true)) to get a list.
notes:
  - It reads the parsed command line of the running C(ansible-playbook) (C(ansible.context.CLIARGS)), on the
    controller.
"""

EXAMPLES = r"""
- name: Start a run of one cluster that sees what this run was given
  ansible.builtin.command:
    argv: "{{ ['ansible-playbook', 'sparkfold.cluster.site', '--limit', 'cluster_a']
              + query('sparkfold.cluster.run_args') }}"
"""

RETURN = r"""
_raw:
  description: The arguments, one item each, in the order above.
  type: list
  elements: str
  sample: ["--extra-vars=@/srv/sparkfold/vars/site.yml", "--vault-id=prod@/srv/sparkfold/.vault-pass",
           "--become", "--become-method=sudo", "--forks=8"]
"""

from ansible import context
from ansible.errors import AnsibleError
from ansible.plugins.lookup import LookupBase

# The prompts a run may have made, by the command line's name for them: a child run started by this one cannot
# make them (no terminal), and each would wait on its stdin or fail.
PROMPTS = (
    ('ask_pass', '--ask-pass'),
    ('become_ask_pass', '--ask-become-pass'),
    ('ask_vault_pass', '--ask-vault-password'),
    ('step', '--step'),
)

# Options with a value, passed on as --option=value when set: (name in CLIARGS, option).
VALUES = (
    ('become_method', '--become-method'),
    ('become_user', '--become-user'),
    ('become_password_file', '--become-password-file'),
    ('remote_user', '--user'),
    ('private_key_file', '--private-key'),
    ('connection', '--connection'),
    ('connection_password_file', '--connection-password-file'),
    ('timeout', '--timeout'),
    ('ssh_common_args', '--ssh-common-args'),
    ('ssh_extra_args', '--ssh-extra-args'),
    ('sftp_extra_args', '--sftp-extra-args'),
    ('scp_extra_args', '--scp-extra-args'),
    ('forks', '--forks'),
)


def run_args(cliargs):
    """The arguments of a child run, from a run's parsed command line (a mapping as ``ansible.context.CLIARGS``)."""
    asked = [option for name, option in PROMPTS if cliargs.get(name)]
    if asked:
        raise AnsibleError(
            f"This run was given {', '.join(asked)}, and the runs it starts (one per cluster) have no terminal to "
            "ask on: put the become password in a vaulted ansible_become_password (with --vault-password-file or "
            "--vault-id), give it with --become-password-file, or use passwordless sudo; SSH keys (or "
            "--connection-password-file) for the connection; --vault-password-file or --vault-id for the vault. "
            "Or run one cluster in this run, with --limit cluster_<name>.")
    args = [f'--extra-vars={value}' for value in cliargs.get('extra_vars') or ()]
    args.extend(f'--vault-id={value}' for value in cliargs.get('vault_ids') or ())
    args.extend(f'--vault-password-file={value}' for value in cliargs.get('vault_password_files') or ())
    if cliargs.get('become'):
        args.append('--become')
    args.extend(f'{option}={cliargs[name]}' for name, option in VALUES
                if cliargs.get(name) is not None and cliargs.get(name) != '')
    if cliargs.get('force_handlers'):
        args.append('--force-handlers')
    return args


class LookupModule(LookupBase):
    """sparkfold.cluster.run_args: see DOCUMENTATION."""

    def run(self, terms, variables=None, **kwargs):
        if terms:
            raise AnsibleError(f'run_args takes no terms, got {terms!r}: '
                               'call it as query("sparkfold.cluster.run_args")')
        self.set_options(var_options=variables, direct=kwargs)
        return run_args(context.CLIARGS)
