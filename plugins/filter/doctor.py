# Copyright: sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The doctor's judgement of one node: what doctor_facts read, against the fabric plan and the recipe.

Documentation lives in the sidecar file next to this one (doctor_report.yml). Every finding that
is not ok says what to do; checks the lab cannot make say so (state n/a).
"""

from __future__ import annotations

import re
import textwrap

from ansible.errors import AnsibleFilterError

GIB = 1024 ** 3
LAB = "not available in the lab"
# The widest line of a table or of the verdict: Ansible's default callback (result_format yaml) prints a
# multi-line msg 8 columns in, so every line fits a terminal of 100 columns.
WIDTH = 92
# The check column is at most this wide; a longer check name takes a line of its own.
CHECK_WIDTH = 30
_VERSION_RE = re.compile(r"^(\d+(?:\.\d+)*)")


def _gib(value):
    return f"{value / GIB:.1f} GiB"


def _version(text):
    """'2.29.3-1+cuda13.0' -> (2, 29, 3); None when it has no version."""
    match = _VERSION_RE.match(str(text or "").rsplit(":", maxsplit=1)[-1])
    return tuple(int(part) for part in match.group(1).split(".")) if match else None


class Report:
    def __init__(self, expect):
        self.e = expect
        self.rows = []
        inventory = expect.get("inventory") or "<inventory>"
        self.play = f"ansible-playbook -i {inventory} playbooks/"
        # The command that checks the cables and the pings: a ring's fabric play reads who faces each port and pings
        # each neighbour on every run; a pair's or switch's checks each rail's link, MTU and address on every run,
        # and who answers over each rail (every peer pinged) only after a change or with fabric_verify=always.
        if any("link" in rail for rail in expect.get("rails") or []):
            self.fabric_check = (f"{self.play}fabric.yml checks every cable on every run, before it changes anything, "
                                 "and names the fewest cable moves (or the fabric_host_index renumbering)")
        else:
            self.fabric_check = (f"{self.play}fabric.yml -e fabric_verify=always pings every peer on every rail and "
                                 "names each that fails (a run without it checks only each rail's link, MTU and "
                                 "address)")

    def add(self, check, ok, seen, want="", advice="", journal=None, na=False, lab=False):
        """A row; ``na``: not checked (n/a), ``lab``: not checked because the lab cannot show it (lab-only)."""
        state = "n/a" if na or lab else ("ok" if ok else "FAIL")
        self.rows.append({"check": check, "state": state, "seen": seen, "want": want, "lab_only": bool(lab),
                          "advice": "" if state == "ok" else advice, "journal": journal or []})

    # --- the fabric ------------------------------------------------------------------------
    def rails(self, facts):
        roce = facts.get("roce") or {}
        netdevs = roce.get("netdevs") or {}
        lab = self.e.get("lab", False)
        for rail in self.e.get("rails", []):
            iface, label = rail["interface"], f"{rail['name']} {rail['interface']}"
            nd = netdevs.get(iface)
            have = (facts.get("addresses") or {}).get(iface, [])
            if nd is None:
                self.add(f"{label} link", False, "no such interface", f"MTU {rail['mtu']}, {rail['address_cidr']}",
                         f"the CX7 twin is missing (have: {', '.join(sorted(netdevs))}): is the mlx5 driver loaded? "
                         "fix fabric_rails in the inventory if the cable sits in the other port")
                continue
            speed_want = int(self.e.get("speed_mbps", 200000))
            problems = []
            if nd.get("operstate") != "up":
                problems.append(f"the link is {nd.get('operstate')}: check the cable and both ends "
                                f"(ip link set dev {iface} up)")
            if nd.get("mtu") != rail["mtu"]:
                problems.append(f"MTU {nd.get('mtu')} is not the plan's {rail['mtu']}: {self.play}fabric.yml "
                                f"sets it with netplan on every node (or `netplan apply` on {self.e['host']})")
            if not lab and nd.get("speed") != speed_want:
                problems.append(f"it links at {nd.get('speed')} Mb/s: a link stuck low after boot needs a "
                                "power cycle of both Sparks; check the cable")
            if rail["address_cidr"] not in have:
                problems.append(f"{rail['address_cidr']} is not on {iface}: {self.play}fabric.yml puts the "
                                "planned address back")
            speed = f"speed {LAB}" if lab else f"{nd.get('speed')} Mb/s"
            self.add(f"{label} link", not problems,
                     f"{nd.get('operstate')}, MTU {nd.get('mtu')}, {speed}, {', '.join(have) or 'no IPv4'}",
                     f"up, MTU {rail['mtu']}{'' if lab else f', {speed_want} Mb/s'}, {rail['address_cidr']}",
                     "; ".join(problems))
            self.gid(rail, roce, lab)

    def gid(self, rail, roce, lab):
        label = f"{rail['name']} {rail['interface']} RoCE"
        if lab:
            self.add(label, True, f"RoCE port and GID index: {LAB}", lab=True)
            return
        dev = rail.get("rdma_device")
        port = (((roce.get("devices") or {}).get(dev) or {}).get("ports") or {}).get("1")
        entry = (roce.get("ipv4_gids") or {}).get(rail["address"])
        if port is None:
            self.add(label, False, f"no RDMA device {dev}", f"{dev} port 1 ACTIVE",
                     "is mlx5_ib loaded (lsmod; rdma link)? fix rdma_device in fabric_rails if the name differs")
            return
        problems = []
        if port.get("state") != "ACTIVE":
            problems.append(f"port 1 is {port.get('state')}: the link or the peer is down")
        if entry is None or entry.get("device") != dev:
            problems.append(f"no RoCE v2 GID holds {rail['address']} on {dev}: the address is missing from "
                            f"{rail['interface']} ({self.play}fabric.yml); NCCL finds the index by "
                            "NCCL_IB_ADDR_RANGE, never pin it")
        mtu = f", active_mtu {port['active_mtu']}" if port.get("active_mtu") is not None else ""
        seen = f"{port.get('state')}{mtu}, GID index " + (str(entry["index"]) if entry else "none")
        self.add(label, not problems, seen, f"ACTIVE, a RoCE v2 GID for {rail['address']}", "; ".join(problems))

    def cables(self):
        """Who faces each fabric port (fabric_neighbors, run on every node at once), against the plan: on a ring the
        neighbour on each cable, on a pair or switch every peer's port on the same subnet."""
        probe = self.e.get("cables")
        if probe is None:
            return
        host = self.e["host"]
        fix = self.fabric_check
        if not isinstance(probe, dict) or "neighbors" not in probe:
            msg = probe.get("msg") if isinstance(probe, dict) else probe
            self.add("cables", False, f"the cable probe failed: {msg}", "who faces each port", fix)
            return
        peers = self.e.get("peer_plans") or {}
        for rail in self.e.get("rails", []):
            iface = rail["interface"]
            want = sorted((peer, theirs["interface"], theirs["name"]) for peer, plan in peers.items()
                          for theirs in plan or []
                          if (theirs.get("cidr") or theirs["name"]) == (rail.get("cidr") or rail["name"]))
            names = {(peer, interface): f"{peer} {name} ({interface})" for peer, interface, name in want}
            heard = sorted({(h.get("host"), h.get("interface")) for h in (probe["neighbors"].get(iface) or [])})
            carrier = ((probe.get("links") or {}).get(iface) or {}).get("carrier")
            faces = [names.get(key) or (f"its own port {key[1]} (a loop on one node)" if key[0] == host
                                        else f"{key[0]} {key[1]}") for key in heard]
            if faces:
                seen = "faces " + ", ".join(faces)
            elif carrier is False:
                seen = "no link (no carrier): the cable is pulled, or the other end is down"
            else:
                seen = "hears no node (the peer's port is down, or the peer did not run the doctor)"
            wanted = ", ".join(names.values()) or "no peer on its subnet"
            self.add(f"{rail['name']} {iface} cable", heard == [(p, i) for p, i, _n in want], seen,
                     f"faces {wanted}", f"the cable in {host} {rail['name']} ({iface}) must go to {wanted}; {fix}")

    def pings(self, facts):
        for res in facts.get("pings") or []:
            self.add(f"ping {res.get('peer') or res['address']} via {res['interface']}", res.get("ok"),
                     "a don't-fragment frame of MTU {} crossed".format(res["size"] + 28) if res.get("ok")
                     else res.get("detail") or "no reply", f"{res['address']}, no fragmenting",
                     f"the frame did not cross {res.get('rail') or res['interface']}: see the cable row of "
                     f"{res['interface']} (who it faces) and the link rows of both nodes (MTU, address); "
                     f"{self.fabric_check}")

    # --- toolchain ---------------------------------------------------------------------------
    def toolchain(self, facts):
        if self.e.get("lab"):
            self.add("driver and NCCL", True, f"no GPU: {LAB}", lab=True)
            return
        gpu = facts.get("gpu") or {}
        branch = str(self.e.get("driver_branch", "580"))
        driver = gpu.get("driver_version")
        if gpu.get("error"):
            self.add("driver", False, gpu["error"], f"driver {branch}.x",
                     "the NVIDIA driver does not answer: reboot; if nvidia-smi still fails, reinstall the "
                     "driver (DGX OS updates; the cuda role never installs it)")
        else:
            self.add("driver", str(driver or "").startswith(branch + "."),
                     f"{driver} (CUDA {gpu.get('cuda_version')}), {', '.join(gpu.get('names') or []) or 'no GPU'}",
                     f"driver {branch}.x", f"the cuda role requires driver branch {branch}: install it "
                     "from DGX OS's updates and reboot")
        package = self.e.get("nccl_package", "libnccl2")
        have = (facts.get("packages") or {}).get(package)
        floor = self.e.get("nccl_min_aarch64", "2.29.3")
        gated = facts.get("machine") == "aarch64"
        ok = have is not None and (not gated or (_version(have) or ()) >= (_version(floor) or ()))
        self.add("NCCL", ok, f"{package} {have or 'not installed'} on {facts.get('machine')}",
                 f">= {floor}" if gated else "installed",
                 f"{self.play}toolchains.yml installs it (set cuda_nccl_version to pin); NCCL before {floor} "
                 "deadlocks after about 1.1 million collectives on aarch64")

    # --- memory, disk, stores ------------------------------------------------------------------
    def memory(self, facts, serving):
        mem = facts.get("memory") or {}
        avail = mem.get("available_bytes")
        gate = float(self.e["memory_gate_gib"]) * GIB
        floor = float(self.e["serving_floor_gib"]) * GIB
        if avail is None:
            self.add("memory", False, mem.get("error") or "unreadable", "MemAvailable", "read /proc/meminfo by hand")
        elif serving:
            self.add("memory", avail >= floor, f"MemAvailable {_gib(avail)} while the engine runs",
                     f">= {_gib(floor)} serving floor (the {_gib(gate)} gate applies before a start)",
                     "below the engine's serving floor: earlyoom is about to kill it; find what else holds "
                     "memory (ps aux --sort=-rss | head) and stop it")
        else:
            self.add("memory", avail >= gate, f"MemAvailable {_gib(avail)}, the engine is not running",
                     f">= {_gib(gate)}, the recipe's memory gate",
                     "a start would wait at the memory gate and fail: stop what holds memory "
                     "(ps aux --sort=-rss | head; a stale engine or container), then start the ranks")

    def space(self, facts):
        want = float(self.e["store_min_free_gib"]) * GIB
        for sp in facts.get("space") or []:
            if sp.get("error"):
                self.add("disk free", False, sp["error"], f">= {_gib(want)}", "check the filesystem is mounted")
                continue
            self.add("disk free", sp["free_bytes"] >= want,
                     f"{_gib(sp['free_bytes'])} free of {_gib(sp['total_bytes'])} under {sp['measured']} "
                     f"({sp.get('fstype')} on {sp.get('mount')})", f">= {_gib(want)} (doctor_store_min_free_gib)",
                     f"free space under {sp['path']}: remove partial downloads ({sp['path']}/.cache), old "
                     "engine builds (engine_keep_builds) and what is not the pinned revision, or grow the filesystem")

    def stores(self, facts):
        head = self.e.get("rank") == 0
        for st in facts.get("stores") or []:
            check, engram = st["name"], st["name"].lower().startswith("engram")
            how = (f"{self.play}weights.yml: " + ("the head fetches what is missing from the Hub"
                   if head else "the worker copies it again from the head over the fabric"))
            if st.get("error"):
                self.add(check, False, st["error"], "complete, as its manifest", how)
                continue
            problems = [f"{p['path']}: {p['reason']}" for p in st.get("problems") or []]
            shards = st.get("shards") or {}
            seen = f"{st['files_checked']} files as the manifest of @{str(st.get('commit'))[:8]}"
            if shards.get("expected"):
                seen += f", shards {shards['present']}/{shards['expected']}"
            want = "complete, as its manifest"
            if not engram and self.e.get("shards") and shards.get("expected") not in (None, 0, int(self.e["shards"])):
                problems.append(f"the index names {shards['expected']} shards, the recipe {self.e['shards']}")
            if engram:
                want += ", on local disk"
                if st.get("network_fs"):
                    problems.append(f"on {st['fstype']} ({st['mount']}): prefill falls from ~2,150 to 690-890 "
                                    "tok/s; keep the Engram tables on local disk")
            self.add(check, not problems, "; ".join(problems[:4]) + (" ..." if len(problems) > 4 else "")
                     if problems else seen, want, how if not (engram and st.get("network_fs")) else
                     f"point recipe_engram_dir at a local disk and run {self.play}weights.yml")

    # --- the engine ----------------------------------------------------------------------------
    def units(self, facts):
        for unit in facts.get("units") or []:
            state = unit.get("ActiveState")
            seen = f"{state} ({unit.get('SubState')})"
            if state != "active" and unit.get("Result") not in (None, "success"):
                seen += f", result {unit.get('Result')}, exit status {unit.get('ExecMainStatus')}"
            seen += f", {unit.get('NRestarts') or 0} restarts"
            if unit.get("error"):
                seen = unit["error"]
            advice = (f"start the ranks in order with {self.play}engine.yml (followers first, rank 0 last, "
                      "the whole cluster); its last journal lines follow")
            if state == "activating":
                advice = ("the rank is starting: rank 0 waits for every follower and the memory gate; look at "
                          "the other node's rank row, then " + advice)
            if unit.get("LoadState") == "not-found":
                advice = f"the unit is not installed: {self.play}engine.yml installs and starts it"
            self.add(unit["unit"], state == "active", seen, "active (running)", advice,
                     journal=unit.get("journal", [])[-6:])

    def health(self, facts):
        h = facts.get("health")
        if h is None:
            return
        body = h.get("health") or {}
        if h.get("ready"):
            seen = "ready" + (f", context {body['context_length']}" if "context_length" in body else "")
            self.add(f"{h['url']}/health", True, seen, "ready")
            return
        hints = {
            "loading": "no answer yet: the engine loads, or waits for a follower (see the rank rows)",
            "fatal": "the engine lost a rank: systemd restarts it; see the rank rows and their journals",
            "unauthorized": f"the key differs from the engine's key file: {self.play}engine.yml writes it again",
            "wrong_model": f"the served name differs from recipe_api_served_name: {self.play}engine.yml",
            "timeout": "the engine accepts connections but does not answer: restart the ranks in order "
                       f"({self.play}engine.yml after `systemctl stop sparkfold-engine.target` on every node)",
        }
        self.add(f"{h['url']}/health", False, h.get("detail") or h.get("state"), "ready",
                 hints.get(h.get("state"), "see the rank rows and their journals"))

    def hub(self):
        hub = self.e.get("hub")
        if not hub:
            return
        pin = f"{hub.get('repo_id')}@{str(hub.get('revision'))[:12]}"
        if hub.get("ok"):
            self.add("Hub pin", True, f"{pin} is on the Hub", "still on the Hub")
        elif hub.get("kind") == "network":
            self.add("Hub pin", True, f"offline: the Hub is not reachable from {self.e['host']}, {pin} not checked",
                     na=True)
        elif hub.get("kind") == "revision_not_found":
            self.add("Hub pin", False, f"{pin} is gone from the Hub", "still on the Hub",
                     "the pin was squashed or force-pushed away: the stores keep serving, but no node can fetch "
                     "it again; pin a revision that exists (recipe_overrides weights.revision) and run "
                     f"{self.play}weights.yml; the Hub now has: {hub.get('msg', '')[:300]}")
        else:
            self.add("Hub pin", False, hub.get("msg") or "not checked", "still on the Hub",
                     "fix what the message names (token, endpoint), then run the doctor again")


