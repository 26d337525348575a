# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A stand-in `podman` (and `rsync`) for tests/unit/roles/test_engine_image_role.py: a node's images are a JSON file.

$FAKE_PODMAN_STATE/images.json maps each tag the node holds to its image ID. Knows `image exists` (exit 0 held, 1
not), `image inspect` (a JSON list with the Id, or the Id alone with --format; exit 125 when not held), `pull` (the
ID a hash of the reference), `tag`, `save --output FILE TAG` and `load --input FILE` (the archive is the JSON
{tag: id}). Every call is logged, one JSON list a line, in $FAKE_PODMAN_STATE/calls.log.

Called with `--rsync` first (as `rsync`), it copies the file of its `user@host:path` source from $FAKE_RSYNC_FROM
(the head's image directory: the test's nodes are one machine) into its destination directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import shutil
import sys


def rsync(argv):
    source = next(arg for arg in argv if "@" in arg and ":" in arg)
    name = pathlib.Path(source.split(":", 1)[1]).name
    shutil.copy(pathlib.Path(os.environ["FAKE_RSYNC_FROM"]) / name, pathlib.Path(argv[-1]) / name)
    return 0


def podman(argv):
    state = pathlib.Path(os.environ["FAKE_PODMAN_STATE"])
    state.mkdir(parents=True, exist_ok=True)
    with open(state / "calls.log", "a", encoding="utf-8") as log:
        log.write(json.dumps(argv) + "\n")
    path = state / "images.json"
    images = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    command = argv[:2] if argv[0] == "image" else argv[:1]
    if command == ["image", "exists"]:
        return 0 if argv[2] in images else 1
    if command == ["image", "inspect"]:
        if argv[-1] not in images:
            print(f"Error: {argv[-1]}: image not known", file=sys.stderr)
            return 125
        # --format {{.Id}}: the ID alone
        image = images[argv[-1]]
        print(image if "--format" in argv else json.dumps([{"Id": image, "RepoTags": [argv[-1]]}]))
        return 0
    if command == ["pull"]:
        images[argv[1]] = hashlib.sha256(argv[1].encode()).hexdigest()
    elif command == ["tag"]:
        if argv[1] not in images:
            print(f"Error: {argv[1]}: image not known", file=sys.stderr)
            return 125
        images[argv[2]] = images[argv[1]]
    elif command == ["save"]:
        pathlib.Path(argv[argv.index("--output") + 1]).write_text(json.dumps({argv[-1]: images[argv[-1]]}))
    elif command == ["load"]:
        images.update(json.loads(pathlib.Path(argv[argv.index("--input") + 1]).read_text(encoding="utf-8")))
    else:
        print(f"fake podman: {' '.join(argv)} is not known here", file=sys.stderr)
        return 125
    path.write_text(json.dumps(images))
    return 0


if __name__ == "__main__":
    sys.exit(rsync(sys.argv[2:]) if sys.argv[1:2] == ["--rsync"] else podman(sys.argv[1:]))
