# SPDX-License-Identifier: GPL-3.0-or-later
"""Fixture repositories for the offline Hugging Face Hub test server (stdlib only, Python 3.8+).

`build_hub(root)` writes four small model repos to disk and returns a `HubData` that both the
server (`tests/hub/server.py`) and the tests use:

* QUANT     sparkfold-test/dsv41-flash-exl3  - an EXL3 quant: c1 "Initial upload", c2 "Add EXL3 shards"
            (tag v1.0, QUANT_PIN), c3 "Update README" (main). Real safetensors shards, Engram tables,
            no tokenizer. Branch "exl3/2.9bpw" -> c2, PR ref refs/pr/1 -> a commit not on main.
* BASE      sparkfold-test/dsv41-flash-base  - tokenizer + chat template + config (BASE_PIN = main).
* SQUASHED  sparkfold-test/dsv41-squashed    - main super-squashed into one commit with QUANT's files;
            SQUASHED_PIN is the vanished commit "Add EXL3 shards". Tag v0 -> the squashed head.
* GATED     sparkfold-test/dsv41-gated       - gated ("manual"): files need GOOD_TOKEN.
* ORIGINAL  sparkfold-test/dsv41-flash-original - the original (unquantised) checkpoint's layout with 48
            shards named, of which only config.json, the index and shards 47/48 (the Engram tables the
            Zig engine reads) are stored (ORIGINAL_PIN = main).
* SWITCH    sparkfold-test/switch            - two revisions for store switches: tag "a" (SWITCH_A) and tag "b"
            (main, SWITCH_B). Both hold config.json and shard-1 unchanged; shard-2 has other bytes of the same
            size, README.md another size; extra/a-only.bin is only in a, b-only.bin only in b.
* KIT       sparkfold-test/dsv41-tp2-kit     - a kernel kit in folder kit/ as the lab engine checks it:
            aot/, cubins/, rope.json + RoPE tables, engram.json, vision/, MANIFEST (sha256 of every other
            file) and tools/verify_kit.sh (KIT_PIN = main).

Layout on disk (`root`): `hub.json` (every repo: commits, refs, gating, vanished commits) and
`blobs/<sha256>` (file contents, content-addressed). `load_hub(root)` reads it back.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct

QUANT = "sparkfold-test/dsv41-flash-exl3"
BASE = "sparkfold-test/dsv41-flash-base"
SQUASHED = "sparkfold-test/dsv41-squashed"
GATED = "sparkfold-test/dsv41-gated"
ORIGINAL = "sparkfold-test/dsv41-flash-original"
KIT = "sparkfold-test/dsv41-tp2-kit"
SWITCH = "sparkfold-test/switch"

GOOD_TOKEN = "hf_sparkfoldgoodtoken0000000000000000"
NOACCESS_TOKEN = "hf_sparkfoldnoaccess000000000000000000"
# user name behind each valid token (what /api/whoami-v2 answers)
TOKEN_USERS = {GOOD_TOKEN: "sparkfold-ci", NOACCESS_TOKEN: "sparkfold-outsider"}
# tokens that may download files of gated repos
GATED_ACCESS_TOKENS = (GOOD_TOKEN,)

SQUASH_TITLE = "Super-squash branch 'main' using huggingface_hub"
SQUASHED_PIN_OLD_TITLE = "Add EXL3 shards"
QUANT_PR_REF = "refs/pr/1"
QUANT_SLASH_BRANCH = "exl3/2.9bpw"

LFS_THRESHOLD = 10 * 1024  # files above this size are LFS, whatever their name
LFS_SUFFIXES = (".safetensors", ".bin")
HUB_JSON = "hub.json"
AUTHOR = "sparkfold-bot"

# Pins are filled in at import time from a deterministic build (commit ids depend only on content,
# and content only on shard_count/shard_bytes, so they equal what build_hub() returns by default).
QUANT_PIN = ""
BASE_PIN = ""
SQUASHED_PIN = ""
ORIGINAL_PIN = ""
KIT_PIN = ""
SWITCH_A = ""
SWITCH_B = ""


def git_blob_sha1(data: bytes) -> str:
    """git's object id of a blob (what `git hash-object` prints)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lfs_pointer(sha256: str, size: int) -> bytes:
    """The git-lfs pointer file the Hub stores in git for an LFS file."""
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


