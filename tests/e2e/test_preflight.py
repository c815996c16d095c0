"""`medchallenge preflight` with real Docker on tiny images the project did not write as algorithms
(tests/job_images/broken, FROM the offline python:3.11-slim): a good one scores, and each broken one gives one clear
line in the report while the rest of the run (the other jobs, the scoring, the report, the Docker engine) is
unaffected. The report page is checked in the headless browser as the leaderboard page is."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from test_leaderboard_page import Elements, browser, run_browser

from medchallenge.preflight import main as preflight

VERSION = os.environ.get("MEDCHALLENGE_VERSION") or "0.1.0"
IMAGE = "medchallenge-test/broken-algorithm"
# behaviour: the one line of the report (a regular expression) for each job
BROKEN = {
    "no-output": r"Output file 'tb-cavern-boxes\.json' was not produced",
    "wrong-name": r"Output file 'tb-cavern-boxes\.json' was not produced \(/output held instead: "
                  r"tb_cavern_boxes\.json\)",
    "invalid-json": r"The output file 'tb-cavern-boxes\.json' is not valid json",
    "crash": r"The algorithm exited with status 1: RuntimeError: the model file weights\.onnx is missing",
    "slow": r"Time limit exceeded \(the job ran longer than 4 s\)",
    "memory": r"The algorithm exited with status 1: MemoryError \(the job ran out of memory: it may use 0\.5 GiB",
    "memory-kill": r"The container was killed as it exceeded its memory limit \(1\.5 GB\)",
    "no-start": r'The container could not start: exec: "no-such-program": executable file not found in \$PATH '
                r"\(grand-challenge runs the image's ENTRYPOINT and CMD as they are",
    "gpu-memory": r"The algorithm exited with status 1: RuntimeError: CUDA out of memory\. .*\(the job ran out of GPU "
                  r"memory, which the container's memory limit does not cover",
    "network": r"The algorithm exited with status 1: socket\.gaierror: .*\(the job tried to reach the network; "
               r"grand-challenge jobs have none",
    "outside": r"Output file 'tb-cavern-boxes\.json' was not produced \(the job wrote 1 file\(s\) outside /output "
               r"and /tmp, which grand-challenge discards: /home/user/tb-cavern-boxes\.json\)",
}


def tag(behaviour: str) -> str:
    return f"{IMAGE}:{behaviour}-{VERSION}"


@pytest.fixture(scope="module")
def images(docker_compose, repo) -> None:
    """Every behaviour's image built (seconds each: one layer over the base)."""
    for behaviour in ["ok", "busy", "box-outside", *(b for b in BROKEN if b != "no-start")]:
        subprocess.run(["docker", "build", "--quiet", "--build-arg", f"BEHAVIOUR={behaviour}", "--tag",
                        tag(behaviour), str(repo / "tests" / "job_images" / "broken")], check=True,
                       capture_output=True)
    # an entry point the image does not have: the container is made, its command cannot start
    subprocess.run(["docker", "build", "--quiet", "--tag", tag("no-start"), "-"], check=True, capture_output=True,
                   input=f'FROM {tag("ok")}\nENTRYPOINT ["no-such-program"]\n'.encode())


