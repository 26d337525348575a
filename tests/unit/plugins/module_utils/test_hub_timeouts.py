# SPDX-License-Identifier: GPL-3.0-or-later
"""Timeouts of every Hub call (module_utils/hub_timeouts.py, installed by hub.hub_client) against the test Hub."""

import time

import pytest
from ansible_collections.sparkfold.cluster.plugins.module_utils import hub_timeouts as t
from ansible_collections.sparkfold.cluster.plugins.module_utils.hub import (
    HubError,
    describe_hub_error,
    hub_client,
    list_refs,
)

from tests.hub import fixtures

SLACK = 3.0


@pytest.fixture(autouse=True)
def default_timeouts():
    """Leave the process with the default timeouts in force, whatever a test set."""
    yield
    t.use_timeouts(t.HubTimeouts(t.DEFAULT_CONNECT_TIMEOUT, t.DEFAULT_READ_TIMEOUT))


def test_fill_timeouts_sets_what_a_call_left_unset_and_keeps_the_rest():
    t.use_timeouts(t.HubTimeouts(1.5, 7.0))
    request = t.http_lib.Request("GET", "http://hub.invalid/api/models/x")
    request.extensions["timeout"] = {"connect": None, "read": 30.0, "write": None, "pool": None}
    t.fill_timeouts(request)
    assert request.extensions["timeout"] == {"connect": 1.5, "read": 30.0, "write": 7.0, "pool": 1.5}
    bare = t.http_lib.Request("GET", "http://hub.invalid/")
    t.fill_timeouts(bare)
    assert bare.extensions["timeout"] == {"connect": 1.5, "read": 7.0, "write": 7.0, "pool": 1.5}


def test_hub_client_uses_the_defaults_for_modules_without_the_options():
    t.use_timeouts(t.HubTimeouts(1, 1))
    hub_client({"endpoint": "http://hub.invalid"})
    assert t.current_timeouts() == (t.DEFAULT_CONNECT_TIMEOUT, t.DEFAULT_READ_TIMEOUT, t.DEFAULT_STALL_TIMEOUT)
    hub_client({"endpoint": "http://hub.invalid", "connect_timeout": 3, "read_timeout": 4.5, "stall_timeout": 2})
    assert t.current_timeouts() == (3.0, 4.5, 2.0)


def test_only_calls_without_their_own_read_timeout_are_watched_for_stalls():
    t.use_timeouts(t.HubTimeouts(1.5, 7.0, 3.0))
    bare = t.http_lib.Request("GET", "http://hub.invalid/")
    t.fill_timeouts(bare)
    assert bare.extensions[t.STALL_EXTENSION] == 3.0
    own = t.http_lib.Request("GET", "http://hub.invalid/")
    own.extensions["timeout"] = {"connect": 1, "read": 30.0, "write": 1, "pool": 1}
    t.fill_timeouts(own)
    assert t.STALL_EXTENSION not in own.extensions  # a download of ours, which watches itself


def test_the_hub_modules_share_one_timeout_spec():
    from ansible_collections.sparkfold.cluster.plugins.modules import hub_revision, hub_snapshot, tokenizer_pull

    for module in (hub_revision, hub_snapshot, tokenizer_pull):
        spec = module.argument_spec()
        assert {name: spec[name] for name in t.HUB_TIMEOUT_ARG_SPEC} == t.HUB_TIMEOUT_ARG_SPEC, module.__name__
        assert "sparkfold.cluster.hub.timeouts" in module.DOCUMENTATION, module.__name__


@pytest.mark.parametrize("value", [0, -1])
def test_hub_client_refuses_a_timeout_that_is_not_positive(value):
    with pytest.raises(HubError) as failure:
        hub_client({"endpoint": "http://hub.invalid", "read_timeout": value})
    assert failure.value.kind == "args" and "read_timeout" in failure.value.msg


def test_a_call_without_its_own_timeout_is_cut_off(hub_server):
    """list_repo_refs passes no timeout (hub_revision, missing_revision_error): hub_client's read timeout cuts it."""
    fault = hub_server.add_fault(r"/refs$", "hang", hold=10)
    api, endpoint, token = hub_client({"endpoint": hub_server.url, "read_timeout": 0.4})
    start = time.monotonic()
    with pytest.raises(t.http_lib.ReadTimeout) as raised:
        list_refs(api, fixtures.QUANT)
    assert time.monotonic() - start < 0.4 + SLACK
    assert fault.hits == 1
    error = describe_hub_error(raised.value, fixtures.QUANT, "main", endpoint, token)
    assert error.kind == "timeout"
    host = hub_server.url.split("://", 1)[1]
    assert f"asking the Hub at {endpoint} about {fixtures.QUANT}" in error.msg
    assert f"an answer from {host}" in error.msg and "read_timeout=0.4" in error.msg


def test_the_client_is_replaced_once_and_keeps_huggingface_hub_hooks(hub_server):
    from huggingface_hub.utils import get_session

    hub_client({"endpoint": hub_server.url})
    hub_client({"endpoint": hub_server.url, "read_timeout": 5})
    session = get_session()
    hooks = session.event_hooks["request"]
    assert hooks.count(t.fill_timeouts) == 1
    assert len(hooks) >= 2  # huggingface_hub's own request hook is still there
    assert session.follow_redirects is True
