"""A job writing without bound, as $BEHAVIOUR says (into the folders $TMPDIR and $OUTPUT_DIR name when run as a local
process, else /tmp and /output)."""

import os
import sys
import time
from pathlib import Path

BEHAVIOUR = os.environ.get("BEHAVIOUR", "fill-disk")
TMP = Path(os.environ.get("TMPDIR", "/tmp"))
OUTPUT = Path(os.environ.get("OUTPUT_DIR", "/output"))

if BEHAVIOUR == "fill-disk":  # 1 MiB at a time into /tmp and /output, up to 1 GiB, in about 10 s
    for i in range(512):
        for folder in (TMP, OUTPUT):
            (folder / f"fill-{i}").write_bytes(os.urandom(1 << 20))
        time.sleep(0.02)
elif BEHAVIOUR == "large-file":  # one file of 1 GiB in /tmp (sparse)
    with open(TMP / "large", "wb") as handle:
        handle.truncate(1 << 30)
elif BEHAVIOUR == "sparse-output":  # an output image of 5 GiB, sparse: a few kB on disk
    folder = OUTPUT / "images" / "rib-fracture-instances"
    folder.mkdir(parents=True)
    with open(folder / "instances.mha", "wb") as handle:
        handle.write(b"ObjectType = Image\nNDims = 3\nDimSize = 2048 2048 1280\nElementType = MET_UCHAR\n"
                     b"ElementDataFile = LOCAL\n")
        handle.truncate(5 << 30)
else:
    sys.exit(f"unknown BEHAVIOUR {BEHAVIOUR}")