def is_lfs_path(path: str, size: int) -> bool:
    return path.endswith(LFS_SUFFIXES) or size > LFS_THRESHOLD


class FileEntry:
    """One file of a commit. `blob_id` is the git oid the Hub reports (of the pointer file for LFS)."""

    def __init__(self, path: str, sha256: str, size: int, lfs: bool):
        self.path = path
        self.sha256 = sha256
        self.size = size
        self.lfs = lfs
        if lfs:
            pointer = lfs_pointer(sha256, size)
            self.pointer_size = len(pointer)
            self.blob_id = git_blob_sha1(pointer)
        else:
            self.pointer_size = 0
            self.blob_id = ""  # filled by HubData from the bytes (git sha1 of the content)

    @property
    def etag(self) -> str:
        """ETag of /resolve: sha256 for LFS files, git blob sha1 otherwise."""
        return self.sha256 if self.lfs else self.blob_id

    def to_json(self) -> dict:
        return {"sha256": self.sha256, "size": self.size, "lfs": self.lfs, "blob_id": self.blob_id}

    def __repr__(self) -> str:
        return f"FileEntry({self.path!r}, size={self.size}, lfs={self.lfs})"


class Commit:
    def __init__(
        self,
        id: str,
        title: str,
        message: str,
        date: str,
        parents: list[str],
        files: dict[str, FileEntry],
        card_data: dict | None,
        authors: list[str],
    ):
        self.id = id
        self.title = title
        self.message = message
        self.date = date  # "2026-01-05T10:00:00.000Z", the Hub's format
        self.parents = parents
        self.files = files  # path -> FileEntry
        self.card_data = card_data  # README front matter as a dict (what the Hub calls cardData)
        self.authors = authors

    def __repr__(self) -> str:
        return f"Commit({self.id[:12]}, {self.title!r})"


class RepoData:
    def __init__(
        self,
        repo_id: str,
        commits: dict[str, Commit],
        branches: dict[str, str],
        tags: dict[str, str],
        pull_requests: dict[str, str],
        gated,
        private: bool,
        vanished: dict[str, dict],
    ):
        self.repo_id = repo_id
        self.commits = commits  # id -> Commit
        self.branches = branches  # name -> commit id
        self.tags = tags
        self.pull_requests = pull_requests  # "refs/pr/1" -> commit id
        self.gated = gated  # False, "auto" or "manual"
        self.private = private
        self.vanished = vanished  # commit id that is gone (super-squash) -> {"title": ...}

    def resolve(self, rev: str) -> Commit | None:
        """Branch, tag, refs/heads/x, refs/tags/x, refs/pr/N, full or short (>= 7 hex) commit id."""
        if rev in self.branches:
            return self.commits[self.branches[rev]]
        if rev in self.tags:
            return self.commits[self.tags[rev]]
        if rev in self.pull_requests:
            return self.commits[self.pull_requests[rev]]
        if rev.startswith("refs/heads/") and rev[11:] in self.branches:
            return self.commits[self.branches[rev[11:]]]
        if rev.startswith("refs/tags/") and rev[10:] in self.tags:
            return self.commits[self.tags[rev[10:]]]
        if rev in self.commits:
            return self.commits[rev]
        if re.fullmatch(r"[0-9a-f]{7,39}", rev):
            found = [c for cid, c in self.commits.items() if cid.startswith(rev)]
            if len(found) == 1:
                return found[0]
        return None

    def history(self, rev: str = "main") -> list[Commit]:
        """Commits reachable from `rev`, newest first (first-parent chain)."""
        commit = self.resolve(rev)
        out = []
        while commit is not None:
            out.append(commit)
            commit = self.commits[commit.parents[0]] if commit.parents else None
        return out

    def files(self, rev: str = "main") -> dict[str, FileEntry]:
        commit = self.resolve(rev)
        if commit is None:
            raise KeyError(f"{self.repo_id} has no revision {rev!r}")
        return commit.files