@pytest.fixture(scope="module")
def cohort(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("preflight-cohort")
    subprocess.run([sys.executable, "-m", "medchallenge.synth", "tb-caverns", "--out", str(root), "--cases", "2",
                    "--shape", "32", "32", "8", "--seed", "5"], check=True, capture_output=True)
    return root


def run_preflight(behaviour: str, cohort: Path, output: Path, *extra: str) -> tuple[int, dict]:
    status = preflight(["--challenge", "tb-caverns", "--image", tag(behaviour), "--cases", str(cohort / "input"),
                        "--ground-truth", str(cohort / "ground_truth"), "--output", str(output),
                        "--bootstrap", "50", "--time-limit", "4" if behaviour == "slow" else "120", "--memory-gb",
                        "1.5", *extra])
    return status, json.loads((output / "preflight.json").read_text())


def leftover_containers(behaviour: str) -> list[str]:
    """Containers of the behaviour's image still there (every job's container is removed)."""
    return subprocess.run(["docker", "ps", "--all", "--quiet", "--filter", f"ancestor={tag(behaviour)}"],
                          capture_output=True, text=True, check=True).stdout.split()


def test_a_good_image_passes_and_is_scored_with_intervals(images, cohort, tmp_path, capsys):
    status, report = run_preflight("ok", cohort, tmp_path / "out")
    assert status == 0 and report["ready"]
    assert [job["status"] for job in report["jobs"]] == ["succeeded", "succeeded"]
    for job in report["jobs"]:
        assert job["exit_code"] == 0 and job["peak_memory_bytes"] > 1 << 20 and job["used_gpu"] in (False, None)
        assert job["outputs"] == [{"socket": "tb-cavern-boxes", "relative_path": "tb-cavern-boxes.json",
                                   "valid": True, "error": None}]
        assert job["stdout_tail"][0].startswith("read ['") and job["stderr_tail"] == []
        assert job["stdout_tail"][0].endswith("model []")  # an empty /opt/ml/model without --model
    evaluation = report["evaluation"]
    assert evaluation["scored_as_missing"] == [] and set(evaluation["aggregates"]) >= {"map", "ap_at_iou_0.40"}
    assert evaluation["intervals"]["map"]["n"] == 50
    assert json.loads((tmp_path / "out" / "evaluation" / "metrics.json").read_text())["aggregates"] == \
        evaluation["aggregates"]
    assert {c["condition"] for c in report["conditions"]} >= {"network", "memory", "time", "model", "GPU"}
    review = evaluation["review"]
    assert "x and y are swapped" in review["transforms_tried"]
    assert [entry["file"] for entry in review["figures"]] == ["review/001.png", "review/002.png"]
    assert all((tmp_path / "out" / entry["file"]).read_bytes().startswith(b"\x89PNG") for entry in review["figures"])
    table = capsys.readouterr().out
    assert re.search(r"TST_001\.nii\.gz\s+succeeded", table) and "2/2 jobs succeeded; ready to upload" in table
    assert not leftover_containers("ok")


def test_what_the_gateway_would_refuse_is_said_per_job_though_grand_challenge_accepts_it(images, cohort, tmp_path,
                                                                                       capsys):
    status, report = run_preflight("box-outside", cohort, tmp_path / "out")
    # grand-challenge accepts valid JSON, so every job succeeded; the check fired: not ready, the reason first
    assert status == 1 and not report["ready"] and len(report["warnings"]) == 2
    assert report["warnings"][0].startswith("TST_001.nii.gz: grand-challenge accepts this result")
    for job in report["jobs"]:
        assert job["status"] == "succeeded"
        assert [n for n in job["notes"] if "gateway would refuse" in n] == [
            "grand-challenge accepts this result and the evaluator scores it as written, but the hospital gateway "
            "would refuse it: tb-cavern-boxes: boxes[0]: voxel_bbox outside the 32x32x8 image or unordered"]
    table = capsys.readouterr().out
    assert table.count("but the hospital gateway would refuse it: tb-cavern-boxes: boxes[0]") == 3
    assert table.splitlines()[-2].startswith("2/2 jobs succeeded; NOT ready, check first: TST_001.nii.gz: "
                                             "grand-challenge accepts this result")
    ok_status, ok_report = run_preflight("ok", cohort, tmp_path / "ok")
    assert not [n for job in ok_report["jobs"] for n in job["notes"] if "gateway would refuse" in n]


def test_a_job_burning_a_second_of_cpu_reports_its_cpu_seconds_and_no_gpu_seconds_in_the_report_and_page(
        images, cohort, tmp_path, capsys):
    status, report = run_preflight("busy", cohort, tmp_path / "out", "--gpu", "off")
    assert status == 0
    for job in report["jobs"]:  # its cgroup's CPU time, read every 0.1 s while it runs: one process, so <= its wall
        assert 0.5 < job["cpu_seconds"] <= job["wall_seconds"] and job["gpu_seconds"] == 0, job
    summary = report["summary"]
    assert summary["total_cpu_seconds"] == round(sum(job["cpu_seconds"] for job in report["jobs"]), 3)
    assert summary["total_gpu_seconds"] == 0
    html = (tmp_path / "out" / "preflight.html").read_text()
    assert "<th>CPU seconds</th><th>GPU seconds</th>" in html
    assert f'<td class="number">{report["jobs"][0]["cpu_seconds"]:.2f}</td>' in html
    assert re.search(r"TST_001\.nii\.gz\s+succeeded\s+\d+\.\d\s+\d\.\d\s+\d+ MiB", capsys.readouterr().out)


@pytest.mark.parametrize("behaviour", sorted(BROKEN))
def test_a_broken_image_gives_one_clear_line_per_job_and_nothing_else(images, cohort, tmp_path, behaviour,
                                                                      capsys):
    status, report = run_preflight(behaviour, cohort, tmp_path / "out")
    assert status == 1 and not report["ready"]
    for job in report["jobs"]:
        assert job["status"] == "failed" and "\n" not in job["error"]
        assert re.match(BROKEN[behaviour], job["error"]), job["error"]
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    # the scoring still ran, every failed job as a missing prediction, and said so
    evaluation = report["evaluation"]
    assert evaluation["error"] is None and evaluation["scored_as_missing"] == ["TST_001.nii.gz", "TST_002.nii.gz"]
    assert evaluation["notes"][0].startswith("2 failed job(s) scored as the evaluator scores a missing prediction")
    assert (tmp_path / "out" / "preflight.html").exists() and not leftover_containers(behaviour)
    if behaviour.startswith("memory"):
        assert all(job["peak_memory_bytes"] > 256 << 20 for job in report["jobs"])


def test_the_model_tarball_is_in_opt_ml_model_and_one_with_a_link_is_refused_before_any_job(images, cohort,
                                                                                            tmp_path, capsys):
    model = tmp_path / "model"
    (model / "sub").mkdir(parents=True)
    (model / "weights.onnx").write_bytes(b"w")
    with tarfile.open(tmp_path / "model.tar.gz", "w:gz") as archive:
        archive.add(model, arcname=".")
    status, report = run_preflight("ok", cohort, tmp_path / "out", "--model", str(tmp_path / "model.tar.gz"))
    assert status == 0 and report["model"] == "model.tar.gz"
    assert all(job["stdout_tail"][0].endswith("model ['sub', 'weights.onnx']") for job in report["jobs"])
    (model / "link").symlink_to("/etc/passwd")
    with tarfile.open(tmp_path / "linked.tar.gz", "w:gz") as archive:
        archive.add(model, arcname=".")
    capsys.readouterr()
    assert preflight(["--challenge", "tb-caverns", "--image", tag("ok"), "--cases", str(cohort / "input"),
                      "--model", str(tmp_path / "linked.tar.gz"), "--output", str(tmp_path / "refused")]) == 1
    assert not (tmp_path / "refused" / "preflight.json").exists()
    [line] = capsys.readouterr().err.strip().splitlines()
    assert re.fullmatch(r"error: model linked\.tar\.gz: member \d is a link; grand-challenge's model tarballs hold "
                        r"regular files and folders only", line), line


def test_a_root_image_is_refused_before_any_job_as_grand_challenge_refuses_it(images, cohort, tmp_path, capsys):
    status = preflight(["--challenge", "tb-caverns", "--image", "python:3.11-slim", "--cases",
                        str(cohort / "input"), "--output", str(tmp_path / "out")])
    assert status == 1
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: image python:3.11-slim: The container runs as root.")
    assert not (tmp_path / "out" / "jobs").exists()


def test_the_report_page_renders_offline_with_every_job_and_score(images, cohort, tmp_path):
    browser()
    output = tmp_path / "out"
    run_preflight("crash", cohort, output)
    page = output / "preflight.html"
    html = page.read_text()
    # nothing fetched: the review's figures are PNG data URIs, one per case (both scored as missing predictions),
    # each a link to its full-resolution figure beside the page
    assert not re.search(r"\bsrc\s*=(?!\"data:image/png;base64,)", html) and "<script" not in html
    assert re.findall(r'\bhref\s*=\s*"([^"]*)"', html) == ["review/001-full.png", "review/002-full.png"]
    assert all((output / "review" / f"00{n}-full.png").read_bytes().startswith(b"\x89PNG") for n in (1, 2))
    assert html.count('src="data:image/png;base64,') == 2 and "What the algorithm did" in html
    dom = run_browser("--dump-dom", page.as_uri(), home=tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert not [line for line in dom.stderr.splitlines() if "CONSOLE" in line or "Failed to load" in line]
    elements = Elements()
    elements.feed(dom.stdout)
    assert elements.counts["jobs:tr"] == 3 and elements.counts["jobs:.failed"] == 2
    assert elements.counts["scores:tr"] == 1 + 9 and elements.counts[":.log"] == 2
    assert "RuntimeError: the model file weights.onnx is missing" in dom.stdout


KILLED_RUNNER = """
import sys
from pathlib import Path
from medchallenge.jobs import DockerImage, run_job, upload_case
from medchallenge.sockets import CT_IMAGE
image, case, work, prefix = sys.argv[1:]
ct = upload_case(Path(case), Path(work) / "storage")
run_job(DockerImage(image, name_prefix=prefix), [ct.value(1, CT_IMAGE)], [], Path(work) / "job", pk="again")
"""


def test_a_container_left_by_a_killed_runner_is_removed_when_its_job_runs_again(images, cohort, tmp_path):
    """The hospital's job runner gives a study's job the same pk at every run: the container a killed runner left
    (Docker does not stop it) is removed before the job's container starts again."""
    from medchallenge.jobs import DockerImage, run_job, upload_case
    from medchallenge.jobs.watchdog import WATCH_LABEL
    from medchallenge.sockets import CT_IMAGE, TB_CAVERN_BOXES

    prefix, case = f"medchallenge-test-killed-{VERSION}", sorted((cohort / "input").glob("*.nii.gz"))[0]
    name = f"{prefix}-again"
    (tmp_path / "runner.py").write_text(KILLED_RUNNER)
    runner = subprocess.Popen([sys.executable, str(tmp_path / "runner.py"), tag("slow"), str(case),
                               str(tmp_path / "first"), prefix])

    def container() -> str:
        return subprocess.run(["docker", "ps", "--all", "--quiet", "--filter", f"name=^{name}$"], capture_output=True,
                              text=True, check=True).stdout.strip()
    try:
        for _ in range(600):
            if container():
                break
            time.sleep(0.1)
        left = container()
        assert left and runner.poll() is None
        # its watchdog would remove it once the runner dies (tests/hostile/test_killed_runner.py): killed first here,
        # as if the machine had lost both, so that the leftover stays for the job's next run to remove
        token = subprocess.run(["docker", "inspect", "--format", f'{{{{index .Config.Labels "{WATCH_LABEL}"}}}}', left],
                               capture_output=True, text=True, check=True).stdout.strip()
        assert token and subprocess.run(["pkill", "-KILL", "-f", f"watchdog.py docker {token} "]).returncode == 0
        runner.kill()
        runner.wait(timeout=60)
        assert container() == left  # still there, still running
        ct = upload_case(case, tmp_path / "storage")
        result = run_job(DockerImage(tag("ok"), name_prefix=prefix), [ct.value(1, CT_IMAGE)], [TB_CAVERN_BOXES],
                         tmp_path / "again", pk="again")
        assert result.succeeded, result.error
        assert container() == ""  # the leftover removed before the job, the job's own after it
    finally:
        subprocess.run(["docker", "rm", "--force", name], capture_output=True)
