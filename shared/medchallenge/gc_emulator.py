"""A small grand-challenge emulator: run an algorithm one case per job, then an evaluator on the GC layout.

Per case it writes a GC-shaped job input (`inputs.json` plus the image converted to `.mha` under a UUID-like name,
as GC's upload conversion does), runs the algorithm with that folder as /input and a fresh /output, moves the
outputs to `<eval-input>/<job-pk>/output/` and finally writes `<eval-input>/predictions.json`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .io import write_json_atomic
from .logs import setup_logging

log = logging.getLogger("medchallenge.gc_emulator")


@dataclass(frozen=True)
class Socket:
    """A GC socket (component interface)."""

    slug: str
    kind: str
    super_kind: str
    relative_path: str

    def interface(self) -> dict:
        return {"title": self.slug, "slug": self.slug, "kind": self.kind, "super_kind": self.super_kind,
                "relative_path": self.relative_path}


@dataclass(frozen=True)
class AlgorithmSpec:
    """What a challenge's algorithm reads and writes on GC."""

    service: str
    inference_script: str
    case_glob: str
    input_socket: Socket
    output_sockets: tuple[Socket, ...]


ALGORITHMS = {
    "tb-caverns": AlgorithmSpec(
        service="tb-caverns-algorithm",
        inference_script="algorithms/tb_caverns/inference.py",
        case_glob="*.nii.gz",
        input_socket=Socket("ct-image", "Image", "Image", "images/ct"),
        output_sockets=(Socket("tb-cavern-boxes", "Anything", "Value", "tb-cavern-boxes.json"),),
    ),
}

Runner = Callable[[Path, Path], None]


def _open_dir(path: Path) -> Path:
    """Create `path` writable by the container user (uid 1000) whatever uid runs the emulator."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o777)
    return path


def write_job_input(case_file: Path, job_input: Path, socket: Socket) -> dict:
    """GC's provisioning of one image input: `<relative_path>/<uuid>.mha` and `inputs.json`; returns the entry."""
    import SimpleITK as sitk

    image_dir = _open_dir(job_input / socket.relative_path)
    sitk.WriteImage(sitk.ReadImage(str(case_file)), str(image_dir / f"{uuid.uuid4()}.mha"), useCompression=True)
    entry = {"pk": uuid.uuid4().int % 10**9, "interface": socket.interface(), "value": None, "file": None,
             "image": {"pk": str(uuid.uuid4()), "name": case_file.name}}
    write_json_atomic(job_input / "inputs.json", [entry])
    for path in job_input.rglob("*"):
        os.chmod(path, 0o777 if path.is_dir() else 0o644)
    return entry


def collect_job_outputs(job_output: Path, eval_input: Path, pk: str, sockets: Sequence[Socket]) -> list[dict]:
    """Move one job's outputs to `<eval_input>/<pk>/output/` and describe them as predictions.json does."""
    target = eval_input / pk / "output"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(job_output, target)
    outputs = []
    for socket in sockets:
        path = target / socket.relative_path
        if not path.exists():
            raise RuntimeError(f"job {pk}: output '{socket.relative_path}' was not produced")
        value = json.loads(path.read_text()) if socket.super_kind == "Value" else None
        outputs.append({"pk": uuid.uuid4().int % 10**9, "interface": socket.interface(), "value": value,
                        "file": None, "image": None})
    return outputs


def emulate(spec: AlgorithmSpec, cases: Sequence[Path], work: Path, run_algorithm: Runner) -> Path:
    """Run every case as one GC job; returns the evaluator's input folder holding predictions.json."""
    eval_input = _open_dir(work / "evaluation-input")
    jobs = []
    for index, case_file in enumerate(cases, start=1):
        pk = str(uuid.uuid4())
        job_input, job_output = work / "jobs" / pk / "input", _open_dir(work / "jobs" / pk / "output")
        entry = write_job_input(case_file, job_input, spec.input_socket)
        log.info("job %d/%d %s: %s", index, len(cases), pk, case_file.name)
        run_algorithm(job_input, job_output)
        jobs.append({"pk": pk, "status": "Succeeded", "inputs": [entry],
                     "outputs": collect_job_outputs(job_output, eval_input, pk, spec.output_sockets)})
    write_json_atomic(eval_input / "predictions.json", jobs)
    return eval_input


def compose_runner(spec: AlgorithmSpec, compose_file: Path, env_prefix: str) -> Runner:
    """Run the algorithm's compose service with the job folders as /input and /output."""

    def run(job_input: Path, job_output: Path) -> None:
        env = dict(os.environ, **{f"{env_prefix}_INPUT": str(job_input.resolve()),
                                  f"{env_prefix}_PREDICTIONS": str(job_output.resolve())})
        subprocess.run(["docker", "compose", "-f", str(compose_file), "run", "--rm", "--no-deps", spec.service],
                       env=env, check=True)

    return run


def local_runner(spec: AlgorithmSpec, repo: Path) -> Runner:
    """Run the algorithm's inference script with this Python (no Docker)."""

    def run(job_input: Path, job_output: Path) -> None:
        subprocess.run([sys.executable, str(repo / spec.inference_script), "--input", str(job_input),
                        "--output", str(job_output)], check=True)

    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m medchallenge.gc_emulator", description=__doc__)
    parser.add_argument("challenge", choices=sorted(ALGORITHMS))
    parser.add_argument("--cases", type=Path, required=True, help="folder of case images (batch-mode input)")
    parser.add_argument("--work", type=Path, required=True, help="empty folder for job and evaluation inputs")
    parser.add_argument("--runner", choices=["compose", "local"], default="compose")
    parser.add_argument("--repo", type=Path, default=Path.cwd(), help="repository root (compose.yaml)")
    args = parser.parse_args(argv)
    setup_logging()
    spec = ALGORITHMS[args.challenge]
    cases = sorted(args.cases.glob(spec.case_glob))
    if args.runner == "compose":
        runner = compose_runner(spec, args.repo / "compose.yaml", spec.service.removesuffix("-algorithm")
                                .replace("-", "_").upper())
    else:
        runner = local_runner(spec, args.repo)
    eval_input = emulate(spec, cases, args.work, runner)
    print(eval_input)
    return 0


if __name__ == "__main__":
    sys.exit(main())
