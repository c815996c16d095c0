"""A TB-caverns algorithm (socket ct-image in, tb-cavern-boxes.json out) that misbehaves as $BEHAVIOUR says."""

import json
import os
import socket
import sys
import time
from pathlib import Path

BEHAVIOUR = os.environ.get("BEHAVIOUR", "ok")
OUTPUT = Path("/output")
BOXES = {"version": 1, "boxes": [{"voxel_bbox": [1, 1, 1, 4, 4, 3], "probability": 0.5}]}

inputs = json.loads(Path("/input/inputs.json").read_text())
image = next(Path("/input", v["interface"]["relative_path"]).glob("*.mha") for v in inputs)
print(f"read {sorted(p.name for p in image)}; model {sorted(p.name for p in Path('/opt/ml/model').iterdir())}")

if BEHAVIOUR == "ok":
    time.sleep(0.5)  # as a model loads: the runner's memory poll (every 0.1 s) sees the job running
    (OUTPUT / "tb-cavern-boxes.json").write_text(json.dumps(BOXES))
elif BEHAVIOUR == "busy":  # a second of CPU time (a model's inference), then its boxes
    started = time.process_time()
    while time.process_time() - started < 1.0:
        pass
    (OUTPUT / "tb-cavern-boxes.json").write_text(json.dumps(BOXES))
elif BEHAVIOUR == "model-boxes":  # the boxes its model tarball lists for this case's image (a lookup "model")
    name = inputs[0]["image"]["name"]
    boxes = json.loads(Path("/opt/ml/model/boxes.json").read_text()).get(name, [])
    (OUTPUT / "tb-cavern-boxes.json").write_text(json.dumps({"version": 1, "boxes": boxes}))
elif BEHAVIOUR == "no-output":
    print("done, forgot to write")
elif BEHAVIOUR == "wrong-name":
    (OUTPUT / "tb_cavern_boxes.json").write_text(json.dumps(BOXES))
elif BEHAVIOUR == "invalid-json":
    (OUTPUT / "tb-cavern-boxes.json").write_text("{'boxes': [}")
elif BEHAVIOUR == "crash":
    raise RuntimeError("the model file weights.onnx is missing")
elif BEHAVIOUR == "slow":
    time.sleep(600)
elif BEHAVIOUR == "memory":
    hoard = [bytearray(64 << 20) for _ in range(10_000)]
elif BEHAVIOUR == "memory-kill":  # shared memory: not data (RLIMIT_DATA), but the container's memory
    import mmap

    shared = mmap.mmap(-1, 8 << 30)
    for offset in range(0, len(shared), 4096):
        shared[offset] = 1
elif BEHAVIOUR == "network":
    socket.create_connection(("download.pytorch.org", 443), timeout=5)
elif BEHAVIOUR == "box-outside":  # valid JSON grand-challenge accepts; x2 beyond the 32-voxel-wide CT
    (OUTPUT / "tb-cavern-boxes.json").write_text(json.dumps({"boxes": [{"voxel_bbox": [1, 1, 1, 60, 4, 3]}]}))
elif BEHAVIOUR == "gpu-memory":  # as PyTorch words it, at a small peak of the container's own memory
    raise RuntimeError("CUDA out of memory. Tried to allocate 20.00 GiB (GPU 0; 15.78 GiB total capacity)")
elif BEHAVIOUR == "outside":
    (Path.home() / "tb-cavern-boxes.json").write_text(json.dumps(BOXES))
else:
    sys.exit(f"unknown BEHAVIOUR {BEHAVIOUR}")
