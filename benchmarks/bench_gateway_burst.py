"""Benchmark: a burst of radiograph studies through the hospital deployment (issue 31: 26 studies/min before).

`run()` writes $GATEWAY_BURST_STUDIES (20) CR chest radiograph studies ($GATEWAY_BENCH_RADIOGRAPH px, 2048), starts
`medchallenge gateway` and its job-runner service (`--job-runner`) as compose.hospital.yaml deploys them: the
object-CXR route runs the project's algorithm image `medchallenge/object-cxr-algorithm:$MEDCHALLENGE_VERSION` as a
grand-challenge job, handed through the route's inbox to the job runner. A PACS stand-in (pynetdicom) receives the
results. The studies are sent at once (one association, as a PACS forwards a burst), with max_parallel_jobs 1 (one
job at a time) and each value of $GATEWAY_BURST_PARALLEL ("2 4"), each on a fresh gateway and job runner. Reported
per value: studies per minute (the burst's studies over the time from its first C-STORE to its last result in the
PACS, the issue's measure, the quiet period included), the same after the quiet period, the latency of each study's
result (from the first C-STORE) p50/p90/max, and where a study's time goes (means over the burst, from the job
records): the job as the gateway waited for it (hand-over, the job runner's conversion, `docker run` and its
bookkeeping, the container, the results written as DICOM), of which the container (from `docker run` to its end) and
the rest, the job runner's own; the result sent to the PACS; the time queued (behind other studies); and the CPU
seconds per study (from the end of their start-up: the CPU they took to start, before the first study, is reported
apart) of the gateway (receiving, routing, the hand-over, sending) and of the job runner (conversion, the results as
DICOM) with the `docker` commands it ran (also apart: the gateway, the job runner itself, its `docker` commands), of the
containers (their cgroups, the job records' cpu_seconds) and of the Docker engine (dockerd and containerd without
the shims; all of the engine's work, so meaningful only where nothing else uses the engine), and the rate at which
they would keep this machine's CPUs busy (the CPU-bound ceiling). The 1-minute load average is reported: on a shared
machine the times depend on it.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_gateway import QUIET_SECONDS, ROOT, _free_port, _pacs, _send, gateway_sections

SEED = 3131


def _image() -> str:
    from medchallenge import __version__

    return f"medchallenge/object-cxr-algorithm:{os.environ.get('MEDCHALLENGE_VERSION') or __version__}"


def _config(tmp: Path, port: int, pacs_port: int, parallel: int) -> str:
    return gateway_sections(tmp, port, pacs_port) + f"""[[route]]
