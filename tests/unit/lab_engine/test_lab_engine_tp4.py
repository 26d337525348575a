# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab engine as the TP4 branch (`-Dfamily=tp4`), run with the launch lines of the shipped TP4 recipe.

Four ranks on 127.0.0.1: the recipe's follower line and environment (roles/recipe/recipes/dsv41-flash-tp4-zig.yml,
rendered by the recipe_render filter as the roles render it) for ranks 3, 2 and 1, then rank 0; the server answers.
The TP2 build refuses the TP4 follower's flags, and rank 0 refuses a follower whose pool is not its window.
"""

from __future__ import annotations

import os
import pathlib
import socket
import subprocess

import pytest
import yaml
from ansible_collections.sparkfold.cluster.plugins.filter.recipe import recipe_render

from tests.labengine import ENGINE, HOST, SIM_ENV, build, request
from tests.unit.lab_engine.test_lab_engine import Cluster, refused

ROOT = pathlib.Path(__file__).resolve().parents[3]
TP4 = yaml.safe_load((ROOT / "roles" / "recipe" / "recipes" / "dsv41-flash-tp4-zig.yml").read_text())
CONTEXT = 4096
WINDOW = 8192


@pytest.fixture(scope="module")
def tp4_bin(tmp_path_factory):
    return build(ENGINE, tmp_path_factory.mktemp("engine-tp4"), extra=("-Dfamily=tp4",))


class Tp4(Cluster):
    """Four ranks whose command lines and environment are the TP4 recipe's, filled in for this machine."""

    def __init__(self, bin_dir, tmp, window=WINDOW):
        super().__init__(bin_dir, tmp, world=4, parallel=4, context=CONTEXT)
        self.window = window

    def values(self, rank):
        node = self.nodes[rank]
        serve = TP4["serve"]
        return {
            "model_dir": str(self.model), "rank_cache_dir": str(node / "rank-cache"), "kit_dir": str(self.kit),
            "engram_dir": str(self.engram), "token_map": str(node / "dsv41_token_map.json"), "rank": rank,
            "world": 4, "master": HOST, "rendezvous_port": self.tp_port, "rdma_devices": "rocep1s0f1,roceP2p1s0f1",
            "host": HOST, "port": self.port, "served_name": "dsv41-tp4", "context": CONTEXT, "parallel": 4,
            "streams": serve["streams"], "window": self.window, "round_rows": serve["round_rows"],
            "max_tokens": 1024, "temperature": serve["temperature"], "top_p": serve["top_p"],
            "top_k": serve["top_k"], "backend": serve["backend"], "api_key_args": [], "thinking_args": ["--thinking"],
            "drafts_args": [], "follower_drafts_args": [],
        }

    def env_of(self, rank):
        launch = TP4["launch"]
        own = launch["rank0"]["env"] if rank == 0 else launch["follower"]["env"]
        return {**os.environ, **SIM_ENV, **recipe_render({**launch["env"], **own}, self.values(rank))}

    def rank0_command(self):
        return [str(self.native), *recipe_render(TP4["launch"]["rank0"]["args"], self.values(0))]

    def follower_args(self, rank):
        return [str(self.bin_dir / "tf-dsv41-lanes"),
                *recipe_render(TP4["launch"]["follower"]["args"], self.values(rank))]

    def start_rank0(self):
        with open(self.tmp / "rank0.log", "w") as log:
            self.rank0 = subprocess.Popen(self.rank0_command(), env=self.env_of(0), stderr=log)

    def start_follower(self, rank):
        with open(self.tmp / f"rank{rank}.log", "w") as log:
            self.followers[rank] = subprocess.Popen(self.follower_args(rank), env=self.env_of(rank), stderr=log)

    def run_follower(self, rank=1, args=None, timeout=10):
        return subprocess.run(args or self.follower_args(rank), env=self.env_of(rank), capture_output=True, text=True,
                              timeout=timeout, check=False)


@pytest.fixture
def tp4(tp4_bin, tmp_path):
    c = Tp4(tp4_bin, tmp_path)
    yield c
    c.stop()


def test_the_tp4_recipe_starts_followers_3_2_1_then_rank_0_and_serves(tp4):
    for rank in (3, 2, 1):
        tp4.start_follower(rank)
    tp4.start_rank0()
    tp4.wait_ready(timeout=30)
    status, body = request(tp4.port, "POST", "/v1/chat/completions",
                           {"messages": [{"role": "user", "content": "What is 17 * 23?"}], "max_tokens": 64})
    assert status == 200, body
    assert "391" in body["choices"][0]["message"]["content"]
    assert "all 3 follower(s) joined" in tp4.log(0)
    for rank in (1, 2, 3):
        assert f"rank={rank} world=4" in tp4.log(rank)


