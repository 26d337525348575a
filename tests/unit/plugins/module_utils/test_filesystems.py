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
    "38 36 0:41 / /srv rw - nfs4 head:/srv rw,vers=4.2,proto=rdma,port=20049\n"
)


def test_every_mountinfo_line_is_parsed_with_its_escapes_decoded():
    mounts, problem = filesystems.parse_mountinfo(MOUNTINFO)
    assert problem is None
    assert mounts == [
        {"mount_point": "/mnt2", "type": "ext3", "source": "/dev/root",
         "options": ["rw", "noatime", "errors=continue"]},
        {"mount_point": "/srv/a b\tc\nd\\e", "type": "fuse.sshfs", "source": "user@head:/srv models",
         "options": ["rw"]},
        # the mount's own options, then the superblock's (where NFS keeps proto= and port=), rw once
        {"mount_point": "/srv", "type": "nfs4", "source": "head:/srv",
         "options": ["rw", "vers=4.2", "proto=rdma", "port=20049"]},
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


FSTAB = (
    "# /etc/fstab: static file system information.\n"
    "UUID=3e6b / ext4 defaults 0 1\n"
    "\n"
    "  10.77.0.1:/srv/models\t/srv/my\\040models  nfs  _netdev,proto=rdma,port=20049 0 0\n"
    "tmpfs /scratch\n"
    "lonely\n"
)


def test_fstab_entries_are_parsed_with_their_escapes_decoded():
    assert filesystems.parse_fstab(FSTAB) == [
        {"source": "UUID=3e6b", "mount_point": "/", "type": "ext4", "options": ["defaults"]},
        {"source": "10.77.0.1:/srv/models", "mount_point": "/srv/my models", "type": "nfs",
         "options": ["_netdev", "proto=rdma", "port=20049"]},
        {"source": "tmpfs", "mount_point": "/scratch", "type": None, "options": []},
    ]


def test_mounted_at_names_what_the_kernel_and_fstab_mount_exactly_there(tmp_path):
    (tmp_path / "mountinfo").write_text(
        MOUNTINFO + "39 38 0:42 / /srv/my\\040models rw,relatime - nfs4 10.77.0.1:/srv/models rw,proto=rdma\n")
    (tmp_path / "fstab").write_text(FSTAB)
    found, problems = filesystems.mounted_at(["/srv/my models", "/srv/", "/srv/other"], str(tmp_path / "mountinfo"),
                                             str(tmp_path / "fstab"))
    assert problems == []
    assert [m["source"] for m in found["/srv/my models"]["kernel"]] == ["10.77.0.1:/srv/models"]
    assert found["/srv/my models"]["kernel"][0]["options"] == ["rw", "relatime", "proto=rdma"]
    assert [m["source"] for m in found["/srv/my models"]["fstab"]] == ["10.77.0.1:/srv/models"]
    # a mount point given with a trailing slash is the same point; one that holds nothing has empty lists
    assert [m["source"] for m in found["/srv/"]["kernel"]] == ["head:/srv"] and found["/srv/"]["fstab"] == []
    assert found["/srv/other"] == {"kernel": [], "fstab": []}


def test_mounted_at_without_fstab_has_no_entries_and_without_a_mount_table_a_problem(tmp_path):
    (tmp_path / "mountinfo").write_text(MOUNTINFO)
    found, problems = filesystems.mounted_at(["/srv"], str(tmp_path / "mountinfo"), str(tmp_path / "no-fstab"))
    assert problems == [] and found["/srv"]["fstab"] == [] and len(found["/srv"]["kernel"]) == 1
    found, problems = filesystems.mounted_at(["/srv"], str(tmp_path / "no-mountinfo"), str(tmp_path / "fstab"))
    assert found == {} and problems == [f"{tmp_path / 'no-mountinfo'}: No such file or directory"]
