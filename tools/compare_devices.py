"""Every algorithm on the CPU and on CUDA with the same inputs: are the predictions the same, and how long did each take?

    python tools/compare_devices.py --data DIR --out OUT [--generate SEED] [--devices cpu cuda] [--only NAME ...]

`--generate SEED` first writes each algorithm's inputs with `medchallenge.synth` at `make demo`'s sizes (the
challenges' own generators, in parallel) into DIR/<folder>/input; without it DIR must already hold them. Each
algorithm then runs as its image runs it (`algorithms/<module>/inference.py`, batch mode, the caption editions with
$CAPTION_EDITION) once per device, outputs in OUT/<name>/<device>/ (a device named twice runs twice, the second in <device>-<n>/:
whether it is deterministic). The outputs of every other device are compared
with the first device's, file by file:
- JSON: the same structure, strings, booleans and integers; floats within --tolerance (absolute);
- CSV/TSV/text: the same lines and fields; fields that are numbers within the tolerance;
- images (.nii.gz, .mha, .nrrd): the same size, geometry and voxel type; voxels that differ are counted;
- anything else: the same bytes.
OUT/device_comparison.json holds, per algorithm, the wall time and median time per case on each device (from the
runner's `[i/n] case: ... in X s` lines; CUDA's wall time includes its start), and the differences found. Exit status
1 when any algorithm failed or any output differs beyond the tolerance.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "shared"))

from medchallenge.registry import CONFIGURATIONS_WITH_DATA, Configuration  # noqa: E402

IMAGE_SUFFIXES = (".nii.gz", ".nii", ".mha", ".mhd", ".nrrd")
TEXT_SUFFIXES = (".csv", ".tsv", ".txt")
CASE_LINE = re.compile(r"\[\d+/\d+\] .*? in ([0-9.]+) s")
MAX_DIFFERENCES_LISTED = 20


@dataclass
class Comparison:
    """How one device's outputs differ from the reference device's."""

    files: int = 0
    max_float_difference: float = 0.0
    differing_voxels: int = 0
    differences: list[str] = field(default_factory=list)

    def add(self, text: str) -> None:
        if len(self.differences) < MAX_DIFFERENCES_LISTED:
            self.differences.append(text)
        elif len(self.differences) == MAX_DIFFERENCES_LISTED:
            self.differences.append("(more differences not listed)")

    def float_difference(self, a: float, b: float, where: str, tolerance: float) -> None:
        if math.isnan(a) and math.isnan(b):
            return
        difference = abs(a - b) if math.isfinite(a) and math.isfinite(b) else (0.0 if a == b else math.inf)
        self.max_float_difference = max(self.max_float_difference, difference)
        if difference > tolerance:
            self.add(f"{where}: {a!r} vs {b!r}")


def algorithm_configurations() -> list[Configuration]:
    """The configurations whose algorithm runs on its own data (the caption editions each)."""
    return [c for c in CONFIGURATIONS_WITH_DATA if c.challenge.algorithm is not None]


def generate(configuration: Configuration, data: Path, seed: str) -> str:
    """Write the configuration's inputs as `make demo` does, with another seed."""
    challenge = configuration.challenge
    command = [sys.executable, "-m", "medchallenge.synth", challenge.input_generator,
               "--out", str(data / configuration.demo_folder), *challenge.input_generator_size(demo=True),
               *configuration.edition.synth_arguments, "--seed", seed]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=_environment())
    return configuration.demo_folder


def _environment(**extra: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "shared"),
                                                                     os.environ.get("PYTHONPATH")])))
    env.update(extra)
    return env


def run_algorithm(configuration: Configuration, data: Path, output: Path, device: str) -> dict:
    """One batch run on `device`: wall seconds, per-case seconds, exit status, the log's last lines."""
    challenge = configuration.challenge
    output.mkdir(parents=True, exist_ok=True)
    extra = dict(configuration.edition.build_args) if challenge.algorithm_editions else {}  # the image's ENV
    command = [sys.executable, str(ROOT / "algorithms" / challenge.module / "inference.py"),
               "--input", str(data / configuration.demo_folder / "input"), "--output", str(output),
               "--device", device]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=_environment(**extra))
    wall = time.perf_counter() - start
    log = done.stdout + done.stderr
    per_case = [float(m.group(1)) for m in CASE_LINE.finditer(log)]
    return {"device": device, "returncode": done.returncode, "wall_seconds": round(wall, 2),
            "cases": len(per_case), "median_case_seconds": round(statistics.median(per_case), 4) if per_case else None,
            "total_case_seconds": round(sum(per_case), 2),
            "provider": next(iter(re.findall(r"on (\w+ExecutionProvider)", log)), None),
            "log_tail": log.strip().splitlines()[-5:]}


