"""medchallenge.phase without Docker: the submissions file as hostile input, an archive's image proven by its bytes
and the tagless stream an engine loads, --retry-failed, a job's identity, the hashes kept across runs, the local
backend's bounds, and `phase status` from a phase folder.
The phase with real containers: tests/e2e/test_phase.py."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import socket
import sys
import tarfile
from pathlib import Path

import pytest

from medchallenge.errors import InputError
from medchallenge.jobs import EmulationError, JobLimits
from medchallenge.phase import status as phase_status
from medchallenge.phase.backend import Resources
from medchallenge.phase.run import open_backend, retry_failed
from medchallenge.phase.evaluate import evaluation_fingerprint
from medchallenge.phase.hashes import HashCache, sha256_file
from medchallenge.phase.archive import VerifiedImage, verify_archive, write_load_stream
from medchallenge.phase.images import EngineError, ensure_loaded
from medchallenge.phase.layout import PhaseLayout
from medchallenge.phase.local import LocalBackend, Work
from medchallenge.phase.plan import PlannedSubmission, job_id
from medchallenge.phase.records import PhaseRecords
from medchallenge.phase.submissions import read_submissions
from medchallenge.phase.task import GuardedLauncher

HEX = "ab" * 32


def write_toml(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "phase.toml"
    path.write_text(text)
    return path


def test_a_submissions_file_gives_tags_archives_models_and_each_submissions_own_memory_and_gpu(tmp_path):
    (tmp_path / "alpha.tar.gz").write_bytes(b"x")
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "alpha.tar.gz").write_bytes(b"m")
    path = write_toml(tmp_path, '[[submission]]\nteam = "alpha"\nimage = "alpha.tar.gz"\n'
                                'model = "models/alpha.tar.gz"\nmemory_gb = 16\ngpu = true\n\n[[submission]]\n'
                                'team = "Beta_2"\nimage = "registry.example/beta/algo:1.0"\n')
    parsed = read_submissions(path)
    alpha, beta = parsed.submissions
    assert (alpha.team, alpha.archive, alpha.model, alpha.memory_gb, alpha.gpu) == \
        ("alpha", (tmp_path / "alpha.tar.gz").resolve(), (tmp_path / "models" / "alpha.tar.gz").resolve(), 16.0, True)
    assert (beta.archive, beta.image, beta.model, beta.memory_gb, beta.gpu) == \
        (None, "registry.example/beta/algo:1.0", None, None, None)


@pytest.mark.parametrize(("entry", "message"), [
    ('team = "../etc"\nimage = "a:1"', r"submission 1: team must be 1-64 letters"),
    ('team = "a/b"\nimage = "a:1"', r"team must be 1-64 letters"),
    ('team = ".hidden"\nimage = "a:1"', r"team must be 1-64 letters"),
    ('team = "x" \nimage = "a:1"\nextra = 1', r"unknown key\(s\) 'extra'"),
    ('team = "x"\nimage = "../outside.tar"', r"\(team x\): image: '../outside.tar' must be a path relative"),
    ('team = "x"\nimage = "/etc/passwd.tar"', r"must be a path relative to the submissions file's folder"),
    ('team = "x"\nimage = "link.tar"', r"'link.tar' leads outside the submissions file's folder"),
    ('team = "x"\nimage = "missing.tar.gz"', r"'missing.tar.gz' is not a file"),
    ('team = "x"\nimage = "a:1"\nmodel = "../../model.tar.gz"', r"model: .* must be a path relative"),
    ('team = "x"\nimage = "a b; rm -rf /"', r"is neither an archive .* nor an image reference"),
    ('team = "x"\nimage = "a:1"\nmemory_gb = true', r"memory_gb must be a number of GB above 1"),
    ('team = "x"\nimage = "a:1"\ngpu = "yes"', r"gpu must be true or false"),
])
def test_a_hostile_submission_is_refused_in_one_line_naming_the_file_and_submission(tmp_path, entry, message):
    (tmp_path / "outside.tar").write_bytes(b"x")
    folder = tmp_path / "phase"
    folder.mkdir()
    (folder / "link.tar").symlink_to(tmp_path / "outside.tar")
    path = write_toml(folder, f"[[submission]]\n{entry}\n")
    with pytest.raises(InputError) as raised:
        read_submissions(path)
    text = str(raised.value)
    assert text.startswith(f"{path}: ") and "\n" not in text
    assert re.search(message, text), text


@pytest.mark.parametrize(("text", "message"), [
    ('[[submission]]\nteam = "Alpha"\nimage = "a:1"\n[[submission]]\nteam = "alpha"\nimage = "b:1"\n',
     "team alpha is listed twice (as Alpha before"),
    ("[[submission]\n", "not a TOML file"),
    ("title = 'x'\n", "unknown table(s) 'title'"),
    ("[slurm]\npartition = 'gpu'\n", "[slurm]: the submissions file carries no scheduler options"),
])
def test_a_bad_submissions_file_is_refused_in_one_line(tmp_path, text, message):
    path = write_toml(tmp_path, text)
    with pytest.raises(InputError, match=re.escape(message)):
        read_submissions(path)


@pytest.mark.parametrize("name", ["a.tar", "a.tar.gz", "a.tgz", "a.tar.xz"])
def test_every_archive_form_grand_challenge_takes_is_an_archive_in_the_submissions_file(tmp_path, name):
    (tmp_path / name).write_bytes(b"x")
    path = write_toml(tmp_path, f'[[submission]]\nteam = "a"\nimage = "{name}"\n')
    assert read_submissions(path).submissions[0].archive == (tmp_path / name).resolve()


def test_an_oversized_submissions_file_is_refused_before_it_is_parsed(tmp_path):
    path = write_toml(tmp_path, "#" * (2 << 20))
    with pytest.raises(InputError, match="larger than 1048576 bytes"):
        read_submissions(path)


def save_archive(path: Path, manifest: object | None = None, gzip: bool = True) -> tuple[Path, str]:
    """A one-layer image archive in Docker's legacy layout, made here (its configuration named by its hash, its
    layer by its diff ID), or with `manifest` instead of its own; the archive and its image ID."""
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as tar:
        info = tarfile.TarInfo("hello.txt")
        info.size = 6
        tar.addfile(info, io.BytesIO(b"hello\n"))
    layer_bytes = layer.getvalue()
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {"User": "1000", "Cmd": ["/hello"]},
                         "rootfs": {"type": "layers",
                                    "diff_ids": [f"sha256:{hashlib.sha256(layer_bytes).hexdigest()}"]}}).encode()
    image = hashlib.sha256(config).hexdigest()
    own = [{"Config": f"{image}.json", "RepoTags": ["a:1"], "Layers": [f"{'c' * 64}/layer.tar"]}]
    members = ((f"{'c' * 64}/layer.tar", layer_bytes), (f"{image}.json", config),
               ("manifest.json", json.dumps(own if manifest is None else manifest).encode()))
    with tarfile.open(path, "w:gz" if gzip else "w") as tar:
        for name, content in members:
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    return path, f"sha256:{image}"


def test_an_archives_digest_is_its_image_configurations_proven_by_its_bytes(tmp_path):
    archive, image = save_archive(tmp_path / "a.tar.gz")
    verified = verify_archive(archive, 1 << 30)
    assert verified.digest == image and verified.config == f"{image.removeprefix('sha256:')}.json"
    assert [layer[0] for layer in verified.layers] == [f"{'c' * 64}/layer.tar"]
    assert VerifiedImage.from_json(json.loads(json.dumps(verified.to_json()))) == verified


def test_an_archive_of_small_layers_before_its_configuration_is_verified(tmp_path):
    layers = []
    for number in range(8):  # 32 MiB of layers just under 4 MiB each, read before the configuration (Docker's order)
        layer = io.BytesIO()
        with tarfile.open(fileobj=layer, mode="w") as tar:
            info = tarfile.TarInfo(f"file{number}")
            info.size = (4 << 20) - 8192
            tar.addfile(info, io.BytesIO(os.urandom(info.size)))
        layers.append(layer.getvalue())
    diff_ids = [hashlib.sha256(layer).hexdigest() for layer in layers]
    config = json.dumps({"os": "linux", "comment": "x" * 65536, "rootfs": {
        "type": "layers", "diff_ids": [f"sha256:{d}" for d in diff_ids]}}).encode()
    image = hashlib.sha256(config).hexdigest()
    manifest = json.dumps([{"Config": f"{image}.json", "Layers": [f"{d}/layer.tar" for d in diff_ids]}]).encode()
    with tarfile.open(tmp_path / "many.tar", "w") as tar:
        for name, data in [*((f"{d}/layer.tar", layer) for d, layer in zip(diff_ids, layers)),
                           (f"{image}.json", config), ("manifest.json", manifest)]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    assert verify_archive(tmp_path / "many.tar", 1 << 30).digest == f"sha256:{image}"


@pytest.mark.parametrize(("manifest", "message"), [
    ([{"Config": f"{HEX}.json"}, {"Config": f"{HEX}.json"}], "holds 2 images; a submission is one image"),
    ([{"Config": "../../etc/passwd", "Layers": []}], "its manifest names no image configuration and layers"),
    ({"Config": "x"}, "holds 0 images"),
    ([{"Config": f"{HEX}.json", "Layers": []}], "the image configuration its manifest names is not in it"),
])
def test_an_archive_with_a_bad_manifest_is_refused_in_one_line(tmp_path, manifest, message):
    archive, _ = save_archive(tmp_path / "a.tar", manifest, gzip=False)
    with pytest.raises(InputError, match=re.escape(f"image archive a.tar: {message}")):
        verify_archive(archive, 1 << 30)


def test_an_archive_that_is_not_one_is_refused_in_one_line(tmp_path):
    (tmp_path / "junk.tar.gz").write_bytes(os.urandom(4096))
    with pytest.raises(InputError, match=r"image archive junk\.tar\.gz: not a readable `docker save` archive"):
        verify_archive(tmp_path / "junk.tar.gz", 1 << 30)
    with tarfile.open(tmp_path / "empty.tar", "w"):
        pass
    with pytest.raises(InputError, match=r"empty\.tar: no manifest\.json"):
        verify_archive(tmp_path / "empty.tar", 1 << 30)


def test_the_stream_an_engine_loads_holds_the_verified_image_without_tags(tmp_path):
    archive, image = save_archive(tmp_path / "a.tar.gz")
    stream = io.BytesIO()
    write_load_stream(archive, verify_archive(archive, 1 << 30), stream)
    with tarfile.open(fileobj=io.BytesIO(stream.getvalue())) as tar:
        names = tar.getnames()
        manifest = json.loads(tar.extractfile("manifest.json").read())
    hex_id = image.removeprefix("sha256:")
    assert manifest[0]["Config"] == f"{hex_id}.json" and manifest[0]["RepoTags"] == []
    assert sorted(names) == sorted([f"{hex_id}.json", manifest[0]["Layers"][0], "manifest.json"])


def test_an_engine_that_cannot_load_a_verified_archive_is_a_cause_outside_the_job(tmp_path):
    archive, _ = save_archive(tmp_path / "a.tar.gz")
    with pytest.raises(EngineError, match=r"image archive a\.tar\.gz: `false load` failed: status 1"):
        ensure_loaded("false", archive, verify_archive(archive, 1 << 30))  # an engine that fails every command


def test_the_failed_jobs_of_named_submissions_are_run_again_on_purpose(tmp_path):
    layout = PhaseLayout.of(tmp_path)
    planned = [PlannedSubmission("alpha", [("c1", "j1"), ("c2", "j2")]), PlannedSubmission("beta", [("c1", "j3")])]
    for job, status in (("j1", "failed"), ("j2", "succeeded"), ("j3", "failed")):
        layout.state(job).parent.mkdir(parents=True)
        layout.state(job).write_text(json.dumps({"status": status}))
    assert retry_failed(layout, planned, ["alpha"]) == 1
    assert not layout.state("j1").exists() and layout.state("j2").exists() and layout.state("j3").exists()
    assert retry_failed(layout, planned, ["all"]) == 1 and not layout.state("j3").exists()
    with pytest.raises(InputError, match="--retry-failed gamma: no such submission"):
        retry_failed(layout, planned, ["gamma"])


def test_a_jobs_identity_changes_with_the_image_case_model_limits_and_gpu_only():
    base = dict(challenge="tb-caverns", digest=f"sha256:{HEX}", case_hash="c" * 64, model_hash=None,
                limits=JobLimits(memory_gb=8), gpu=False)
    reference = job_id(**base)
    assert job_id(**base) == reference and re.fullmatch(r"[0-9a-f]{32}", reference)
    for key, other in (("digest", "sha256:" + "cd" * 32), ("case_hash", "d" * 64), ("model_hash", "e" * 64),
                       ("limits", JobLimits(memory_gb=16)), ("limits", JobLimits(memory_gb=8, time_limit_s=60)),
                       ("gpu", True), ("challenge", "object-cxr")):
        assert job_id(**{**base, key: other}) != reference, key


def test_file_hashes_are_computed_again_only_when_a_file_changes(tmp_path):
    file = tmp_path / "case.nii.gz"
    file.write_bytes(b"one")
    calls = []

    def counted(path: Path) -> str:
        calls.append(path)
        return sha256_file(path)

    cache = HashCache(tmp_path / "hashes.json")
    first = cache.get(file, "sha256", counted)
    cache.save()
    assert HashCache(tmp_path / "hashes.json").get(file, "sha256", counted) == first and len(calls) == 1
    file.write_bytes(b"two, longer")
    assert HashCache(tmp_path / "hashes.json").get(file, "sha256", counted) != first and len(calls) == 2


def test_the_local_backend_runs_no_more_than_jobs_cpus_memory_and_gpus_allow(tmp_path):
    backend = LocalBackend(PhaseLayout.of(tmp_path), jobs=3, progress=False)
    backend.capacity = Resources(cpus=4, memory_gb=16, gpus=1, time_limit_s=0)

    def work(cpus: float, memory: float, gpus: int = 0) -> Work:
        return Work("t", ["true"], Resources(cpus, memory, gpus, 60))

    assert backend._fits(work(8, 64, 2), [])  # alone, whatever it asks for
    assert backend._fits(work(1, 4), [work(1, 4), work(2, 8)])
    assert not backend._fits(work(1, 1), [work(1, 1)] * 3)  # --jobs 3
    assert not backend._fits(work(2, 4), [work(1, 4), work(2, 4)])  # CPUs
    assert not backend._fits(work(1, 8), [work(1, 10)])  # memory
    assert not backend._fits(work(1, 1, 1), [work(1, 1, 1)])  # GPUs


def test_the_local_backend_runs_a_step_after_all_it_waits_for_whatever_their_outcome(tmp_path):
    layout = PhaseLayout.of(tmp_path)
    backend = LocalBackend(layout, jobs=2, progress=False)
    marker = tmp_path / "order.txt"

    def append(text: str, status: int = 0) -> list[str]:
        return [sys.executable, "-c", f"import time; time.sleep(0.3); open({str(marker)!r}, 'a').write('{text} '); "
                                      f"raise SystemExit({status})"]

    first = backend.submit_after([], append("a", 1), "a")
    second = backend.submit_after([], append("b"), "b")
    last = backend.submit_after([first, second], append("c"), "c")
    backend.wait([last])
    assert sorted(marker.read_text().split()[:2]) == ["a", "b"] and marker.read_text().split()[2] == "c"
    assert (layout.logs / "c.log").exists()


def test_slurm_is_refused_in_one_line_where_this_installation_has_no_slurm_backend(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "medchallenge.phase.slurm", None)  # as if the module did not exist
    with pytest.raises(InputError, match="--backend slurm: this installation of medchallenge has no Slurm backend"):
        open_backend("slurm", PhaseLayout.of(tmp_path), {})


def fake_phase(out: Path) -> PhaseLayout:
    """A phase folder as tasks and a Slurm backend leave it: one job of each kind."""
    layout = PhaseLayout.of(out)
    jobs = {"a1": {"status": "succeeded", "error": None}, "a2": {"status": "failed", "error": "Time limit exceeded "
                                                                   "(the job ran longer than 60 s)"},
            "a3": {"status": "interrupted", "cause": "node_fail", "requeued": 1}, "a4": None, "a5": None}
    layout.out.mkdir(parents=True)
    layout.phase_file.write_text(json.dumps({"challenge": "tb-caverns", "submissions": ["alpha", "broken"]}))
    for team, record in (("alpha", {"refused": None, "jobs": [{"case": f"c{i}", "job_id": f"a{i}"}
                                                             for i in range(1, 6)]}),
                         ("broken", {"refused": "image archive b.tar: no manifest.json", "jobs": []})):
        layout.submission(team).mkdir(parents=True)
        layout.submission_file(team).write_text(json.dumps(record))
    for identity, state in jobs.items():
        layout.job(identity).mkdir(parents=True)
        if state is not None:
            layout.state(identity).write_text(json.dumps(state))
    layout.running("a4").write_text(json.dumps({"host": "node-7", "pid": 1, "started": "now"}))
    return layout


def test_phase_status_says_per_submission_what_is_done_running_failed_lost_and_what_to_do(tmp_path, capsys):
    layout = fake_phase(tmp_path / "out")
    assert phase_status.main([str(layout.out)]) == 0
    text = capsys.readouterr().out
    assert re.search(r"alpha\s+5\s+1\s+1\s+1\s+0\s+2\s+not evaluated", text), text
    assert "1 failed (the team's result): Time limit exceeded (the job ran longer than 60 s)" in text
    assert "1 lost outside the job (node_fail); the next `phase run` runs them again" in text
    assert "broken                   refused: image archive b.tar: no manifest.json" in text
    assert "to do: alpha: 2 job(s) not run: `medchallenge phase run` again" in text
    assert phase_status.main([str(layout.out), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["complete"] is False and data["leaderboard"] is None
    assert data["submissions"][0]["lost"] == {"node_fail": 1}


def test_phase_status_adds_up_what_finished_jobs_used_per_submission_and_once_per_job_for_the_phase(tmp_path,
                                                                                                  capsys):
    layout = fake_phase(tmp_path / "out")
    used = {"a1": ("succeeded", 10.0, 4.5, 0.0, 300 << 20), "a2": ("failed", 60.25, None, 60.25, 100 << 20),
            "g1": ("succeeded", 2.0, 1.25, 2.0, None)}  # a2: its CPU time not measurable, g1: its memory
    for job, (outcome, wall, cpu, gpu, peak) in used.items():
        layout.job(job).mkdir(parents=True, exist_ok=True)
        layout.state(job).write_text(json.dumps({"status": outcome, "wall_seconds": wall, "cpu_seconds": cpu,
                                                 "gpu_seconds": gpu, "peak_memory_bytes": peak}))
    layout.state("a3").write_text(json.dumps({"status": "interrupted", "wall_seconds": 99.0}))  # not over: not added
    layout.submission("gamma").mkdir(parents=True)  # shares job a1 with alpha
    layout.submission_file("gamma").write_text(json.dumps({"refused": None, "jobs": [
        {"case": "c1", "job_id": "a1"}, {"case": "c2", "job_id": "g1"}]}))
    layout.phase_file.write_text(json.dumps({"challenge": "tb-caverns", "submissions": ["alpha", "broken", "gamma"]}))
    status = phase_status.phase_status(layout)
    alpha, broken, gamma = status["submissions"]
    assert alpha["usage"] == {"jobs": 2, "wall_seconds": 70.25, "cpu_seconds": 4.5, "gpu_seconds": 60.25,
                              "max_peak_memory_bytes": 300 << 20}
    assert broken["usage"] == {"jobs": 0, "wall_seconds": None, "cpu_seconds": None, "gpu_seconds": None,
                               "max_peak_memory_bytes": None}
    assert gamma["usage"] == {"jobs": 2, "wall_seconds": 12.0, "cpu_seconds": 5.75, "gpu_seconds": 2.0,
                              "max_peak_memory_bytes": 300 << 20}
    assert status["usage"] == {"jobs": 3, "wall_seconds": 72.25, "cpu_seconds": 5.75, "gpu_seconds": 62.25,
                               "max_peak_memory_bytes": 300 << 20}
    assert phase_status.main([str(layout.out)]) == 0
    text = capsys.readouterr().out
    assert "    2 finished job(s) used: wall 70.2 s, CPU 4.5 s, GPU 60.2 s, peak memory 300 MiB" in text
    assert "phase: 3 finished job(s) used: wall 72.2 s, CPU 5.8 s, GPU 62.2 s, peak memory 300 MiB (a job two " \
           "submissions share counted once)" in text


class CountingImage:
    """A launcher's image checks, counted; `refusal`: they refuse the image."""

    description = "counted image"

    def __init__(self, refusal: str | None = None):
        self.refusal = refusal
        self.checks = 0

    def check(self) -> list[str]:
        self.checks += 1
        if self.refusal:
            raise EmulationError(self.refusal)
        return ["the image sets GRAND_CHALLENGE_X"]