def _wrap(text, first, rest):
    """``text`` wrapped to WIDTH, the first line after ``first``, the others after ``rest``."""
    return textwrap.wrap(text, WIDTH, initial_indent=first, subsequent_indent=rest, break_on_hyphens=False) or [first]


def _table(host, rows):
    """The rows as lines of at most WIDTH columns: check, state, what was seen (and wanted), then what to do and
    the journal, wrapped under the seen column. A lab-only row's state is ``lab``."""
    width = min(max([len(r["check"]) for r in rows] + [5]), CHECK_WIDTH)
    lead = " " * (width + 9)
    lines = [f"{'check':<{width}}  {'state':<5}  seen (want)"]
    for r in rows:
        want = f" (want {r['want']})" if r["want"] and r["state"] == "FAIL" else ""
        state = "lab" if r.get("lab_only") else r["state"]
        if len(r["check"]) > width:
            lines.extend(_wrap(r["check"], "", "  "))
            first = f"{'':<{width}}  {state:<5}  "
        else:
            first = f"{r['check']:<{width}}  {state:<5}  "
        lines.extend(_wrap(f"{r['seen']}{want}", first, lead))
        if r["advice"]:
            lines.extend(_wrap(r["advice"], lead + "-> ", lead + "   "))
        for line in r["journal"]:
            lines.extend(_wrap(line, lead + "| ", lead + "|   "))
    return [f"--- {host} ---", *lines]


