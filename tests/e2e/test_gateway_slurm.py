"""A gateway route with backend = "slurm" against the real Slurm (.ci/provision-slurm.sh): a chest radiograph's job goes
to the cluster as a phase task and its SR is the one the local backend gives; a Slurm job cancelled under the study
is submitted again and the result sent once, or, lost more often than the route allows, gets a failure note; a
gateway killed while the Slurm job runs takes that same job up again after its restart (one submission, one
result); an image that fails on its own gets the failure note and failed/ with its job record. The images:
grand-challenge-forge's object-CXR template (tests/external_images), as is, slowed down, and failing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pydicom
import pytest
from gateway_helpers import REPO, FakePacs, GatewayProcess, copy_study, free_port, send_files, states, wait_for
from pydicom.uid import generate_uid
from test_external_images import docker_images  # noqa: F401 (the fixture building the images)
from test_gateway_images import forge_model, gateway_config, image_route

from medchallenge.dicom.sr import read_failure_note, read_point_report

IMAGE = "mc-test-h30-gwslurm"
SLOW_SECONDS = 20  # long enough to cancel the job, or kill the gateway, while it runs
ENTRYPOINTS = {"slow": ["sh", "-c", f"sleep {SLOW_SECONDS} && exec python inference.py"],
               "crash": ["sh", "-c", "echo 'the model file weights.onnx is missing' >&2; exit 1"]}
# body part: (image variant, the route's [route.slurm] keys; None: the local backend)
ROUTES = {"LOCAL": (None, None), "SLURM": (None, 'job_name_prefix = "pacs-"\n'),
          "SLOW": ("slow", ""), "CRASH": ("crash", ""),
          "ONCE": ("slow", "max_resubmissions = 0\n")}


@pytest.fixture(scope="module")
def cluster(docker_images, slurm, studies, tmp_path_factory) -> SimpleNamespace:  # noqa: F811
    """The forge object-CXR image and its slow and failing variants, and a gateway configuration with a route per
    body part (ROUTES): LOCAL on the local backend, the others on Slurm."""
    root = tmp_path_factory.mktemp("gateway-slurm")
    base = docker_images["forge-object-cxr"]
    images = {None: base}
    for name, entrypoint in ENTRYPOINTS.items():
        images[name] = f"{IMAGE}:{name}"
        subprocess.run(["docker", "build", "--quiet", "--tag", images[name], "-"], check=True, capture_output=True,
                       text=True, input=f"FROM {base}\nENTRYPOINT {json.dumps(entrypoint)}\n")
    model = forge_model("object-cxr", root / "cxr-model.tar.gz")
    routes = "".join(image_route(f"cxr-{part.lower()}", ["CR", "DX"], [part], images[variant], "object-cxr", model)
                     + (f'backend = "slurm"\n[route.slurm]\ncpus = 1\n{keys}' if keys is not None else "")
                     for part, (variant, keys) in ROUTES.items())
    return SimpleNamespace(root=root, routes=routes, radiograph=studies["cxr"])


@pytest.fixture
def gateway(cluster, tmp_path):
    """A gateway with the cluster's routes (work folder tmp_path/work, on this one-node cluster's shared disk)."""
    pacs, port = FakePacs(), free_port()
    config = tmp_path / "gateway.toml"
    config.write_text(gateway_config(tmp_path / "work", port, pacs.port) + cluster.routes)
    check = subprocess.run([sys.executable, "-m", "medchallenge.gateway", "--config", str(config), "--check"],
                           capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO / "shared")})
    assert check.returncode == 0, check.stderr
    process = GatewayProcess(config, tmp_path / "gateway.log")
    running = SimpleNamespace(process=process, pacs=pacs, port=port, config=config, work=tmp_path / "work",
                              log=tmp_path / "gateway.log")
    try:
        process.wait_ready()
        yield running
    finally:
        running.process.stop()
        pacs.close()
        for record in running.work.glob("*/*/slurm.json"):  # nothing of a failed test left in Slurm
            for submission in json.loads(record.read_text())["submissions"]:
                for prefix in ("mc-", "pacs-"):
                    subprocess.run(["scancel", f"--name={prefix}{submission['name']}"], check=False)


def send_study(cluster, gateway, body_part: str, folder: Path) -> str:
    """The radiograph as a new study with `body_part` (its route), sent; its Study Instance UID."""
    uid = generate_uid()
    files = copy_study(cluster.radiograph, folder, StudyInstanceUID=uid, BodyPartExamined=body_part)
    assert set(send_files(files, gateway.port)) == {0}
    return uid


def received_for(pacs: FakePacs, uid: str) -> list[pydicom.Dataset]:
    return [ds for ds in pacs.received if str(ds.StudyInstanceUID) == uid]


def slurm_record(work: Path, state: str = "*") -> dict | None:
    """The study's record once its last submission has its Slurm id (it is written before sbatch, the id after)."""
    records = list(work.glob(f"{state}/*/slurm.json"))
    record = json.loads(records[0].read_text()) if records else None
    return record if record and record["submissions"] and record["submissions"][-1]["slurm_job_id"] else None