def test_rank0_listens_on_port_plus_g_minus_1_for_follower_g(tp4):
    """bertholomus/TensorFold zig/src/families/dsv41/prompt2d.zig (store id 70185293164) `Fan.open`: rank 0 listens on
    PORT + g - 1 for follower g; each follower, given rank 0's PORT, connects to its own (TP4: 29760, 29761, 29762)."""
    for rank in (3, 2, 1):
        tp4.start_follower(rank)
    tp4.start_rank0()
    tp4.wait_ready(timeout=30)
    for g in (1, 2, 3):
        assert f"waiting for follower rank {g} on {HOST}:{tp4.tp_port + g - 1}" in tp4.log(0)
        assert f"joined rank 0 at {HOST}:{tp4.tp_port + g - 1} as rank {g} of 4" in tp4.log(g)


def test_rank0_stops_when_a_followers_port_is_taken(tp4):
    with socket.socket() as taken:
        taken.bind((HOST, tp4.tp_port + 2))
        taken.listen(1)
        done = subprocess.run(tp4.rank0_command(), env=tp4.env_of(0), capture_output=True, text=True, timeout=20,
                              check=False)
    assert done.returncode == 1, done.stderr
    assert f"cannot listen for followers on {HOST}:{tp4.tp_port + 2}" in done.stderr


def test_a_follower_on_another_followers_port_is_refused(tp4):
    tp4.start_rank0()
    args = tp4.follower_args(2)
    args[args.index(str(tp4.tp_port))] = str(tp4.tp_port - 1)  # rank 2 + (PORT - 1) - 1: follower 1's port
    refused(tp4.run_follower(rank=2, args=args, timeout=20),
            "rank 2 connected on follower rank 1's port: rank 0 listens on PORT + g - 1 for follower g")


def test_the_tp2_follower_refuses_the_tp4_flags(engine_bin, tp4):
    args = tp4.follower_args(1)
    args[0] = str(pathlib.Path(engine_bin) / "tf-dsv41-lanes")
    done = tp4.run_follower(args=args)
    assert done.returncode == 1 and done.stderr.strip().endswith("error: BadArgument"), done.stderr


def test_the_tp4_follower_refuses_a_context_beyond_its_pool(tp4):
    args = tp4.follower_args(1)
    args[len(args) - 1 - args[::-1].index("--pool") + 1] = str(CONTEXT // 2)
    refused(tp4.run_follower(args=args), f"--context {CONTEXT} is more than --pool {CONTEXT // 2}")


def test_rank0_refuses_a_window_smaller_than_the_context(tp4_bin, tmp_path):
    c = Tp4(tp4_bin, tmp_path, window=CONTEXT // 2)
    try:
        done = subprocess.run(c.rank0_command(), env=c.env_of(0), capture_output=True, text=True, timeout=10,
                              check=False)
        refused(done, f"TF_DS_WINDOW {CONTEXT // 2} is less than --context {CONTEXT}")
    finally:
        c.stop()


def test_rank0_refuses_a_follower_whose_pool_is_not_its_window(tp4):
    # rank 1 keeps the recipe's first --pool (the context) instead of the shared window
    args = tp4.follower_args(1)
    last = len(args) - 1 - args[::-1].index("--pool")
    del args[last:last + 2]
    del args[args.index("--context"):args.index("--context") + 2]
    for rank in (3, 2):
        tp4.start_follower(rank)
    with open(tp4.tmp / "rank1.log", "w") as log:
        tp4.followers[1] = subprocess.Popen(args, env=tp4.env_of(1), stderr=log)
    tp4.start_rank0()
    assert tp4.followers[1].wait(timeout=30) == 2
    assert f"rank 1's --pool {CONTEXT} is not rank 0's TF_DS_WINDOW {WINDOW}" in tp4.log(0)


def test_node_inputs_make_four_rank_caches(tp4_bin, tmp_path):
    c = Tp4(tp4_bin, tmp_path)
    names = sorted(p.name for rank in range(4) for p in (c.nodes[rank] / "rank-cache").iterdir())
    # made by the installed node_inputs.sh (the harness's node_inputs, in Cluster.__init__), WORLD 4
    assert [n.split("-")[0] for n in names] == ["rank0of4", "rank1of4", "rank2of4", "rank3of4"]