def doctor_report(facts, expect):
    """Judge one node's doctor_facts against the plan; see doctor_report.yml."""
    if not isinstance(facts, dict) or not isinstance(expect, dict):
        raise AnsibleFilterError("doctor_report: expects the sparkfold_doctor fact and a dict of expectations")
    for key in ("host", "memory_gate_gib", "serving_floor_gib", "store_min_free_gib"):
        if key not in expect:
            raise AnsibleFilterError(f"doctor_report: expect.{key} is missing")
    report = Report(expect)
    report.rails(facts)
    report.cables()
    report.pings(facts)
    report.toolchain(facts)
    serving = any(u.get("ActiveState") == "active" for u in facts.get("units") or [])
    report.memory(facts, serving)
    report.space(facts)
    report.stores(facts)
    report.units(facts)
    report.health(facts)
    report.hub()
    rows = report.rows
    host = expect["host"]
    return {
        "host": host,
        "rows": rows,
        "ok": all(r["state"] != "FAIL" for r in rows),
        "problems": [f"{host}: {r['check']}: {r['seen']} -> {r['advice']}" for r in rows if r["state"] == "FAIL"],
        "not_available": [f"{host}: {r['check']}: {r['seen']}" for r in rows if r["state"] == "n/a"],
        "lab_only": [r["check"] for r in rows if r.get("lab_only")],
        "table": _table(host, rows),
    }


