"""A job's input images are not copied (issue 42 section 1): each job's /input holds its case hard-linked to the
stored (converted) file, with inputs.json its own; what the container sees of /input (listing, sizes, modes,
owners, contents) is byte for byte what it saw with a copy; and a job can change neither its input nor, through the
shared inode, the stored case or another job's input (read-only mount, non-root user without capabilities)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from e2e.test_preflight import cohort  # noqa: F401 (fixture)

from medchallenge.jobs import DockerImage, run_job, upload_case
from medchallenge.jobs.values import share_file
from medchallenge.sockets import CT_IMAGE, TB_CAVERN_BOXES

IMAGE = "mc-test-h37-input:probe"
PROBE = r'''
import hashlib, json, os, stat
listing = []
for root, dirs, files in os.walk("/input"):
    dirs.sort()
    for name in sorted(dirs + files):
        path = os.path.join(root, name)
        st = os.lstat(path)
        entry = {"path": path, "mode": oct(st.st_mode), "uid": st.st_uid, "gid": st.st_gid}
        if stat.S_ISREG(st.st_mode):
            entry.update(size=st.st_size, sha256=hashlib.sha256(open(path, "rb").read()).hexdigest())
        listing.append(entry)
attempts = {}
for path in [e["path"] for e in listing if "sha256" in e]:
    for what, act in (("append", lambda: open(path, "ab").write(b"x")), ("chmod", lambda: os.chmod(path, 0o666)),
                      ("truncate", lambda: os.truncate(path, 0)), ("unlink", lambda: os.unlink(path)),
                      ("link", lambda: os.link(path, path + ".x")), ("rename", lambda: os.rename(path, path + ".y"))):
        try:
            act()
            attempts[f"{what} {path}"] = "done"
        except OSError as exc:
            attempts[f"{what} {path}"] = exc.strerror
json.dump({"listing": listing, "attempts": attempts}, open("/output/probe.json", "w"))
'''


@pytest.fixture(scope="module")
def probe_image(docker_compose, repo) -> None:
    """The test jobs' image (python, user 1000) whose entry point lists /input and tries to change it."""
    base = "mc-test-h37-input:base"
    subprocess.run(["docker", "build", "--quiet", "--label", "mc-test-h37=input", "--tag", base,
                    str(repo / "tests" / "job_images" / "broken")], check=True, capture_output=True)
    dockerfile = f"FROM {base}\nENTRYPOINT [\"python3\", \"-c\", {json.dumps(PROBE)}]\n"
    subprocess.run(["docker", "build", "--quiet", "--tag", IMAGE, "-"], input=dockerfile.encode(), check=True,
                   capture_output=True)


def probe(case, work: Path) -> dict:
    result = run_job(DockerImage(IMAGE, list_writes=False), [case.value(1, CT_IMAGE)], [TB_CAVERN_BOXES], work)
    return json.loads((result.folder / "output" / "probe.json").read_text())


def test_a_job_sees_its_shared_input_as_it_saw_a_copy_and_can_change_neither_it_nor_the_stored_case(
        probe_image, cohort, tmp_path, monkeypatch):  # noqa: F811
    case = upload_case(sorted((cohort / "input").glob("*.nii.gz"))[0], tmp_path / "storage")
    stored = case.file.read_bytes(), case.file.stat()
    shared = [probe(case, tmp_path / f"job{i}") for i in range(2)]
    monkeypatch.setattr(DockerImage, "input_read_only", False)  # the layout before: each job's copy
    copied = probe(case, tmp_path / "copied")
    assert shared[0]["listing"] == shared[1]["listing"] == copied["listing"]
    assert sorted(e["path"] for e in copied["listing"] if "sha256" in e) == [
        f"/input/{CT_IMAGE.relative_path}/{case.file.name}", "/input/inputs.json"]
    for job in (*shared, copied):  # nothing changed, moved or linked (read-only file system)
        assert len(job["attempts"]) == 12 and "done" not in job["attempts"].values(), job["attempts"]
        assert set(job["attempts"].values()) <= {"Read-only file system", "Permission denied"}, job["attempts"]
    image = tmp_path / "job0" / "input" / CT_IMAGE.relative_path / case.file.name
    assert image.stat().st_ino == case.file.stat().st_ino  # no copy: the stored file itself
    copy = tmp_path / "copied" / "input" / CT_IMAGE.relative_path / case.file.name
    assert copy.stat().st_ino != image.stat().st_ino
    assert (tmp_path / "job0" / "input" / "inputs.json").stat().st_ino != (
        tmp_path / "job1" / "input" / "inputs.json").stat().st_ino
    after = case.file.stat()
    # the runner made it readable for the container's user (0644 whatever the umask), nothing more
    assert case.file.read_bytes() == stored[0] and (after.st_uid, after.st_size) == (stored[1].st_uid,
                                                                                    stored[1].st_size)
    assert after.st_mode & 0o7777 == 0o644  # nobody but its owner (the runner) may write it


def test_a_file_is_shared_by_a_link_where_the_filesystem_allows_and_copied_otherwise(tmp_path, monkeypatch):
    source = tmp_path / "source.mha"
    source.write_bytes(b"case")
    assert share_file(source, tmp_path / "linked.mha") == "link"
    assert (tmp_path / "linked.mha").stat().st_ino == source.stat().st_ino

    def cross_device(*_):
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", cross_device)
    how = share_file(source, tmp_path / "other.mha")
    assert how in ("reflink", "copy") and (tmp_path / "other.mha").read_bytes() == b"case"
    assert (tmp_path / "other.mha").stat().st_ino != source.stat().st_ino