def slurm_state(job_id: str) -> str:
    return subprocess.run(["squeue", "--noheader", "--format=%T", f"--jobs={job_id}"], capture_output=True,
                          text=True).stdout.strip()


def test_a_radiograph_through_a_slurm_route_gives_the_sr_of_the_local_backend(cluster, gateway, tmp_path):
    local = send_study(cluster, gateway, "LOCAL", tmp_path / "local")
    on_slurm = send_study(cluster, gateway, "SLURM", tmp_path / "slurm")
    wait_for(lambda: states(gateway.work)["sent"] == 2, 300, "both studies sent")
    wait_for(lambda: len(gateway.pacs.received) == 2, 60, "two SRs in the PACS")
    ((local_sr,), (slurm_sr,)) = received_for(gateway.pacs, local), received_for(gateway.pacs, on_slurm)
    assert read_point_report(slurm_sr) == read_point_report(local_sr) == (0.5, [])  # the forge template's value
    assert '"cxr-slurm"' in slurm_sr.to_json() and '"cxr-local"' in local_sr.to_json()
    for local_item, slurm_item in zip(local_sr.ContentSequence, slurm_sr.ContentSequence, strict=True):
        assert local_item.ConceptNameCodeSequence == slurm_item.ConceptNameCodeSequence
    record = slurm_record(gateway.work, "sent")
    assert [s["end"] for s in record["submissions"]] == ["succeeded"]
    shown = subprocess.run(["scontrol", "show", "job", "--oneliner", record["submissions"][0]["slurm_job_id"]],
                           capture_output=True, text=True, check=True).stdout
    assert f"JobName=pacs-{record['submissions'][0]['name']} " in shown  # the route's job name prefix
    assert not any((gateway.work / "cluster").iterdir())  # the job's folder on the shared disk is removed
    for study in (gateway.work / "sent").iterdir():  # the job's record, as the local backend keeps it
        assert json.loads((study / "job" / "result.json").read_text())["status"] == "succeeded"


def test_a_slurm_job_cancelled_under_the_study_is_submitted_again_and_the_result_sent_once(cluster, gateway,
                                                                                           tmp_path):
    uid = send_study(cluster, gateway, "SLOW", tmp_path / "slow")
    record = wait_for(lambda: slurm_record(gateway.work, "running"), 120, "the study's Slurm job")
    first = record["submissions"][0]["slurm_job_id"]
    wait_for(lambda: slurm_state(first) == "RUNNING", 120, "the Slurm job running")
    subprocess.run(["scancel", first], check=True)  # as an administrator cancels it, or a lost node ends it
    wait_for(lambda: states(gateway.work)["sent"] == 1, 300, "the study sent after the job was submitted again")
    wait_for(lambda: received_for(gateway.pacs, uid), 60, "the SR in the PACS")
    (sr,) = received_for(gateway.pacs, uid)
    assert read_point_report(sr) == (0.5, [])
    record = slurm_record(gateway.work, "sent")
    assert [s["end"] for s in record["submissions"]] == ["cancelled", "succeeded"]
    assert record["submissions"][1]["slurm_job_id"] != first
    assert f"the cluster lost Slurm job {first} (cancelled)" in gateway.log.read_text()
    assert len(gateway.pacs.received) == 1


