# SPDX-License-Identifier: GPL-3.0-or-later
"""Shared pytest setup for sparkfold.cluster unit tests.

`scripts/setup` links this checkout as .collections/ansible_collections/sparkfold/cluster.
Putting .collections on sys.path lets tests import the collection by its real name
(`ansible_collections.sparkfold.cluster.plugins...`), exactly as modules import it on a
target. Under `ansible-test units` the collection already sits in an ansible_collections
tree and .collections does not exist, so nothing is added.
"""

import atexit
import locale
import os
import shutil
import sys
import tempfile

import pytest

_REPO_ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
)
_COLLECTIONS = os.path.join(_REPO_ROOT, ".collections")

if os.path.isdir(_COLLECTIONS) and _COLLECTIONS not in sys.path:
    sys.path.insert(0, _COLLECTIONS)

_FIXTURES_DIR = os.path.join(os.path.dirname(os.path.realpath(__file__)), "fixtures")


@pytest.fixture(autouse=True)
def _process_locale_kept():
    """A test leaves the worker's locale as it found it.

    AnsibleModule calls setlocale(LC_ALL, "") from the environment, so a module run in-process under a test's
    LC_ALL=C left the worker reading text files as ASCII: a later test on the same worker then failed to read a
    UTF-8 source file (CI, stop 35). Modules set a locale for the programs they run with environ_update instead.
    """
    before = locale.setlocale(locale.LC_CTYPE)
    yield
    after = locale.setlocale(locale.LC_CTYPE)
    if after != before:
        locale.setlocale(locale.LC_CTYPE, before)
        pytest.fail(f"this test left the process locale changed (LC_CTYPE {before!r} -> {after!r}): set a locale for a "
                    "program with run_command(environ_update=...), not in the test's environment")


@pytest.fixture
def fixtures_dir():
    """Absolute path of tests/unit/fixtures (data files shared by all unit tests)."""
    return _FIXTURES_DIR


# --- offline Hugging Face Hub (tests/hub) --------------------------------------------------
# `from tests.hub import fixtures, server` needs the repository root on sys.path.
if _REPO_ROOT not in sys.path:
    sys.path.insert(0, _REPO_ROOT)


def _isolate_huggingface_env():
    """Keep huggingface_hub away from the developer's cache, token and endpoint, on plain HTTP.

    huggingface_hub reads these when it is first imported, so this runs when conftest is loaded.
    """
    home = tempfile.mkdtemp(prefix="sparkfold-hf-home-")
    atexit.register(shutil.rmtree, home, True)
    os.environ["HF_HOME"] = home
    os.environ["HF_HUB_DISABLE_XET"] = "1"
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    for name in ("HF_HUB_OFFLINE", "HF_TOKEN", "HF_ENDPOINT", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        os.environ.pop(name, None)


_isolate_huggingface_env()


@pytest.fixture(scope="session")
def hub_data(tmp_path_factory):
    """The fixture Hub repos (tests/hub/fixtures.py), built once per session: a fixtures.HubData."""
    from tests.hub import fixtures

    return fixtures.build_hub(str(tmp_path_factory.mktemp("hub")))


@pytest.fixture
def hub_server(hub_data):
    """A started tests.hub.server.HubServer on 127.0.0.1 (`.url`, `.requests`, `.cut_after`, ...)."""
    from tests.hub.server import HubServer

    with HubServer(hub_data) as server:
        yield server


@pytest.fixture
def hub_env(hub_server, tmp_path):
    """Environment for a subprocess that talks to hub_server (own HF_HOME, no token, plain HTTP)."""
    env = dict(os.environ)
    env.update({
        "HF_ENDPOINT": hub_server.url,
        "HF_HOME": str(tmp_path / "hf-home"),
        "HF_HUB_DISABLE_XET": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
    })
    return env


@pytest.fixture
def hf_env(monkeypatch, tmp_path):
    """Plain HTTP, an empty HF_HOME, no token and no endpoint from the environment."""
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    for name in ("HF_TOKEN", "HF_TOKEN_PATH", "HF_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)


# --- lab engine (lab/engine, a TensorFold simulator; harness in tests/labengine.py) ---------
@pytest.fixture(scope="session")
def engine_bin(tmp_path_factory):
    """bin/ directory holding tensorfold-native and tf-dsv41-lanes, built once per session."""
    from tests import labengine

    return labengine.build(labengine.ENGINE, tmp_path_factory.mktemp("engine-out"))


@pytest.fixture(scope="session")
def container_engine_bin(tmp_path_factory):
    """bin/ directory holding the container engines' personalities, vllm and tensorfold (`zig build containers`)."""
    from tests import labengine

    return labengine.build(labengine.ENGINE, tmp_path_factory.mktemp("containers-out"), extra=("containers",))
