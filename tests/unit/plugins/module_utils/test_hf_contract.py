# SPDX-License-Identifier: GPL-3.0-or-later
"""What the collection relies on in huggingface_hub: public names only, with the arguments it passes.

An upgrade of huggingface_hub (requirements.txt pins it) that renames or drops one of these fails here
rather than on a node in the middle of a download.
"""

import ast
import dataclasses
import inspect
import pathlib

from huggingface_hub import HfApi, HfFileMetadata, constants, get_hf_file_metadata, hf_hub_download, hf_hub_url
from huggingface_hub.utils import (
    build_hf_headers,
    filter_repo_objects,
    get_session,
    http_stream_backoff,
    set_client_factory,
)

PLUGINS = pathlib.Path(__file__).resolve().parents[4] / "plugins"


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


def test_the_calls_of_the_downloader_take_the_arguments_it_passes():
    assert {"token", "endpoint", "timeout", "retry_on_errors", "library_name"} <= parameters(get_hf_file_metadata)
    assert {"repo_id", "filename", "repo_type", "revision", "endpoint"} <= parameters(hf_hub_url)
    assert {"retry_on_exceptions", "retry_on_status_codes"} <= parameters(http_stream_backoff)
    assert inspect.signature(http_stream_backoff).parameters.keys() >= {"method", "url"}
    assert any(p.kind is p.VAR_KEYWORD for p in inspect.signature(http_stream_backoff).parameters.values())
    assert {"token", "library_name"} <= parameters(build_hf_headers)
    assert {"allow_patterns", "ignore_patterns", "key"} <= parameters(filter_repo_objects)
    assert {"revision", "repo_type", "files_metadata"} <= parameters(HfApi.repo_info)


def test_the_shared_client_can_be_replaced_and_read():
    assert parameters(set_client_factory) == {"client_factory"}
    session = get_session()
    assert isinstance(session.event_hooks, dict) and "request" in session.event_hooks
    assert isinstance(session.follow_redirects, bool)


def test_the_xet_path_of_hub_snapshot_calls_what_exists():
    """hub_download.fetch_with_library passes these arguments by name; locate() reads xet_file_data.file_hash;
    xet_available() reads HF_HUB_DISABLE_XET, as huggingface_hub's own choice of its Xet path does."""
    signature = inspect.signature(hf_hub_download)
    assert list(signature.parameters)[:2] == ["repo_id", "filename"]
    assert {"repo_type", "revision", "local_dir", "token", "endpoint", "library_name", "etag_timeout",
            "tqdm_class"} <= set(signature.parameters)
    assert all(signature.parameters[name].kind is inspect.Parameter.KEYWORD_ONLY
               for name in ("repo_type", "revision", "local_dir", "token", "endpoint", "library_name"))
    assert "xet_file_data" in {field.name for field in dataclasses.fields(HfFileMetadata)}
    assert isinstance(constants.HF_HUB_DISABLE_XET, bool)