name = "object-cxr"
modalities = ["CR", "DX"]
interface = "object-cxr"
image = "{_image()}"
inbox = "{tmp / 'inbox'}"
timeout_seconds = 600
""" + (f"max_parallel_jobs = {parallel}\n" if parallel > 1 else "")  # 1: the default


def _studies(folder: Path, count: int, size: int) -> list[Path]:
    """`count` CR studies of one radiograph each."""
    from medchallenge.dicom.synthetic import SyntheticStudy, radiograph_dataset
    from medchallenge.io import write_dicom_atomic
    from medchallenge.synth.object_cxr_images import generate_image

    files = []
    for index in range(count):
        radiograph = generate_image(SEED, index, size, positive_fraction=0.5)
        study = SyntheticStudy(f"bench-burst-{index}", f"BURST{index}", study_description="XR CHEST")
        files.append(write_dicom_atomic(folder / f"cxr{index}.dcm", radiograph_dataset(radiograph.pixels, study)))
    return files


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def _own_and_children_cpu_seconds(pid: int) -> tuple[float, float]:
    """The CPU seconds of a process itself and of its children it waited for (the `docker` commands of the job
    runner)."""
    fields = [int(value) for value in Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[11:15]]
    return (fields[0] + fields[1]) / os.sysconf("SC_CLK_TCK"), (fields[2] + fields[3]) / os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    """The CPU seconds of a process and of its children it waited for."""
    return sum(_own_and_children_cpu_seconds(pid))


def _engine_cpu_seconds() -> float:
    """The CPU seconds of the Docker engine so far: dockerd and containerd with the children they waited for (a
    container's shim, reparented when it starts, is not counted: a lower bound); a container's own processes are in
    its cgroup, counted apart."""
    pids = subprocess.run(["pgrep", "-x", "dockerd|containerd"], capture_output=True, text=True).stdout.split()
    total = 0.0
    for pid in pids:
        try:
            total += _cpu_seconds(int(pid))
        except OSError:  # gone meanwhile
            pass
    return total


def _cpu_parts(processes: list[subprocess.Popen]) -> tuple[float, float, float]:
    """The CPU seconds so far of the gateway, of the job runner itself and of the `docker` commands it ran."""
    return (_cpu_seconds(processes[0].pid), *_own_and_children_cpu_seconds(processes[1].pid))


def _started_cpu_seconds(processes: list[subprocess.Popen], port: int, log: Path) -> tuple[float, float, float]:
    """`_cpu_parts` once the gateway and the job runner have started (imports, configuration): read once the gateway
    accepts connections and the job runner watches its inbox, before the first study."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            time.sleep(0.1)
            continue
        if "job runner: watching" in log.read_text(errors="replace"):
            return _cpu_parts(processes)
        time.sleep(0.1)
    raise RuntimeError(f"the gateway or its job runner did not start: {log.read_text()[-2000:]}")


def _burst(tmp: Path, files: list[Path], parallel: int) -> dict:
    """One burst through a fresh gateway and job runner with `parallel` jobs at once: its measures."""
    port, pacs_port = _free_port(), _free_port()
    config = tmp / f"gateway-{parallel}.toml"
    config.write_text(_config(tmp / f"p{parallel}", port, pacs_port, parallel))
    received: list = []
    server = _pacs(pacs_port, received)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "shared")}
    command = [sys.executable, "-m", "medchallenge.gateway", "--config", str(config)]
    log = open(tmp / f"gateway-{parallel}.log", "w")
    processes = [subprocess.Popen(command + extra, env=env, stdout=log, stderr=subprocess.STDOUT)
                 for extra in ([], ["--job-runner"])]
    try:
        startup = _started_cpu_seconds(processes, port, tmp / f"gateway-{parallel}.log")
        engine_before = _engine_cpu_seconds()
        started = _send(files, port)
        deadline = time.monotonic() + 1800
        while len({r[2] for r in received}) < len(files) and time.monotonic() < deadline:
            if any(p.poll() is not None for p in processes):
                raise RuntimeError(f"the gateway stopped: {(tmp / f'gateway-{parallel}.log').read_text()[-2000:]}")
            time.sleep(0.05)
        firsts = {}
        for when, _, study in received:
            firsts.setdefault(study, when - started)
        if len(firsts) < len(files):
            raise RuntimeError(f"{len(firsts)} of {len(files)} results: "
                               f"{(tmp / f'gateway-{parallel}.log').read_text()[-2000:]}")
        sent = tmp / f"p{parallel}" / "work" / "sent"
        jobs = [json.loads(p.read_text()) for p in sent.glob("*/job.json")]
        records = [json.loads(p.read_text()) for p in sent.glob("*/job/result.json")]
        containers = [record["wall_seconds"] for record in records]
        container_cpu = [record.get("cpu_seconds") or 0.0 for record in records]
        gateway_cpu, runner_cpu, engine_cli_cpu = (now - before for now, before in zip(_cpu_parts(processes), startup))
        cpu = gateway_cpu + runner_cpu + engine_cli_cpu
        engine_cpu = _engine_cpu_seconds() - engine_before
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=120)
        server.shutdown()
    latencies = list(firsts.values())
    last = max(latencies)
    key = f"parallel_{parallel}"
    detector = statistics.mean(j["detector_seconds"] for j in jobs)
    send = statistics.mean(j["send_seconds"] for j in jobs)
    container = statistics.mean(containers)
    return {
        f"{key}_studies_per_minute": round(60 * len(files) / last, 1),
        f"{key}_studies_per_minute_after_quiet_period": round(60 * len(files) / (last - QUIET_SECONDS), 1),
        f"{key}_latency_p50_seconds": round(_percentile(latencies, 0.5), 2),
        f"{key}_latency_p90_seconds": round(_percentile(latencies, 0.9), 2),
        f"{key}_latency_max_seconds": round(last, 2),
        f"{key}_job_mean_seconds": round(detector, 2),
        f"{key}_container_mean_seconds": round(container, 2),
        f"{key}_job_runner_own_mean_seconds": round(detector - container, 2),
        f"{key}_send_mean_seconds": round(send, 3),
        f"{key}_gateway_and_job_runner_cpu_seconds_per_study": round(cpu / len(files), 2),
        f"{key}_gateway_and_job_runner_startup_cpu_seconds": round(sum(startup), 2),
        f"{key}_gateway_cpu_seconds_per_study": round(gateway_cpu / len(files), 2),
        f"{key}_job_runner_own_cpu_seconds_per_study": round(runner_cpu / len(files), 2),
        f"{key}_engine_cli_cpu_seconds_per_study": round(engine_cli_cpu / len(files), 2),
        f"{key}_container_cpu_seconds_per_study": round(statistics.mean(container_cpu), 2),
        f"{key}_engine_cpu_seconds_per_study": round(engine_cpu / len(files), 2),
        # the rate at which the machine's CPUs would be busy with nothing else (the sender and PACS stand-in aside)
        f"{key}_cpu_bound_studies_per_minute": round(60 * len(os.sched_getaffinity(0)) * len(files)
                                                     / (cpu + sum(container_cpu) + engine_cpu), 1),
        f"{key}_queued_mean_seconds": round(statistics.mean(latencies) - QUIET_SECONDS - detector - send, 2),
        f"{key}_results_received": len(received),
        f"{key}_load_average_1min": round(os.getloadavg()[0], 2),
    }


def run() -> dict:
    count = int(os.environ.get("GATEWAY_BURST_STUDIES", "20"))
    size = int(os.environ.get("GATEWAY_BENCH_RADIOGRAPH", "2048"))
    parallel = [int(value) for value in os.environ.get("GATEWAY_BURST_PARALLEL", "2 4").split()]
    image = _image()
    if shutil.which("docker") is None or subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        return {"skipped": "no Docker engine"}
    if subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode != 0:
        return {"skipped": f"{image} is not built (make images)"}
    result: dict = {"gateway_burst_studies": count, "gateway_burst_radiograph_longer_side": size,
                    "gateway_burst_quiet_period_seconds": QUIET_SECONDS, "gateway_burst_image": image,
                    "gateway_burst_cpus": len(os.sched_getaffinity(0))}
    with tempfile.TemporaryDirectory(prefix="bench_gateway_burst_") as tmp:
        tmp = Path(tmp)
        files = _studies(tmp / "studies", count, size)
        for value in sorted({1, *parallel}):
            result.update(_burst(tmp, files, value))
    return result


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
