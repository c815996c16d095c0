"""`make bench`: run every benchmarks/bench_*.py (each has `run() -> dict`) and write one JSON of results."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from medchallenge import __version__  # noqa: E402
from medchallenge.io import write_json_atomic  # noqa: E402
from medchallenge.registry import SERVICES  # noqa: E402


def image_sizes() -> dict[str, int]:
    """Bytes of every image of the registry's services, as compose.yaml tags them (absent when Docker is not
    available or the image is not built)."""
    version = os.environ.get("MEDCHALLENGE_VERSION") or __version__
    sizes = {}
    for image in (f"{service.image}:{version}" for service in SERVICES):
        try:
            sizes[image] = int(subprocess.run(["docker", "image", "inspect", "--format", "{{.Size}}", image],
                                              check=True, capture_output=True, text=True).stdout)
        except (OSError, subprocess.CalledProcessError):
            continue
    return sizes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("bench/results.json"))
    parser.add_argument("--only", nargs="*", help="benchmark module names (bench_<name>) to run")
    args = parser.parse_args()
    results = {"machine": {"python": platform.python_version(), "cpus": len(__import__("os").sched_getaffinity(0)),
                           "processor": platform.processor() or platform.machine()},
               "image_sizes_bytes": image_sizes()}
    for path in sorted(Path(__file__).parent.glob("bench_*.py")):
        name = path.stem.removeprefix("bench_")
        if args.only and name not in args.only:
            continue
        print(f"== {name}", flush=True)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        start = time.perf_counter()
        results[name] = module.run()
        results[name]["benchmark_seconds"] = round(time.perf_counter() - start, 2)
        print(json.dumps(results[name], indent=1), flush=True)
    write_json_atomic(args.out, results)
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
