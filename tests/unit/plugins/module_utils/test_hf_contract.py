# SPDX-License-Identifier: GPL-3.0-or-later
"""What the collection relies on in huggingface_hub: public names only, called as their signatures allow.

Every call the plugins make into huggingface_hub is found in their source, bound to the installed signature
(a parameter renamed, dropped, made keyword-only or newly required breaks it) and compared with the signature
recorded in hf_signatures.json (any change at all). An upgrade of huggingface_hub (requirements.txt and the
hf_cli role pin it) that changes one of them fails here rather than on a node in the middle of a download.
"""

import ast
import dataclasses
import importlib
import importlib.metadata
import inspect
import json
import pathlib

import huggingface_hub
import pytest
import yaml
from huggingface_hub import HfFileMetadata, constants, hf_hub_download
from huggingface_hub import utils as hf_utils
from huggingface_hub.utils import XetFileData, get_session, set_client_factory

ROOT = pathlib.Path(__file__).resolve().parents[4]
PLUGINS = ROOT / "plugins"
SIGNATURES = pathlib.Path(__file__).with_name("hf_signatures.json")


def hf_imports():
    """(file, module, name) of every import from huggingface_hub in plugins/."""
    found = []
    for path in sorted(PLUGINS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "huggingface_hub":
                found.extend((path.name, node.module, alias.name) for alias in node.names)
            elif isinstance(node, ast.Import):
                found.extend((path.name, alias.name, None) for alias in node.names
                             if alias.name.split(".")[0] == "huggingface_hub")
    return found


def test_plugins_import_no_private_name_of_huggingface_hub():
    imports = hf_imports()
    assert any(name == "get_hf_file_metadata" for _f, _m, name in imports)  # the scan sees the imports
    private = [
        (file, module, name) for file, module, name in imports
        if any(part.startswith("_") for part in module.split(".")) or (name or "").startswith("_")
    ]
    assert private == []


def parameters(func):
    return set(inspect.signature(func).parameters)


def called_names(path):
    """(line, qualified name, call node) of every call in ``path`` into huggingface_hub.

    A call of a name imported from huggingface_hub (``hf_hub_download(...)``, ``HfApi(...)``), of an
    attribute of an imported module (``hf_constants.x(...)``), or of a method on a Hub client named ``api``
    (``api.repo_info(...)``, the name every plugin gives the HfApi it is handed).
    """
    tree = ast.parse(path.read_text(), str(path))
    imported = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "huggingface_hub":
            for alias in node.names:
                imported[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in imported:
            found.append((node.lineno, imported[func.id], node))
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            if func.value.id in imported:
                found.append((node.lineno, f"{imported[func.value.id]}.{func.attr}", node))
            elif func.value.id == "api":
                found.append((node.lineno, f"huggingface_hub.HfApi.{func.attr}", node))
    return found


def resolve(qualified):
    """The object named ``huggingface_hub.<module path>.<attribute path>``, or None when it does not exist."""
    parts = qualified.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name, None)
            if obj is None:
                return None
        return obj
    return None


def plugin_calls():
    """{qualified name: [(file:line, call node)]} of the plugins' calls into huggingface_hub (modules skipped)."""
    calls = {}
    for path in sorted(PLUGINS.rglob("*.py")):
        for line, qualified, node in called_names(path):
            if inspect.ismodule(resolve(qualified)):
                continue
            calls.setdefault(qualified, []).append((f"{path.relative_to(PLUGINS)}:{line}", node))
    return calls


def unbound_calls():
    """Each call site, as written (its positional count and keyword names), bound to the installed signature:
    one line per call that a parameter renamed, dropped, made keyword-only or newly required breaks."""
    broken = []
    for qualified, sites in sorted(plugin_calls().items()):
        target = resolve(qualified)
        if not callable(target):
            broken.extend(f"{where}: {qualified} is not in the installed huggingface_hub" for where, _n in sites)
            continue
        signature = inspect.signature(target)
        for where, node in sites:
            complete = not any(isinstance(arg, ast.Starred) for arg in node.args) and all(
                keyword.arg is not None for keyword in node.keywords)
            args = [None] * (len(node.args) + (1 if qualified.startswith("huggingface_hub.HfApi.") else 0))
            kwargs = {keyword.arg: None for keyword in node.keywords if keyword.arg is not None}
            try:
                (signature.bind if complete else signature.bind_partial)(*args, **kwargs)
            except TypeError as exc:
                broken.append(f"{where}: {qualified}{signature}: {exc}")
    return broken


def changed_signatures():
    """One line per huggingface_hub callable the plugins call whose signature is not the one in hf_signatures.json,
    and per call added or removed since it was written."""
    recorded = json.loads(SIGNATURES.read_text())
    calls = plugin_calls()
    changed = [f"{name}: called, not recorded" for name in sorted(set(calls) - set(recorded))]
    changed += [f"{name}: recorded, no longer called" for name in sorted(set(recorded) - set(calls))]
    for name in sorted(recorded):
        target = resolve(name)
        now = str(inspect.signature(target)) if callable(target) else "(gone)"
        if now != recorded[name]:
            changed.append(f"{name}: recorded {recorded[name]}, installed {now}")
    return changed


def test_every_call_into_huggingface_hub_binds_to_the_signature_installed():
    calls = plugin_calls()
    assert "huggingface_hub.hf_hub_download" in calls and "huggingface_hub.HfApi.repo_info" in calls
    broken = unbound_calls()
    assert not broken, "\n".join(broken)


def test_the_signatures_of_what_the_plugins_call_are_the_ones_recorded():
    """Any change to the signature of a huggingface_hub callable the plugins call fails here, added parameters and
    changed defaults included, so that an upgrade (requirements.txt and the hf_cli role pin the version) is
    reviewed call by call. After that review, write the new signatures into hf_signatures.json (str of
    inspect.signature)."""
    changed = changed_signatures()
    assert not changed, "\n".join(changed)


def keyword_only(params):
    return [param.replace(kind=inspect.Parameter.KEYWORD_ONLY) for param in params]


def new_required(params):
    return [*params[:1], inspect.Parameter("context", inspect.Parameter.KEYWORD_ONLY)]


def etag_timeout_30(params):
    return [param.replace(default=30) if param.name == "etag_timeout" else param for param in params]


@pytest.mark.parametrize(
    ("owner", "name", "change", "breaks_a_call"),
    [
        (huggingface_hub, "get_hf_file_metadata", keyword_only, True),  # hub_download passes the url by position
        (hf_utils, "hf_raise_for_status", new_required, True),
        (huggingface_hub, "hf_hub_download", etag_timeout_30, False),  # no call breaks; the record still sees it
    ],
)
def test_a_changed_signature_is_caught(monkeypatch, owner, name, change, breaks_a_call):
    """The two checks above against a huggingface_hub whose signature changed as an upgrade could change it."""
    original = getattr(owner, name)

    def changed(*args, **kwargs):
        return original(*args, **kwargs)

    signature = inspect.signature(original)
    changed.__signature__ = signature.replace(parameters=change(list(signature.parameters.values())))
    monkeypatch.setattr(owner, name, changed)
    assert any(name in line for line in changed_signatures())
    assert any(name in line for line in unbound_calls()) is breaks_a_call


def test_the_shared_client_can_be_replaced_and_read():
    assert parameters(set_client_factory) == {"client_factory"}
    session = get_session()
    assert isinstance(session.event_hooks, dict) and "request" in session.event_hooks
    assert isinstance(session.follow_redirects, bool)


def test_the_xet_path_of_hub_snapshot_reads_what_exists():
    """locate() reads xet_file_data.file_hash with getattr (a rename would send every Xet file over HTTP without
    a word); xet_available() reads HF_HUB_DISABLE_XET, as huggingface_hub's own choice of its Xet path does."""
    assert "xet_file_data" in {field.name for field in dataclasses.fields(HfFileMetadata)}
    assert "file_hash" in {field.name for field in dataclasses.fields(XetFileData)}
    assert "tqdm_class" in inspect.signature(hf_hub_download).parameters
    assert isinstance(constants.HF_HUB_DISABLE_XET, bool)


def test_the_nodes_get_the_versions_recorded_here():
    """hf_signatures.json records the installed huggingface_hub; requirements.txt pins it and hf_xet for the
    controller, and the hf_cli role pins both for the nodes' venv: all three name the same versions."""
    pins = dict(
        line.split("==", 1) for line in (ROOT / "requirements.txt").read_text().splitlines()
        if line.startswith(("huggingface_hub==", "hf_xet=="))
    )
    role = yaml.safe_load((ROOT / "roles" / "hf_cli" / "defaults" / "main.yml").read_text())
    installed = {name: importlib.metadata.version(name) for name in ("huggingface_hub", "hf_xet")}
    assert pins == installed
    assert {"huggingface_hub": role["hf_cli_version"], "hf_xet": role["hf_cli_xet_version"]} == installed