def test_an_images_upload_checks_once_passed_are_not_done_again_by_the_phases_other_tasks(tmp_path):
    layout = PhaseLayout.of(tmp_path)
    first, second, other = CountingImage(), CountingImage(), CountingImage()
    for image in (first, second):
        assert GuardedLauncher(image, False, layout.image_check(f"sha256:{HEX}")).check() == \
            ["the image sets GRAND_CHALLENGE_X"]
    GuardedLauncher(other, False, layout.image_check(f"sha256:{'cd' * 32}")).check()
    assert (first.checks, second.checks, other.checks) == (1, 0, 1)  # by digest: another image is checked
    refused = [CountingImage("image x: The container runs as root") for _ in range(2)]
    for image in refused:  # a refusal is not kept (it may be the engine failing): each task checks again
        with pytest.raises(EmulationError, match="runs as root"):
            GuardedLauncher(image, False, layout.image_check(f"sha256:{'ef' * 32}")).check()
    assert [image.checks for image in refused] == [1, 1]
    tagged = CountingImage()  # a tag without a digest (a gateway route's image, which may change): checked each time
    for _ in range(2):
        GuardedLauncher(tagged, False, None).check()
    assert tagged.checks == 2


def test_a_second_phase_run_on_the_same_folder_is_refused_in_one_line(tmp_path, capsys):
    import fcntl

    from medchallenge.phase.cli import main as phase

    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "gt").mkdir()
    with open(out / "run.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        assert phase(["run", "--challenge", "tb-caverns", "--submissions", str(tmp_path / "s.toml"), "--cases",
                      str(tmp_path), "--ground-truth", str(tmp_path / "gt"), "--output", str(out)]) == 1
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line == f"error: {out}: another `medchallenge phase run` is using this folder (`medchallenge phase " \
                   f"status {out}`)"