def compare_json(a, b, where: str, tolerance: float, result: Comparison) -> None:
    if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        if isinstance(a, dict) and isinstance(b, dict):
            if a.keys() != b.keys():
                result.add(f"{where}: keys {sorted(a)} vs {sorted(b)}")
            for key in a.keys() & b.keys():
                compare_json(a[key], b[key], f"{where}.{key}", tolerance, result)
        elif isinstance(a, list) and isinstance(b, list):
            if len(a) != len(b):
                result.add(f"{where}: {len(a)} items vs {len(b)}")
            for index, (x, y) in enumerate(zip(a, b)):
                compare_json(x, y, f"{where}[{index}]", tolerance, result)
        elif a != b:
            result.add(f"{where}: {a!r} vs {b!r}")
    elif isinstance(a, int) and isinstance(b, int):
        if a != b:
            result.add(f"{where}: {a} vs {b}")
    else:
        result.float_difference(float(a), float(b), where, tolerance)


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def compare_text(a: str, b: str, where: str, tolerance: float, result: Comparison) -> None:
    """Line by line, field by field (comma, tab, semicolon or space separated); numeric fields within tolerance."""
    lines_a, lines_b = a.splitlines(), b.splitlines()
    if len(lines_a) != len(lines_b):
        result.add(f"{where}: {len(lines_a)} lines vs {len(lines_b)}")
    for number, (line_a, line_b) in enumerate(zip(lines_a, lines_b), 1):
        if line_a == line_b:
            continue
        fields_a, fields_b = re.split(r"[,\t; |]", line_a), re.split(r"[,\t; |]", line_b)
        if len(fields_a) != len(fields_b):
            result.add(f"{where}:{number}: {len(fields_a)} fields vs {len(fields_b)}")
            continue
        for x, y in zip(fields_a, fields_b):
            if x == y:
                continue
            nx, ny = _number(x), _number(y)
            if nx is None or ny is None:
                result.add(f"{where}:{number}: {x!r} vs {y!r}")
            else:
                result.float_difference(nx, ny, f"{where}:{number}", tolerance)


def compare_images(a: Path, b: Path, where: str, result: Comparison) -> None:
    import numpy as np
    import SimpleITK as sitk

    image_a, image_b = sitk.ReadImage(str(a)), sitk.ReadImage(str(b))
    for attribute in ("GetSize", "GetSpacing", "GetOrigin", "GetDirection", "GetPixelIDValue"):
        if getattr(image_a, attribute)() != getattr(image_b, attribute)():
            result.add(f"{where}: {attribute[3:]} {getattr(image_a, attribute)()} vs {getattr(image_b, attribute)()}")
            return
    differing = int(np.count_nonzero(sitk.GetArrayViewFromImage(image_a) != sitk.GetArrayViewFromImage(image_b)))
    result.differing_voxels += differing
    if differing:
        result.add(f"{where}: {differing} voxels differ")


def compare_outputs(reference: Path, other: Path, tolerance: float) -> Comparison:
    """Every file under `reference` against the same path under `other` (and files only one of them has)."""
    result = Comparison()
    files_a = {p.relative_to(reference) for p in reference.rglob("*") if p.is_file()}
    files_b = {p.relative_to(other) for p in other.rglob("*") if p.is_file()}
    for missing in sorted(files_a ^ files_b):
        result.add(f"{missing}: only in {'the reference' if missing in files_a else 'the other'}")
    for relative in sorted(files_a & files_b):
        result.files += 1
        a, b, where = reference / relative, other / relative, str(relative)
        name = relative.name.lower()
        if name.endswith(".json"):
            compare_json(json.loads(a.read_text()), json.loads(b.read_text()), where, tolerance, result)
        elif name.endswith(TEXT_SUFFIXES):
            compare_text(a.read_text(errors="replace"), b.read_text(errors="replace"), where, tolerance, result)
        elif name.endswith(IMAGE_SUFFIXES):
            compare_images(a, b, where, result)
        elif a.read_bytes() != b.read_bytes():
            result.add(f"{where}: bytes differ")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--generate", metavar="SEED")
    parser.add_argument("--devices", nargs="+", default=["cpu", "cuda"], choices=["cpu", "cuda"],
                        help="the first is the reference; a device named twice runs twice (default: cpu cuda)")
    parser.add_argument("--only", nargs="+", help="configuration names (e.g. tb-caverns imageclef-caption-2021)")
    parser.add_argument("--tolerance", type=float, default=1e-4, help="absolute, for floats (default 1e-4)")
    args = parser.parse_args(argv)
    configurations = [c for c in algorithm_configurations() if not args.only or c.name in args.only]
    csv.field_size_limit(1 << 20)
    if args.generate:
        start = time.perf_counter()
        with ProcessPoolExecutor(max_workers=len(configurations)) as pool:
            for folder in pool.map(generate, configurations, [args.data] * len(configurations),
                                   [args.generate] * len(configurations)):
                print(f"generated {folder}", flush=True)
        print(f"inputs generated in {time.perf_counter() - start:.1f} s", flush=True)
    report: dict = {"tolerance": args.tolerance, "devices": args.devices, "algorithms": {}}
    failed = False
    for configuration in configurations:
        name = configuration.name
        labels = [device if args.devices.index(device) == index else f"{device}-{index}"
                  for index, device in enumerate(args.devices)]  # a device named twice: run twice (determinism)
        runs = [dict(run_algorithm(configuration, args.data, args.out / name / label, device), label=label)
                for device, label in zip(args.devices, labels)]
        entry: dict = {"runs": runs, "comparisons": {}}
        for run in runs:
            failed |= run["returncode"] != 0
            print(f"{name} on {run['label']}: exit {run['returncode']}, {run['cases']} cases, wall "
                  f"{run['wall_seconds']} s, median {run['median_case_seconds']} s/case ({run['provider']})",
                  flush=True)
        for run in runs[1:]:
            if runs[0]["returncode"] or run["returncode"]:
                continue
            comparison = compare_outputs(args.out / name / labels[0], args.out / name / run["label"], args.tolerance)
            entry["comparisons"][run["label"]] = asdict(comparison)
            failed |= bool(comparison.differences)
            print(f"  {run['label']} vs {labels[0]}: {comparison.files} files, max float difference "
                  f"{comparison.max_float_difference:.3g}, {comparison.differing_voxels} voxels differ, "
                  f"{len(comparison.differences)} differences {comparison.differences[:3]}", flush=True)
        report["algorithms"][name] = entry
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "device_comparison.json").write_text(json.dumps(report, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
