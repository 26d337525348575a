# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for module_utils/filesystems (read_files' filesystem_paths): the kernel's mountinfo format parsed."""

from ansible_collections.sparkfold.cluster.plugins.module_utils import filesystems

# Lines in the format of Documentation/filesystems/proc.rst section 3.5 (the first is its example): optional fields
# of every kind, none at all, and the four characters the kernel escapes (space, tab, newline, backslash).
MOUNTINFO = (
    "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n"
    "37 36 0:40 / /srv/a\\040b\\011c\\012d\\134e rw shared:2 master:1 propagate_from:3 unbindable - fuse.sshfs"
    " user@head:/srv\\040models rw\n"
    "\n"
    "38 36 0:41 / /srv rw - nfs4 head:/srv rw,vers=4.2\n"
)


def test_every_mountinfo_line_is_parsed_with_its_escapes_decoded():
    mounts, problem = filesystems.parse_mountinfo(MOUNTINFO)
    assert problem is None
    assert mounts == [
        {"mount_point": "/mnt2", "type": "ext3", "source": "/dev/root"},
        {"mount_point": "/srv/a b\tc\nd\\e", "type": "fuse.sshfs", "source": "user@head:/srv models"},
        {"mount_point": "/srv", "type": "nfs4", "source": "head:/srv"},
    ]


def test_a_line_without_the_separator_is_a_problem_naming_it():
    mounts, problem = filesystems.parse_mountinfo("27 1 254:0 / / rw,relatime ext4 /dev/vda rw\n")
    assert mounts is None
    assert problem == ("line 1 is not a mountinfo line (no '-' separator or too few fields):"
                       " '27 1 254:0 / / rw,relatime ext4 /dev/vda rw'")


def test_the_longest_mount_point_holds_a_path_and_the_later_of_two_on_one_point():
    mounts = [{"mount_point": "/", "type": "ext4", "source": "a"},
              {"mount_point": "/srv", "type": "xfs", "source": "b"},
              {"mount_point": "/srv", "type": "overlay", "source": "c"},
              {"mount_point": "/srv/models", "type": "nfs4", "source": "d"}]
    assert filesystems.holding_mount("/srv/models/dsv41", mounts)["source"] == "d"
    assert filesystems.holding_mount("/srv/models", mounts)["source"] == "d"
    assert filesystems.holding_mount("/srv/modelsx", mounts)["source"] == "c"
    assert filesystems.holding_mount("/srvx", mounts)["source"] == "a"
    assert filesystems.holding_mount("/", mounts)["source"] == "a"


def test_a_link_to_nothing_is_measured_at_its_parent(tmp_path):
    (tmp_path / "store").symlink_to(tmp_path / "gone")
    assert filesystems.nearest_existing(str(tmp_path / "store" / "models")) == str(tmp_path)
    assert filesystems.nearest_existing("/") == "/"