def test_jobs_without_a_result_are_queued_while_a_run_is_in_progress(tmp_path):
    layout = fake_phase(tmp_path / "out")
    (layout.out / "run.json").write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid(),
                                                     "finished": None}))
    alpha = phase_status.phase_status(layout)["submissions"][0]
    assert (alpha["queued"], alpha["not-run"], alpha["running"]) == (2, 0, 1)
    (layout.out / "run.json").write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid(),
                                                     "finished": "2026-01-01T00:00:00+00:00"}))
    assert phase_status.phase_status(layout)["submissions"][0]["not-run"] == 2


def test_an_evaluation_is_due_again_only_when_its_jobs_results_ground_truth_or_options_change(tmp_path):
    layout = fake_phase(tmp_path / "out")
    ground_truth = tmp_path / "gt"
    ground_truth.mkdir()
    (ground_truth / "gt_boxes.csv").write_text("id\n")
    phase = {"challenge": "tb-caverns", "edition": None, "bootstrap": {"n": 10, "seed": 0, "level": 0.95},
             "ground_truth": str(ground_truth), "submissions": ["alpha"]}
    layout.phase_file.write_text(json.dumps(phase))
    assert evaluation_fingerprint(PhaseRecords(layout), "alpha") is None  # jobs without a final result
    for job in ("a3", "a4", "a5"):
        layout.state(job).write_text(json.dumps({"status": "succeeded", "finished": "t1"}))
    first = evaluation_fingerprint(PhaseRecords(layout), "alpha")
    assert first is not None and evaluation_fingerprint(PhaseRecords(layout), "alpha") == first
    layout.state("a4").write_text(json.dumps({"status": "succeeded", "finished": "t2"}))  # run again
    second = evaluation_fingerprint(PhaseRecords(layout), "alpha")
    assert second != first
    (ground_truth / "gt_boxes.csv").write_text("id\nTST_001\n")
    third = evaluation_fingerprint(PhaseRecords(layout), "alpha")
    assert third != second
    layout.phase_file.write_text(json.dumps({**phase, "bootstrap": {"n": 20, "seed": 0, "level": 0.95}}))
    assert evaluation_fingerprint(PhaseRecords(layout), "alpha") not in (first, second, third)
