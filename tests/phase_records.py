"""A phase whose jobs are recorded as run, without a container: object-CXR submissions as small `docker save`
archives made here (their digests proven from their bytes, no engine needed), and for every planned job the
result.json and state.json a finished task leaves, written with the phase's own record writers. Used by the phase's
leaderboard tests and by benchmarks/bench_phase_scale.py (50 teams x 500 cases)."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import tarfile
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from medchallenge.jobs import JobLimits, JobResult, OutputResult, SocketValue
from medchallenge.phase.layout import PhaseLayout
from medchallenge.phase.records import failed_before_running, write_result, write_state
from medchallenge.phase.task import STATE_FIELDS
from medchallenge.sockets import Socket

TIME_LIMIT = "Time limit exceeded"


def image_archive(path: Path, salt: str) -> None:
    """A `docker save` archive (Docker's legacy layout) of a one-layer image whose configuration names `salt`:
    its ID is the sha256 of its configuration, its layer's diff ID the sha256 of the layer's tar."""
    layer_buffer = io.BytesIO()
    with tarfile.open(fileobj=layer_buffer, mode="w") as layer_tar:
        data = f"{salt}\n".encode()
        info = tarfile.TarInfo("team.txt")
        info.size = len(data)
        layer_tar.addfile(info, io.BytesIO(data))
    layer = layer_buffer.getvalue()
    layer_hex = hashlib.sha256(layer).hexdigest()
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {"User": "1000", "Labels": {"team": salt}},
                         "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer_hex}"]}, "history": []},
                        separators=(",", ":")).encode()
    config_hex = hashlib.sha256(config).hexdigest()
    manifest = json.dumps([{"Config": f"{config_hex}.json", "RepoTags": None,
                            "Layers": [f"{layer_hex}/layer.tar"]}]).encode()
    with tarfile.open(path, "w") as tar:
        for name, content in ((f"{layer_hex}/layer.tar", layer), (f"{config_hex}.json", config),
                              ("manifest.json", manifest)):
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))


def submissions_file(folder: Path, teams: list[str], refused: list[str] = ()) -> Path:
    """An archive per team and the submissions file naming them; the `refused` teams' archives are not archives."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for team in [*teams, *refused]:
        if team in refused:
            (folder / f"{team}.tar").write_bytes(b"not an archive")
        else:
            image_archive(folder / f"{team}.tar", team)
        lines.append(f'[[submission]]\nteam = "{team}"\nimage = "{team}.tar"\n')
    (folder / "submissions.toml").write_text("\n".join(lines))
    return folder / "submissions.toml"


def object_centres(ground_truth: Path) -> dict[str, list[tuple[float, float]]]:
    """The centre of each foreign object per image of object-CXR's annotations.csv (its coordinates averaged)."""
    centres = {}
    with open(ground_truth / "annotations.csv", newline="") as handle:
        for row in csv.DictReader(handle):
            shapes = [list(map(float, s.split()[1:])) for s in row["annotation"].split(";") if s.strip()]
            centres[row["image_name"]] = [(float(np.mean(s[0::2])), float(np.mean(s[1::2]))) for s in shapes]
    return centres


def record_jobs(out: Path, team: str, centres: dict[str, list[tuple[float, float]]], found: float, seed: int,
                size: int, failed_every: int = 0, swap_xy: bool = False) -> int:
    """The records every planned job of `team` leaves when it is over: its points are the objects' centres found
    with probability `found`, jittered, plus a false one in an image of `size` pixels (x and y swapped with
    `swap_xy`); every `failed_every`-th job failed (1: all, 0: none). Returns the number of jobs."""
    layout = PhaseLayout.of(out)
    now = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
    rng = np.random.default_rng(seed)
    submission = json.loads(layout.submission_file(team).read_text())
    for index, job in enumerate(submission["jobs"]):
        spec = json.loads(layout.task(job["job_id"]).read_text())
        sockets = {s["slug"]: Socket(**s) for s in spec["sockets"]}
        value = spec["inputs"][0]
        inputs = [SocketValue(value["pk"], sockets[value["socket"]], image_pk=value["image_pk"],
                              image_name=value["image_name"], image_file=Path(value["image_file"]))]
        limits = JobLimits(**spec["limits"])
        folder = layout.job(job["job_id"])
        folder.mkdir(parents=True, exist_ok=True)
        if failed_every and index % failed_every == 0:
            result = failed_before_running(layout, job["job_id"], TIME_LIMIT, inputs, limits)
        else:
            shown = [(x + rng.normal(0, 2), y + rng.normal(0, 2)) for x, y in centres[job["case"]]
                     if rng.random() < found]
            points = [{"name": f"foreign object {k}", "point": [y, x, 0.0] if swap_xy else [x, y, 0.0],
                       "probability": round(0.5 + rng.random() / 2, 4)} for k, (x, y) in enumerate(shown)]
            points.append({"name": "false", "point": [float(rng.uniform(0, size)), float(rng.uniform(0, size)), 0.0],
                           "probability": round(rng.random() / 2, 4)})
            likelihood = float(np.clip((0.6 if centres[job["case"]] else 0.4) + rng.normal(0, 1.1 - found), 0, 1))
            pk = spec["pk_base"]
            likelihood_socket, points_socket = sockets["foreign-object-likelihood"], sockets["foreign-objects"]
            outputs = [
                OutputResult(likelihood_socket, SocketValue(pk + 1, likelihood_socket, value=round(likelihood, 4)),
                             None),
                OutputResult(points_socket, SocketValue(pk + 2, points_socket, content=json.dumps(
                    {"name": "Foreign objects", "type": "Multiple points", "points": points,
                     "version": {"major": 1, "minor": 0}}).encode()), None)]
            result = JobResult(pk=job["job_id"], status="succeeded", error=None, exit_code=0,
                               wall_seconds=float(rng.uniform(20, 40)), peak_memory_bytes=int(3e8), gpu_passed=False,
                               used_gpu=None, inputs=inputs, outputs=outputs, limits=limits,
                               cpu_seconds=float(rng.uniform(15, 30)), folder=folder)
        write_result(folder, result)
        data = result.to_json()
        write_state(layout, job["job_id"], {**{k: data[k] for k in STATE_FIELDS}, "cause": None,
                                            "task_seconds": data["wall_seconds"] + 2, "host": "recorded",
                                            "started": now, "finished": now})
    return len(submission["jobs"])