class HubData:
    """What build_hub()/load_hub() return: repos plus the blob store."""

    def __init__(self, root: str, repos: dict[str, RepoData]):
        self.root = root
        self.repos = repos

    def blob_path(self, sha256: str) -> str:
        return os.path.join(self.root, "blobs", sha256)

    def read(self, sha256: str) -> bytes:
        with open(self.blob_path(sha256), "rb") as fh:
            return fh.read()

    def file(self, repo_id: str, path: str, rev: str = "main") -> FileEntry:
        return self.repos[repo_id].files(rev)[path]

    def file_bytes(self, repo_id: str, path: str, rev: str = "main") -> bytes:
        return self.read(self.file(repo_id, path, rev).sha256)

    def expected_sha256(self, repo_id: str, rev: str = "main") -> dict[str, str]:
        """{path: sha256} of every file of `repo_id` at `rev`."""
        return {p: f.sha256 for p, f in self.repos[repo_id].files(rev).items()}

    def commits(self, repo_id: str, rev: str = "main") -> list[Commit]:
        return self.repos[repo_id].history(rev)

    def pin(self, repo_id: str, rev: str = "main") -> str:
        commit = self.repos[repo_id].resolve(rev)
        if commit is None:
            raise KeyError(f"{repo_id} has no revision {rev!r}")
        return commit.id


# --------------------------------------------------------------------------- content


def _stream(seed: str, n: int) -> bytes:
    """Deterministic pseudo-random bytes."""
    return hashlib.shake_256(seed.encode()).digest(n)


def safetensors_file(tensors: list[tuple]) -> bytes:
    """A real safetensors file: u64 LE header length, JSON header (8-byte aligned), raw data.

    `tensors` is a list of (name, dtype, shape, raw bytes).
    """
    header = {"__metadata__": {"format": "pt", "quant_method": "exl3"}}
    offset = 0
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * ((8 - len(raw) % 8) % 8)
    return struct.pack("<Q", len(raw)) + raw + b"".join(t[3] for t in tensors)