def doctor_verdict(results, hosts):
    """The pair's verdict from each node's doctor_report (``results``) and the play's ``hosts``; see
    doctor_verdict.yml."""
    if not isinstance(results, list) or not isinstance(hosts, list):
        raise AnsibleFilterError("doctor_verdict: expects the list of doctor_result and the list of the play's hosts")
    by_host = {r.get("host"): r for r in results if isinstance(r, dict)}
    problems, sick = [], []
    for host in hosts:
        result = by_host.get(host)
        if result is None:
            found = [f"{host}: no doctor results (unreachable, or failed before the checks)"]
        else:
            found = list(result.get("problems") or [])
            if not found and not result.get("ok", False):
                found = [f"{host}: a check failed (see its table)"]
        if found:
            sick.append(host)
            problems.extend(found)
    if sick:
        head = f"SICK: {', '.join(sick)} ({len(problems)} problem{'s' if len(problems) != 1 else ''})"
        healthy = [host for host in hosts if host not in sick]
        if healthy:
            head += f"; healthy: {', '.join(healthy)}"
    else:
        head = f"HEALTHY: every check passed on {', '.join(hosts)}"
    # One line per problem, whole (a script greps them); the header and the lists of what was not checked wrap.
    lines = [head, *(f"  {line}" for line in problems)]
    unchecked = [f"{host}: {row['check']}: {row['seen']}" for host in hosts
                 for row in (by_host.get(host) or {}).get("rows") or []
                 if row["state"] == "n/a" and not row.get("lab_only")]
    if unchecked:
        lines.append("Not checked (not problems):")
        lines.extend(f"  {line}" for line in unchecked)
    lab = {}
    for host in hosts:
        for check in (by_host.get(host) or {}).get("lab_only") or []:
            lab.setdefault(check, []).append(host)
    if lab:
        lines.append(f"Lab only, not problems ({LAB}):")
        for check, on in lab.items():
            lines.extend(_wrap(f"{check} ({', '.join(on)})", "  ", "      "))
    return {"ok": not sick, "sick": sick, "problems": problems, "lines": lines, "text": "\n".join(lines)}


