"""An evaluation scoring each case's `nodule-volume` output (a Float socket) against the ground truth's truth.json
(case name -> volume): per-case absolute error, and their mean. It misbehaves as the ground truth's behaviour.txt
says (none: it behaves)."""

import json
import mmap
import os
import socket
import sys
import time
from pathlib import Path

# grand-challenge's paths; the job runner's local process gives its folders by the project's variables
INPUT = Path(os.environ.get("INPUT_DIR", "/input"))
OUTPUT = Path(os.environ.get("OUTPUT_DIR", "/output"))
GROUND_TRUTH = Path(os.environ.get("GROUND_TRUTH_DIR", "/opt/ml/input/data/ground_truth"))
SOCKET = "nodule-volume"

behaviour_file = GROUND_TRUTH / "behaviour.txt"
BEHAVIOUR = behaviour_file.read_text().strip() if behaviour_file.exists() else "ok"
truth = json.loads((GROUND_TRUTH / "truth.json").read_text())
case = {}
for job in json.loads((INPUT / "predictions.json").read_text()):
    name = job["inputs"][0]["image"]["name"]
    output = next(o for o in job["outputs"] if o["interface"]["slug"] == SOCKET)
    predicted = json.loads((INPUT / job["pk"] / "output" / output["interface"]["relative_path"]).read_text())
    case[name] = {"absolute_error": abs(predicted - truth[name])}
missing = sorted(set(truth) - set(case))
if missing:
    sys.exit(f"no prediction for {', '.join(missing)}")
mean = sum(c["absolute_error"] for c in case.values()) / len(case)
metrics = {"aggregates": {"mean_absolute_error": mean}, "case": case, "meta": {"cases": len(case)}}
print(f"scored {len(case)} cases")


def refused(path: Path) -> bool:
    """Whether writing `path` fails."""
    try:
        path.write_text("x")
    except OSError:
        return True
    return False


if BEHAVIOUR == "ok":
    (OUTPUT / "metrics.json").write_text(json.dumps(metrics))
elif BEHAVIOUR == "not-finite":  # as json.dumps writes float('nan') and float('inf') unless allow_nan=False
    metrics["aggregates"]["mean_absolute_error"] = float("nan")
    next(iter(case.values()))["absolute_error"] = float("inf")
    (OUTPUT / "metrics.json").write_text(json.dumps(metrics))
elif BEHAVIOUR == "huge":  # a valid start, then 1 GiB of NUL bytes: sparse, written in no time
    with open(OUTPUT / "metrics.json", "wb") as handle:
        handle.write(json.dumps(metrics).encode()[:-1] + b', "padding": "')
        handle.truncate(1 << 30)
elif BEHAVIOUR == "deep":
    (OUTPUT / "metrics.json").write_text('{"aggregates": ' + "[" * 10_000 + "]" * 10_000 + "}")
elif BEHAVIOUR == "list":
    (OUTPUT / "metrics.json").write_text(json.dumps([metrics]))
elif BEHAVIOUR == "none":
    (OUTPUT / "scores.json").write_text(json.dumps(metrics))
elif BEHAVIOUR == "network":
    socket.create_connection(("grand-challenge.org", 443), timeout=5)
elif BEHAVIOUR == "outside":  # its home is its own (written, discarded); /input and the ground truth are not
    (Path.home() / "cache.json").write_text(json.dumps(metrics))
    metrics["meta"]["refused"] = {"input": refused(INPUT / "x"), "ground_truth": refused(GROUND_TRUTH / "x"),
                                  "image": refused(Path("/opt/app/x"))}
    (OUTPUT / "metrics.json").write_text(json.dumps(metrics))
elif BEHAVIOUR == "memory":  # shared memory: the container's memory, beyond RLIMIT_DATA's reach
    shared = mmap.mmap(-1, 4 << 30)
    for offset in range(0, len(shared), 4096):
        shared[offset] = 1
elif BEHAVIOUR == "slow":
    time.sleep(600)
else:
    sys.exit(f"unknown behaviour {BEHAVIOUR}")