def _shards(shard_count: int, shard_bytes: int):
    """{filename: bytes} of the EXL3 shards, plus the index's weight_map and total size."""
    files = {}
    weight_map = {}
    total = 0
    suh_len = 256  # float16 x 128
    trellis_len = max(2, (shard_bytes - suh_len) // 2 * 2)
    for i in range(shard_count):
        name = f"model-{i + 1:05d}-of-{shard_count:05d}.safetensors"
        prefix = f"model.layers.{i}.mlp.down_proj"
        tensors = [
            (prefix + ".suh", "F16", [suh_len // 2], _stream(f"suh-{i}", suh_len)),
            (prefix + ".trellis", "I16", [trellis_len // 2], _stream(f"trellis-{i}", trellis_len)),
        ]
        files[name] = safetensors_file(tensors)
        for t in tensors:
            weight_map[t[0]] = name
            total += len(t[3])
    return files, weight_map, total


def _json(obj) -> bytes:
    return (json.dumps(obj, indent=2, sort_keys=False) + "\n").encode()


def _front_matter(card: dict) -> str:
    """Minimal YAML for flat card data (strings, numbers, lists of strings)."""
    lines = ["---"]
    for key, value in card.items():
        if isinstance(value, list):
            lines.append(f"{key}:")
            lines.extend(f"- {v}" for v in value)
        else:
            lines.append(f"{key}: {value}")
    lines.append("---")
    return "\n".join(lines) + "\n"


QUANT_CARD = {
    "base_model": BASE,
    "base_model_relation": "quantized",
    "library_name": "exllamav3",
    "license": "mit",
    "pipeline_tag": "text-generation",
    "tags": ["exl3", "quantized"],
}
BASE_CARD = {"library_name": "transformers", "license": "mit", "pipeline_tag": "text-generation"}
GATED_CARD = {"license": "other", "extra_gated_prompt": "You agree to the sparkfold test terms"}

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|{{ message['role'] }}|>{{ message['content'] }}<|end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)

QUANT_CONFIG = {
    "architectures": ["DeepseekV4ForCausalLM"],
    "model_type": "deepseek_v4",
    "hidden_size": 1024,
    "num_hidden_layers": 3,
    "vocab_size": 1200,
    "torch_dtype": "bfloat16",
    "engram": {"tables": ["engram/engram_table_0.bin", "engram/engram_table_1.bin"]},
    "quantization_config": {
        "quant_method": "exl3",
        "bits": 2.9,
        "head_bits": 6,
        "calibration": {"rows": 250, "cols": 2048},
        "out_scales": "auto",
    },
}
BASE_CONFIG = {
    "architectures": ["DeepseekV4ForCausalLM"],
    "model_type": "deepseek_v4",
    "hidden_size": 1024,
    "num_hidden_layers": 3,
    "vocab_size": 1200,
    "torch_dtype": "bfloat16",
}


def _tokenizer_json() -> bytes:
    # > 10 KiB, so it is LFS by size like most real tokenizer.json files
    vocab = {"<|begin|>": 0, "<|end|>": 1, "<|user|>": 2, "<|assistant|>": 3}
    for i in range(1196):
        vocab[f"tok{i:04d}"] = i + 4
    return _json(
        {
            "version": "1.0",
            "added_tokens": [{"id": i, "content": t, "special": True} for t, i in list(vocab.items())[:4]],
            "model": {"type": "BPE", "vocab": vocab, "merges": []},
        }
    )


def _original_files() -> dict:
    """config.json, the index of all 48 shards and shards 47/48 (the Engram tables) of the original."""
    weight_map = {}
    for i in range(1, 49):
        weight_map[f"model.layers.{i}.mlp.experts.weight"] = f"model-{i:05d}-of-00048.safetensors"
    files = {"config.json": _json(BASE_CONFIG)}
    # The Engram tables are layers 1 and 14's n-gram embeddings, an FP8 weight and its scale, in shards 47 and
    # 48 (MiaAI-Lab/DeepSeek-v4.1-Flash-EXL3-2x-DGX-Sparks scripts/prepare_engram_src.py
    # @c08f50f2ef59233816fd0f4f26d112653e0ae23a keeps the names ending .engram.embed.weight and .engram.embed.scale).
    for layer, shard in ((1, 47), (14, 48)):
        prefix = f"model.layers.{layer}.engram.embed"
        name = f"model-{shard:05d}-of-00048.safetensors"
        weight_map[f"{prefix}.weight"] = weight_map[f"{prefix}.scale"] = name
        files[name] = safetensors_file(
            [(f"{prefix}.weight", "F8_E4M3", [64, 64], _stream(f"engram-{shard}", 4096)),
             (f"{prefix}.scale", "F32", [64, 1], _stream(f"engram-scale-{shard}", 256))])
    files["model.safetensors.index.json"] = _json({"metadata": {"total_size": 48 * 4096}, "weight_map": weight_map})
    return files


VERIFY_KIT = """#!/bin/bash
# verify_kit.sh: check the kit this script lives in (tools/..) against its MANIFEST.
# MANIFEST lines: <sha256>  <path relative to the kit>. Exit 0 when every file is there with its
# sha256, 1 when one is missing or differs (each is printed).
set -u
cd "$(dirname "$0")/.." || exit 1
bad=0; n=0
while read -r sum path; do
  n=$((n + 1))
  if [ ! -f "$path" ]; then echo "MISSING  $path"; bad=$((bad + 1)); continue; fi
  [ "$(sha256sum "$path" | cut -d' ' -f1)" = "$sum" ] || { echo "DIFFERS  $path"; bad=$((bad + 1)); }
done < MANIFEST
if [ "$bad" = 0 ]; then echo "kit OK: $n files match MANIFEST"; exit 0; fi
echo "kit NOT OK: $bad of $n files missing or different"; exit 1
"""


def _kit_files(rope_rows: int = 1048576) -> dict:
    """The lab's kernel kit under kit/ (what the lab engine checks in TF_DS_KIT / KIT_DIR)."""
    kit = {
        "aot/aot.json": _json({"kernels": ["lab_gemv"], "sm": 121}),
        "aot/cubins/" + hashlib.sha256(b"lab_gemv").hexdigest() + ".cubin": _stream("aot-cubin", 2048),
        "cubins/experts.cubin": _stream("experts-cubin", 2048),
        "cubins/linear.cubin": _stream("linear-cubin", 2048),
        "rope.json": _json({"rows": rope_rows}),
        "rope-cos.f32": _stream("rope-cos", 1024),
        "rope-sin.f32": _stream("rope-sin", 1024),
        "engram.json": _json({
            "layers": [1, 14],
            "shards": ["model-00047-of-00048.safetensors", "model-00048-of-00048.safetensors"],
        }),
        "vision/torch_fmha_sm120.cubin": _stream("fmha-cubin", 1024),
        "vision/gate_bias_vl.safetensors": safetensors_file([("gate_bias", "F32", [16], _stream("bias", 64))]),
        "tools/verify_kit.sh": VERIFY_KIT.encode(),
    }
    manifest = "".join(f"{hashlib.sha256(data).hexdigest()}  {path}\n" for path, data in sorted(kit.items()))
    kit["MANIFEST"] = manifest.encode()
    return {"kit/" + path: data for path, data in kit.items()}


def _contents(shard_count: int, shard_bytes: int) -> dict:
    shards, weight_map, total = _shards(shard_count, shard_bytes)
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    readme1 = _front_matter(QUANT_CARD) + f"\n# dsv41-flash EXL3\n\nEXL3 quant of {BASE}.\n"
    readme3 = readme1 + "\n## Usage\n\nLoad with exllamav3 (2.9 bpw, head 6 bpw).\n"
    engram = {
        "engram/engram_table_0.bin": _stream("engram-0", 4096),
        "engram/engram_table_1.bin": _stream("engram-1", 6144),
    }
    return {
        "shards": shards,
        "index": _json(index),
        "readme1": readme1.encode(),
        "readme3": readme3.encode(),
        "engram": engram,
    }


# --------------------------------------------------------------------------- building


class _Builder:
    def __init__(self, root: str | None):
        self.root = root  # None: compute ids only, write nothing
        self.repos = {}
        self.data = {}  # sha256 -> bytes, kept only when nothing is written
        if root is not None:
            self.blobs_dir = os.path.join(root, "blobs")
            os.makedirs(self.blobs_dir, exist_ok=True)

    def blob(self, path: str, data: bytes) -> FileEntry:
        sha256 = hashlib.sha256(data).hexdigest()
        if self.root is None:
            self.data[sha256] = data
        target = os.path.join(self.blobs_dir, sha256) if self.root is not None else None
        if target is not None and not os.path.exists(target):
            tmp = f"{target}.tmp{os.getpid()}"
            with open(tmp, "wb") as fh:
                fh.write(data)
            os.replace(tmp, target)
        entry = FileEntry(path, sha256, len(data), is_lfs_path(path, len(data)))
        if not entry.lfs:
            entry.blob_id = git_blob_sha1(data)
        return entry

    def read(self, sha256: str) -> bytes:
        if self.root is None:
            return self.data[sha256]
        with open(os.path.join(self.blobs_dir, sha256), "rb") as fh:
            return fh.read()

    def commit(
        self,
        repo: dict,
        title: str,
        date: str,
        changes: dict[str, bytes],
        parent: str | None,
        card: dict | None = None,
        message: str = "",
    ) -> str:
        files = dict(repo["commits"][parent].files) if parent else {}
        for path, data in changes.items():
            files[path] = self.blob(path, data)
        files = dict(sorted(files.items()))
        if card is None and parent:
            card = repo["commits"][parent].card_data
        parents = [parent] if parent else []
        ident = json.dumps(
            {
                "repo": repo["id"],
                "title": title,
                "message": message,
                "date": date,
                "parents": parents,
                "files": {p: f.sha256 for p, f in files.items()},
            },
            sort_keys=True,
        ).encode()
        cid = hashlib.sha1(ident).hexdigest()
        repo["commits"][cid] = Commit(cid, title, message, date, parents, files, card, [AUTHOR])
        return cid

    def commit_tree(self, repo: dict, title: str, date: str, files: dict[str, bytes], parent: str | None) -> str:
        """A commit whose files are exactly ``files`` (the ones of the parent that it lacks are deleted)."""
        cid = self.commit(repo, title, date, files, parent)
        commit = repo["commits"].pop(cid)
        commit.files = {p: f for p, f in commit.files.items() if p in files}
        ident = json.dumps({"from": cid, "files": sorted(commit.files)}, sort_keys=True).encode()
        commit.id = hashlib.sha1(ident).hexdigest()
        repo["commits"][commit.id] = commit
        return commit.id

    def new_repo(self, repo_id: str, gated=False) -> dict:
        repo = {"id": repo_id, "commits": {}, "branches": {}, "tags": {}, "prs": {}, "gated": gated, "vanished": {}}
        self.repos[repo_id] = repo
        return repo

    def finish(self) -> HubData:
        repos = {}
        for rid, r in self.repos.items():
            repos[rid] = RepoData(
                rid, r["commits"], r["branches"], r["tags"], r["prs"], r["gated"], False, r["vanished"]
            )
        hub = HubData(self.root or "", repos)
        if self.root is not None:
            save_hub(hub)
        return hub


def build_hub(root: str | None, shard_count: int = 3, shard_bytes: int = 256 * 1024) -> HubData:
    """Write the fixture repos under `root` (created if needed) and return their HubData.

    The module constants QUANT_PIN/BASE_PIN/SQUASHED_PIN hold for the default shard_count/shard_bytes;
    with other sizes ask the returned HubData (`hub.pin(QUANT, "v1.0")`). root=None writes nothing.
    """
    b = _Builder(root)
    c = _contents(shard_count, shard_bytes)
    config = _json(QUANT_CONFIG)

    # QUANT
    q = b.new_repo(QUANT)
    c1 = b.commit(
        q,
        "Initial upload",
        "2026-01-05T10:00:00.000Z",
        {"config.json": config, "README.md": c["readme1"]},
        None,
        card=QUANT_CARD,
    )
    shard_changes = dict(c["shards"])
    shard_changes["model.safetensors.index.json"] = c["index"]
    shard_changes.update(c["engram"])
    c2 = b.commit(q, "Add EXL3 shards", "2026-01-06T11:30:00.000Z", shard_changes, c1, message="2.9 bpw, head 6 bpw")
    c3 = b.commit(q, "Update README", "2026-01-07T09:15:00.000Z", {"README.md": c["readme3"]}, c2)
    pr = b.commit(
        q,
        "Add usage example (#1)",
        "2026-01-08T08:00:00.000Z",
        {"USAGE.md": b"# Usage\n\nexllamav3 --model dsv41-flash-exl3\n"},
        c3,
    )
    q["branches"] = {"main": c3, QUANT_SLASH_BRANCH: c2}
    q["tags"] = {"v1.0": c2}
    q["prs"] = {QUANT_PR_REF: pr}

    # BASE
    base = b.new_repo(BASE)
    readme = (_front_matter(BASE_CARD) + "\n# dsv41-flash base\n").encode()
    b1 = b.commit(
        base,
        "Initial commit",
        "2025-12-01T12:00:00.000Z",
        {"config.json": _json(BASE_CONFIG), "README.md": readme},
        None,
        card=BASE_CARD,
    )
    tok_config = {
        "bos_token": "<|begin|>",
        "eos_token": "<|end|>",
        "model_max_length": 131072,
        "tokenizer_class": "PreTrainedTokenizerFast",
        "chat_template": CHAT_TEMPLATE,
    }
    b2 = b.commit(
        base,
        "Upload tokenizer",
        "2025-12-02T12:00:00.000Z",
        {
            "tokenizer.json": _tokenizer_json(),
            "tokenizer_config.json": _json(tok_config),
            "special_tokens_map.json": _json({"bos_token": "<|begin|>", "eos_token": "<|end|>"}),
            "chat_template.jinja": CHAT_TEMPLATE.encode(),
        },
        b1,
    )
    base["branches"] = {"main": b2}

    # ORIGINAL: where the Engram tables come from (shards 47/48 + index + config)
    o = b.new_repo(ORIGINAL)
    o1 = b.commit(o, "Upload the original checkpoint", "2025-12-03T12:00:00.000Z", _original_files(), None,
                  card=BASE_CARD)
    o["branches"] = {"main": o1}

    # KIT: the kernel kit, in folder kit/
    k = b.new_repo(KIT)
    k1 = b.commit(k, "Kernel kit for the TP2 lane", "2026-01-09T12:00:00.000Z", _kit_files(), None)
    k["branches"] = {"main": k1}

    # SQUASHED: same files as QUANT main, history squashed into one commit
    s = b.new_repo(SQUASHED)
    s_changes = {p: b.read(f.sha256) for p, f in q["commits"][c3].files.items()}
    s1 = b.commit(s, SQUASH_TITLE, "2026-02-01T00:00:00.000Z", s_changes, None, card=QUANT_CARD)
    s["branches"] = {"main": s1}
    s["tags"] = {"v0": s1}
    old_pin = hashlib.sha1((f"{SQUASHED}@{SQUASHED_PIN_OLD_TITLE}").encode()).hexdigest()
    s["vanished"] = {old_pin: {"title": SQUASHED_PIN_OLD_TITLE, "date": "2026-01-06T11:30:00.000Z"}}

    # GATED
    g = b.new_repo(GATED, gated="manual")
    small = safetensors_file([("w", "F16", [64], _stream("gated", 128))])
    g1 = b.commit(
        g,
        "Initial upload",
        "2026-01-10T10:00:00.000Z",
        {
            "config.json": config,
            "README.md": (_front_matter(GATED_CARD) + "\n# gated\n").encode(),
            "model.safetensors": small,
        },
        None,
        card=GATED_CARD,
    )
    g["branches"] = {"main": g1}

    # SWITCH: two revisions of a small store, for switching a store from one to the other
    w = b.new_repo(SWITCH)
    shard = 64 * 1024
    w1 = b.commit(
        w,
        "Revision a",
        "2026-01-11T10:00:00.000Z",
        {
            "config.json": _json(BASE_CONFIG),
            "README.md": b"# switch\n\nrevision a\n",
            "shard-1.safetensors": safetensors_file([("w1", "I8", [shard], _stream("switch-1", shard))]),
            "shard-2.safetensors": safetensors_file([("w2", "I8", [shard], _stream("switch-2a", shard))]),
            "extra/a-only.bin": _stream("switch-a-only", 4096),
        },
        None,
    )
    b_files = {p: b.read(f.sha256) for p, f in w["commits"][w1].files.items() if p != "extra/a-only.bin"}
    b_files.update(
        {
            "README.md": b"# switch\n\nrevision b, with a longer README\n",
            "shard-2.safetensors": safetensors_file([("w2", "I8", [shard], _stream("switch-2b", shard))]),
            "b-only.bin": _stream("switch-b-only", 8192),
        }
    )
    w2 = b.commit_tree(w, "Revision b", "2026-01-12T10:00:00.000Z", b_files, w1)
    w["branches"] = {"main": w2}
    w["tags"] = {"a": w1, "b": w2}

    return b.finish()


# --------------------------------------------------------------------------- (de)serialising


def save_hub(hub: HubData) -> None:
    doc = {}
    for rid, r in hub.repos.items():
        doc[rid] = {
            "gated": r.gated,
            "private": r.private,
            "branches": r.branches,
            "tags": r.tags,
            "pull_requests": r.pull_requests,
            "vanished": r.vanished,
            "commits": [
                {
                    "id": c.id,
                    "title": c.title,
                    "message": c.message,
                    "date": c.date,
                    "parents": c.parents,
                    "authors": c.authors,
                    "card_data": c.card_data,
                    "files": {p: f.to_json() for p, f in c.files.items()},
                }
                for c in sorted(r.commits.values(), key=lambda c: c.date, reverse=True)
            ],
        }
    tmp = os.path.join(hub.root, f"{HUB_JSON}.tmp{os.getpid()}")
    with open(tmp, "w") as fh:
        json.dump(doc, fh, indent=1)
    os.replace(tmp, os.path.join(hub.root, HUB_JSON))


def load_hub(root: str) -> HubData:
    """Read a hub written by build_hub()/save_hub()."""
    with open(os.path.join(root, HUB_JSON)) as fh:
        doc = json.load(fh)
    repos = {}
    for rid, r in doc.items():
        commits = {}
        for c in r["commits"]:
            files = {}
            for p, f in c["files"].items():
                entry = FileEntry(p, f["sha256"], f["size"], f["lfs"])
                entry.blob_id = f["blob_id"]
                files[p] = entry
            commits[c["id"]] = Commit(
                c["id"], c["title"], c["message"], c["date"], c["parents"], files, c["card_data"], c["authors"]
            )
        repos[rid] = RepoData(
            rid, commits, r["branches"], r["tags"], r["pull_requests"], r["gated"], r["private"], r["vanished"]
        )
    return HubData(root, repos)


def build_or_load_hub(root: str, **kwargs) -> HubData:
    if os.path.exists(os.path.join(root, HUB_JSON)) and not kwargs:
        return load_hub(root)
    return build_hub(root, **kwargs)


def _compute_pins():
    hub = build_hub(None)
    return (hub.pin(QUANT, "v1.0"), hub.pin(BASE), next(iter(hub.repos[SQUASHED].vanished)), hub.pin(ORIGINAL),
            hub.pin(KIT), hub.pin(SWITCH, "a"), hub.pin(SWITCH, "b"))


QUANT_PIN, BASE_PIN, SQUASHED_PIN, ORIGINAL_PIN, KIT_PIN, SWITCH_A, SWITCH_B = _compute_pins()


def quant_args(local_dir, **extra):
    """hub_snapshot's arguments for the fixture quant at its pin into ``local_dir``, plus ``extra`` (unit tests)."""
    args = {"repo_id": QUANT, "revision": QUANT_PIN, "local_dir": str(local_dir)}
    args.update(extra)
    return args