def doctor_fleet(nodes):
    """One row per cluster of a fleet, from each node's doctor_result and its cluster's recipe; see doctor_fleet.yml."""
    if not isinstance(nodes, list) or not all(isinstance(n, dict) for n in nodes):
        raise AnsibleFilterError("doctor_fleet: expects a list of dicts "
                                 "(cluster, host, rank, recipe, engine, weights, result)")
    clusters = {}
    for node in nodes:
        clusters.setdefault(str(node.get("cluster") or "?"), []).append(node)
    rows, sick = [], []
    for name, members in clusters.items():
        hosts = [str(n.get("host")) for n in members]
        verdict = doctor_verdict([n["result"] for n in members if isinstance(n.get("result"), dict)], hosts)
        head = next((n for n in members if str(n.get("rank")) == "0"), members[0])
        first = next((n for n in members if n.get("recipe")), head)
        if not any(isinstance(n.get("result"), dict) for n in members):
            health, todo = "NO RESULTS", "reach the nodes (ssh, power), then run the doctor again"
        elif verdict["ok"]:
            health, todo = "HEALTHY", "nothing"
        else:
            count = len(verdict["problems"])
            health = f"SICK ({count} problem{'s' if count != 1 else ''})"
            advice = verdict["problems"][0].split(" -> ", 1)
            todo = advice[1] if len(advice) > 1 else verdict["problems"][0]
        if not verdict["ok"]:
            sick.append(name)
        rows.append({"cluster": name, "recipe": str(first.get("recipe") or "-"),
                     "engine": str(head.get("engine") or "-"), "weights": str(first.get("weights") or "-"),
                     "health": health, "todo": todo, "hosts": hosts})
    widths = {key: max([len(key)] + [len(r[key]) for r in rows]) for key in ("cluster", "recipe", "engine", "weights")}
    lines = [f"FLEET: {len(rows)} clusters, {len(rows) - len(sick)} healthy"
             + (f", sick: {', '.join(sick)}" if sick else "")]
    lines.append("  ".join(f"{key:<{widths[key]}}" for key in widths) + "  health")
    for r in rows:
        lines.append("  ".join(f"{r[key]:<{widths[key]}}" for key in widths) + f"  {r['health']}")
        if r["todo"] != "nothing":
            lines.extend(_wrap(r["todo"], " " * 2 + "-> ", " " * 5))
    return {"ok": not sick, "sick": sick, "rows": rows, "lines": lines, "text": "\n".join(lines)}


