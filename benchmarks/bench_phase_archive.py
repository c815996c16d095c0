"""A team's `docker save` archive as the phase verifies it when planned and streams it to the engine (issue 37): a
synthetic one-image archive of 256 MiB of layers (half of them compressible), as .tar and .tar.gz, each verified
(every member hashed, layers read as tars) and streamed to nothing; and a gzip layer bomb (1 GiB of zeros in about
1 MiB) refused at a 256 MiB budget. Each in a fresh process: its wall and CPU seconds and its own peak memory
(VmHWM, which an exec resets)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

LAYER_MIB = 64
LAYERS = 4

MEASURE = """
import io, json, os, sys, time
from pathlib import Path
from medchallenge.errors import InputError
from medchallenge.phase.archive import verify_archive, write_load_stream
from medchallenge.process_memory import vm_hwm_bytes
archive, budget, stream = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "stream"
wall, cpu = time.perf_counter(), time.process_time()
try:
    image = verify_archive(archive, budget)
    refused = None
except InputError as exc:
    image, refused = None, str(exc)
verify = (time.perf_counter() - wall, time.process_time() - cpu)
wall, cpu = time.perf_counter(), time.process_time()
if image is not None and stream:
    with open(os.devnull, "wb") as null:
        write_load_stream(archive, image, null)
streamed = (time.perf_counter() - wall, time.process_time() - cpu)
print(json.dumps({"verify_wall_s": round(verify[0], 2), "verify_cpu_s": round(verify[1], 2),
                  "stream_wall_s": round(streamed[0], 2), "stream_cpu_s": round(streamed[1], 2),
                  "peak_rss_mib": round(vm_hwm_bytes(os.getpid()) / (1 << 20)),
                  "refused": refused is not None}))
"""


def _layer(size: int, seed: int) -> bytes:
    """A layer tar of one file: half random bytes, half zeros."""
    data = os.urandom(size // 2) + bytes(size // 2)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo(f"file{seed}")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _archive(path: Path, layers: list[bytes], compress: bool) -> None:
    diff_ids = [hashlib.sha256(layer).hexdigest() for layer in layers]
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {"User": "1000", "Cmd": ["/x"]},
                         "rootfs": {"type": "layers", "diff_ids": [f"sha256:{d}" for d in diff_ids]}}).encode()
    image = hashlib.sha256(config).hexdigest()
    manifest = json.dumps([{"Config": f"{image}.json", "RepoTags": ["bench:1"],
                            "Layers": [f"{d}/layer.tar" for d in diff_ids]}]).encode()
    members = [*((f"{d}/layer.tar", layer) for d, layer in zip(diff_ids, layers)), (f"{image}.json", config),
               ("manifest.json", manifest)]
    with open(path, "wb") as raw:
        target = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1) if compress else raw
        with tarfile.open(fileobj=target, mode="w") as tar:
            for name, data in members:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        if compress:
            target.close()


def _measure(archive: Path, budget: int, stream: bool) -> dict:
    done = subprocess.run([sys.executable, "-c", MEASURE, str(archive), str(budget), "stream" if stream else "-"],
                          capture_output=True, text=True, check=True)
    return {"archive_mib": round(archive.stat().st_size / (1 << 20), 1), **json.loads(done.stdout)}


def run() -> dict:
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        layers = [_layer(LAYER_MIB << 20, i) for i in range(LAYERS)]
        for name, compress in (("tar", False), ("tar_gz", True)):
            path = root / f"image.{name}"
            _archive(path, layers, compress)
            results[f"{LAYERS * LAYER_MIB}_mib_{name}"] = _measure(path, 10 << 30, stream=True)
        bomb = gzip.compress(bytes(1 << 30), compresslevel=9)
        _archive(root / "bomb.tar", [bomb], compress=False)
        results["gzip_layer_bomb_1_gib_at_256_mib_budget"] = _measure(root / "bomb.tar", 256 << 20, stream=False)
    return results