def test_a_job_the_cluster_lost_more_often_than_the_route_allows_fails_with_a_note(cluster, gateway, tmp_path):
    uid = send_study(cluster, gateway, "ONCE", tmp_path / "once")  # max_resubmissions = 0
    record = wait_for(lambda: slurm_record(gateway.work, "running"), 120, "the study's Slurm job")
    job = record["submissions"][0]["slurm_job_id"]
    wait_for(lambda: slurm_state(job) == "RUNNING", 120, "the Slurm job running")
    subprocess.run(["scancel", job], check=True)
    wait_for(lambda: states(gateway.work)["failed"] == 1, 120, "the study failed")
    (note,) = wait_for(lambda: received_for(gateway.pacs, uid), 60, "the failure note in the PACS")
    assert read_failure_note(note).startswith("AI detector cxr-once could not process this study")
    failed = next((gateway.work / "failed").iterdir())
    assert "cxr-once: the cluster lost its job 1 time(s) (last: cancelled); not submitted again" in (
        failed / "error.txt").read_text()
    assert [s["end"] for s in json.loads((failed / "slurm.json").read_text())["submissions"]] == ["cancelled"]
    assert not any((gateway.work / "cluster").iterdir())


@pytest.mark.parametrize("id_written", [True, False], ids=["id-written", "killed-before-the-id-was-written"])
def test_a_gateway_restarted_while_the_slurm_job_runs_takes_up_the_same_job(cluster, gateway, tmp_path, id_written):
    uid = send_study(cluster, gateway, "SLOW", tmp_path / "slow")
    record = wait_for(lambda: slurm_record(gateway.work, "running"), 120, "the study's Slurm job")
    (submission,) = record["submissions"]
    wait_for(lambda: slurm_state(submission["slurm_job_id"]) == "RUNNING", 120, "the Slurm job running")
    gateway.process.kill()
    assert slurm_state(submission["slurm_job_id"]) == "RUNNING"  # the job goes on without the gateway
    if not id_written:  # as if killed between sbatch and writing its id: the job is found by its name
        (path,) = gateway.work.glob("running/*/slurm.json")
        path.write_text(json.dumps({**record, "submissions": [{**submission, "slurm_job_id": None}]}))
    gateway.process = GatewayProcess(gateway.config, gateway.log)
    gateway.process.wait_ready()
    wait_for(lambda: states(gateway.work)["sent"] == 1, 300, "the study sent after the restart")
    wait_for(lambda: received_for(gateway.pacs, uid), 60, "the SR in the PACS")
    assert len(received_for(gateway.pacs, uid)) == 1 and len(gateway.pacs.received) == 1
    record = slurm_record(gateway.work, "sent")
    assert record["submissions"] == [{**submission, "end": "succeeded"}]  # that same job, no second submission
    assert "was running when the gateway stopped; queued again" in gateway.log.read_text()


def test_an_image_failing_on_the_cluster_gets_the_failure_note(cluster, gateway, tmp_path):
    uid = send_study(cluster, gateway, "CRASH", tmp_path / "crash")
    wait_for(lambda: states(gateway.work)["failed"] == 1, 300, "the study failed")
    (note,) = wait_for(lambda: received_for(gateway.pacs, uid), 60, "the failure note in the PACS")
    assert read_failure_note(note).startswith("AI detector cxr-crash could not process this study")
    failed = next((gateway.work / "failed").iterdir())
    error = (failed / "error.txt").read_text()
    assert "cxr-crash failed: The algorithm exited with status 1" in error and "weights.onnx" not in error
    result = json.loads((failed / "job" / "result.json").read_text())  # its record, as the job runner writes it
    assert result["status"] == "failed" and "weights.onnx" in "\n".join(result["stderr_tail"])
    assert [s["end"] for s in json.loads((failed / "slurm.json").read_text())["submissions"]] == ["failed"]
    assert not any((gateway.work / "cluster").iterdir())