def doctor_pings(rails, peers):
    """The pings from this node's rails to each peer's address on the rail of the same name."""
    if not isinstance(rails, list) or not isinstance(peers, dict):
        raise AnsibleFilterError("doctor_pings: expects this node's fabric plan and a dict of peer -> its plan")
    pings = []
    for peer in sorted(peers):
        theirs = {rail["name"]: rail for rail in peers[peer] or []}
        for rail in rails:
            if "link" in rail:
                # A ring port (fabric_plan topology ring): only the neighbour on the same cable answers.
                facing = [their for their in peers[peer] or [] if their["cidr"] == rail["cidr"]]
                pings.extend({"interface": rail["interface"], "address": their["address"],
                              "size": int(rail["mtu"]) - 28, "peer": peer, "rail": rail["name"]} for their in facing)
                continue
            if rail["name"] not in theirs:
                raise AnsibleFilterError(f"doctor_pings: {peer} has no rail {rail['name']} (fabric_rails differ)")
            pings.append({"interface": rail["interface"], "address": theirs[rail["name"]]["address"],
                          "size": int(rail["mtu"]) - 28, "peer": peer, "rail": rail["name"]})
    return pings


class FilterModule:
    """sparkfold doctor filters."""

    def filters(self):
        return {"doctor_report": doctor_report, "doctor_pings": doctor_pings, "doctor_verdict": doctor_verdict,
                "doctor_fleet": doctor_fleet}
