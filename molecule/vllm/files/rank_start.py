"""Print (JSON) when this node's rank unit entered active (systemd's monotonic microseconds, one clock for every
lab node) and the commit recorded in the store its container mounts at /model (the mount's source, read on the node)."""

import glob
import json
import os
import subprocess

unit = next(os.path.basename(p) for p in glob.glob("/etc/systemd/system/sparkfold-engine@*.service.d"))[: -len(".d")]
rank = unit.split("@", 1)[1].split(".", 1)[0]
started = subprocess.run(
    ["systemctl", "show", "-p", "ActiveEnterTimestampMonotonic", "--value", unit],
    capture_output=True, text=True, check=True,
).stdout.strip()
inspect = json.loads(subprocess.run(["podman", "inspect", f"sparkfold-engine-{rank}"],
                                    capture_output=True, text=True, check=True).stdout)
source = next(m["Source"] for m in inspect[0]["Mounts"] if m["Destination"] == "/model")
with open(os.path.join(source, ".sparkfold-weights.json"), encoding="utf-8") as handle:
    commit = json.load(handle)["commit"]
print(json.dumps({"unit": unit, "started_us": int(started), "commit": commit}))
