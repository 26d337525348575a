# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lookup sparkfold.cluster.run_args: what a run started by this one (a fleet's, one per cluster) must be given
to see what this run saw, read from the parsed command line (ansible.context.CLIARGS, set here for each test and
restored after it); a run that asked for a password is refused, since its children have no terminal to ask on."""

from __future__ import annotations

import pytest
from ansible import context
from ansible.errors import AnsibleError
from ansible.utils.context_objects import CLIArgs
from ansible_collections.sparkfold.cluster.plugins.lookup.run_args import LookupModule

# What ansible-playbook's parser leaves for a run given no options (ansible.cfg's defaults: forks 8, ssh, sudo).
PLAIN = {'extra_vars': (), 'vault_ids': (), 'vault_password_files': (), 'ask_pass': False, 'become_ask_pass': False,
         'ask_vault_pass': False, 'step': False, 'become': False, 'become_method': 'sudo', 'become_user': None,
         'become_password_file': None, 'remote_user': None, 'private_key_file': None, 'connection': 'ssh',
         'connection_password_file': None, 'timeout': None, 'ssh_common_args': None, 'ssh_extra_args': None,
         'sftp_extra_args': None, 'scp_extra_args': None, 'forks': 8, 'force_handlers': False,
         'subset': 'cluster_a', 'tags': ('all',), 'check': True, 'args': ('site.yml',)}


@pytest.fixture
def cliargs(monkeypatch):
    """Sets the run's parsed command line for the test (monkeypatch puts the real one back)."""
    def set_args(**change):
        monkeypatch.setattr(context, 'CLIARGS', CLIArgs(dict(PLAIN, **change)))
    return set_args


def _lookup():
    return LookupModule()


def test_a_plain_run_passes_on_only_what_is_set(cliargs):
    cliargs()
    # the inventory, --limit, tags, --check and the playbook are the caller's (each child its own --limit)
    assert _lookup().run([], variables={}) == ['--become-method=sudo', '--connection=ssh', '--forks=8']


def test_extra_vars_pass_on_verbatim_in_order_with_vault_become_and_connection_options(cliargs):
    cliargs(extra_vars=('@/work/vars/site.yml', '{"recipe_overrides": {"context": 8192}}', 'a=1 b="two words"'),
            vault_ids=('prod@/work/.vault-prod',), vault_password_files=('/work/.vault-pass',), become=True,
            become_user='root', become_password_file='/work/.become', remote_user='sparky',
            private_key_file='/work/.ssh/id_ed25519', timeout=60, ssh_common_args='-o ProxyJump=bastion',
            forks=20, force_handlers=True)
    assert _lookup().run([], variables={}) == [
        '--extra-vars=@/work/vars/site.yml',
        '--extra-vars={"recipe_overrides": {"context": 8192}}',
        '--extra-vars=a=1 b="two words"',
        '--vault-id=prod@/work/.vault-prod',
        '--vault-password-file=/work/.vault-pass',
        '--become',
        '--become-method=sudo',
        '--become-user=root',
        '--become-password-file=/work/.become',
        '--user=sparky',
        '--private-key=/work/.ssh/id_ed25519',
        '--connection=ssh',
        '--timeout=60',
        '--ssh-common-args=-o ProxyJump=bastion',
        '--forks=20',
        '--force-handlers',
    ]


@pytest.mark.parametrize(('asked', 'option'), [
    ({'become_ask_pass': True}, '--ask-become-pass'),
    ({'ask_pass': True}, '--ask-pass'),
    ({'ask_vault_pass': True}, '--ask-vault-password'),
    ({'step': True}, '--step'),
])
def test_a_run_that_asked_for_a_password_is_refused_saying_what_to_do(cliargs, asked, option):
    cliargs(extra_vars=('x=1',), **asked)
    with pytest.raises(AnsibleError) as raised:
        _lookup().run([], variables={})
    message = str(raised.value)
    assert f'This run was given {option}, and the runs it starts (one per cluster) have no terminal' in message
    for advice in ('vaulted ansible_become_password', '--become-password-file', 'passwordless sudo',
                   '--limit cluster_<name>'):
        assert advice in message


def test_several_prompts_are_named_together(cliargs):
    cliargs(ask_pass=True, become_ask_pass=True)
    with pytest.raises(AnsibleError, match='given --ask-pass, --ask-become-pass,'):
        _lookup().run([], variables={})


def test_it_takes_no_terms(cliargs):
    cliargs()
    with pytest.raises(AnsibleError, match='run_args takes no terms'):
        _lookup().run(['cluster_a'], variables={})


def test_an_empty_command_line_gives_nothing(monkeypatch):
    """Outside ansible-playbook (no parsed command line), nothing to pass on and nothing refused."""
    monkeypatch.setattr(context, 'CLIARGS', CLIArgs({}))
    assert _lookup().run([], variables={}) == []
