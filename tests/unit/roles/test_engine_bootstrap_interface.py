# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A ring's ranks bootstrap NCCL and Gloo on the interface the fabric role named, also in a run without the fabric
play (site.yml --tags engine, playbooks/engine.yml): the engine_service role reads the fabric role's record of it on
the node (SPARKFOLD_BOOTSTRAP_IFNAME of fabric.env, through engine_node_facts), and refuses a ring recipe, before
anything is written, where there is none. Before, such a run rendered the containers' NCCL_SOCKET_IFNAME and
GLOO_SOCKET_IFNAME empty and restarted the ranks with them.

The ring lab's inventory (inventory/lab-ring: four nodes, the SGLang ring recipe) and the vLLM pair's
(inventory/lab-vllm) are loaded as they are, with local connections: the recipe role, then the engine_service role's
node read (tasks/node_read.yml, imported by its main.yml), then its container environment template, written as
container.yml writes it. No lab is needed: only the fabric environment files under a temporary directory are read."""

from __future__ import annotations

import json
import sys

from tests.unit.playbook import REPO, run_playbook, task_result

PLAY = """
- name: The engine_service role's read and container environment, without the fabric role
  hosts: sparks
  gather_facts: false
  roles:
    - role: sparkfold.cluster.recipe
  tasks:
    - name: Stand in for the fabric role run earlier in this run, where the test says it ran
      ansible.builtin.set_fact:
        fabric_bootstrap_interface_result: "{{ fabric_ran[inventory_hostname] }}"
      when: inventory_hostname in fabric_ran
    - name: Read the node as engine_service does
      ansible.builtin.include_role:
        name: sparkfold.cluster.engine_service
        tasks_from: node_read
        public: true
    - name: Write the container's environment as engine_service does
      ansible.builtin.copy:
        content: "{{ lookup('ansible.builtin.template', templates ~ '/engine-container.env.j2') }}"
        dest: "{{ out_dir }}/{{ inventory_hostname }}.container.env"
        mode: "0600"
"""

RING = REPO / "inventory" / "lab-ring"
PAIR = REPO / "inventory" / "lab-vllm"
HOSTS = ("spark-a", "spark-b", "spark-c", "spark-d")


def fabric_env(interface):
    """A ring node's fabric.env as the fabric role writes it (roles/fabric/templates/fabric.env.j2), in part."""
    return (f"# Ansible managed\nSPARKFOLD_FABRIC_INDEX=0\nSPARKFOLD_BOOTSTRAP_IFNAME={interface}\n"
            f"NCCL_SOCKET_IFNAME=={interface}\nGLOO_SOCKET_IFNAME={interface}\nNCCL_IB_HCA==rocep1s0f0,rocep1s0f1\n")


def converge(tmp_path, inventory, records, **extra):
    """Run the play with each host's fabric.env under tmp_path holding ``records[host]`` (absent when missing)."""
    out = tmp_path / "out"
    out.mkdir()
    for host, text in records.items():
        (tmp_path / f"{host}.fabric.env").write_text(text)
    (tmp_path / "play.yml").write_text(PLAY)
    variables = {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
        "fabric_env_file": str(tmp_path) + "/{{ inventory_hostname }}.fabric.env",
        "engine_service_serving_dir": str(tmp_path / "serving"), "recipe_model_dir": str(tmp_path / "model"),
        "templates": str(REPO / "roles" / "engine_service" / "templates"), "out_dir": str(out),
        "ansible_managed": "managed", "engine_service_gid_index": None, "engine_service_gid_reason": "none here",
        "fabric_ran": {}, **extra,
    }
    proc = run_playbook(tmp_path / "play.yml", inventory, tmp_path, ["-e", json.dumps(variables)])
    return proc, out


def container_env(out, host):
    lines = (out / f"{host}.container.env").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def test_without_the_fabric_role_each_rank_bootstraps_on_the_interface_it_recorded(tmp_path):
    records = {host: fabric_env("enP7s7") for host in HOSTS}
    records["spark-c"] = fabric_env("eth7")
    proc, out = converge(tmp_path, RING, records)
    assert proc.returncode == 0, proc.stdout[-4000:]
    for host in HOSTS:
        env = container_env(out, host)
        interface = "eth7" if host == "spark-c" else "enP7s7"
        assert (env["NCCL_SOCKET_IFNAME"], env["GLOO_SOCKET_IFNAME"]) == (interface, interface), host


def test_a_ring_node_without_a_record_is_refused_before_anything_is_written(tmp_path):
    records = {host: fabric_env("enP7s7") for host in HOSTS if host != "spark-d"}
    # A fabric.env the fabric role wrote for a pair names no bootstrap interface: no record either.
    records["spark-b"] = "SPARKFOLD_FABRIC_INDEX=1\nNCCL_SOCKET_IFNAME==enp1s0f1np1\nGLOO_SOCKET_IFNAME=enp1s0f1np1\n"
    proc, out = converge(tmp_path, RING, records)
    assert proc.returncode != 0
    text = " ".join(proc.stdout.split())
    assert "The ring's bootstrap interface: 2 problem(s) on spark-a, spark-b, spark-c, spark-d:" in text, text[-3000:]
    for host in ("spark-b", "spark-d"):
        assert (f"- {host}: no bootstrap interface for the ranks' NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME: the "
                f"fabric role did not run in this run, {tmp_path}/{host}.fabric.env holds no "
                "SPARKFOLD_BOOTSTRAP_IFNAME and fabric_bootstrap_interface is not set") in text
    assert "Run the fabric play first (site.yml without --tags, or --tags fabric,engine)" in text
    assert "or set fabric_bootstrap_interface to the management interface" in text
    assert list(out.iterdir()) == []


def test_the_fabric_role_s_fact_of_this_run_else_its_record_else_the_inventory_s_value(tmp_path):
    # spark-a: the fabric role ran earlier in this run (in check mode it named eth5 and has not written its record
    # yet): its fact. spark-b: a run without the fabric role: its record, not the inventory's value. spark-c and
    # spark-d, nodes it never configured, with fabric_bootstrap_interface in the inventory: that value.
    records = {"spark-a": fabric_env("enP7s7"), "spark-b": fabric_env("enP7s7")}
    proc, out = converge(tmp_path, RING, records, fabric_bootstrap_interface="eth9", fabric_ran={"spark-a": "eth5\n"})
    assert proc.returncode == 0, proc.stdout[-4000:]
    found = {host: (container_env(out, host)["NCCL_SOCKET_IFNAME"], container_env(out, host)["GLOO_SOCKET_IFNAME"])
             for host in HOSTS}
    assert found == {"spark-a": ("eth5", "eth5"), "spark-b": ("enP7s7", "enP7s7"), "spark-c": ("eth9", "eth9"),
                     "spark-d": ("eth9", "eth9")}


def test_a_pair_recipe_needs_no_record(tmp_path):
    # The vLLM pair's recipe bootstraps on rail 0 ({fabric_interface}), not {bootstrap_interface}: no fabric.env,
    # no fabric role, nothing refused.
    proc, out = converge(tmp_path, PAIR, {}, engine_service_gid_index=3)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert task_result(proc.stdout, "The ring's bootstrap interface", "common") == "skipping"
    for host in ("spark-a", "spark-b"):
        env = container_env(out, host)
        assert (env["NCCL_SOCKET_IFNAME"], env["GLOO_SOCKET_IFNAME"]) == ("enp1s0f1np1", "enp1s0f1np1"), host
