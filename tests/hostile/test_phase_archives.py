"""A team's `docker save` archive against the phase, on real Docker and Podman (issue 37 items 1, 2, 4 and 10; issue
38 section 3). The archives are made here from a real `docker save` of a tiny image, then rewritten as an attacker
would: tags naming other teams', the organiser's and a gateway route's images, a manifest-only claim of another
image's ID, a configuration that is not the one claimed, a layer that is not its diff ID, a second manifest, entries
the manifest does not name, a layer bomb. Each is refused in one line when the phase is planned, before it names a
job, and loading an accepted one moves no tag."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import lzma
import os
import subprocess
import tarfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from medchallenge.grand_challenge.emulator import ALGORITHMS
from medchallenge.jobs import JobLimits
from medchallenge.phase import task as phase_task
from medchallenge.phase.cases import Case
from medchallenge.phase.hashes import HashCache
from medchallenge.phase.layout import PhaseLayout
from medchallenge.phase.plan import PhaseSettings, plan_submission
from medchallenge.phase.submissions import Submission

PREFIX = f"mc-test-h37-archive-{os.getpid()}"  # this run's own tags, removed after it
VICTIMS = ("other-team", "organiser", "gateway-route")  # whose tags an attacker's archive names
ENGINES = ("docker", "podman")


def build(folder: Path, tag: str, content: str) -> str:
    """A tiny two-layer image (FROM scratch: no base image, no network) tagged `tag` in Docker; its ID."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "a.txt").write_text(content)
    (folder / "b.txt").write_text(content * 2)
    (folder / "Dockerfile").write_text('FROM scratch\nCOPY a.txt /a.txt\nCOPY b.txt /b.txt\nCMD ["/a.txt"]\n')
    built = subprocess.run(["docker", "build", "--quiet", "--tag", tag, str(folder)], check=True,
                           capture_output=True, text=True)
    return built.stdout.strip().splitlines()[-1]


def image_id(engine: str, reference: str) -> str | None:
    found = subprocess.run([engine, "image", "inspect", "--format", "{{.Id}}", reference], capture_output=True,
                           text=True)
    if found.returncode != 0:
        return None
    digest = found.stdout.strip()
    return digest if digest.startswith("sha256:") else f"sha256:{digest}"


def tags_of(engine: str, digest: str) -> list[str]:
    found = subprocess.run([engine, "image", "inspect", "--format", "{{json .RepoTags}}", digest],
                           capture_output=True, text=True, check=True)
    return json.loads(found.stdout) or []


def remove(engine: str, *references: str) -> None:
    for reference in references:  # one at a time: Podman removes none of them when one is missing
        subprocess.run([engine, "image", "rm", "--force", reference], capture_output=True)


@pytest.fixture(scope="module")
def images(docker_compose, podman, tmp_path_factory):
    """The attacker's image saved (then removed from both engines), and the victims' images tagged in both."""
    root = tmp_path_factory.mktemp("images")
    attacker = build(root / "attacker", f"{PREFIX}-attacker:1", f"attacker {PREFIX}\n")
    saved = subprocess.run(["docker", "save", f"{PREFIX}-attacker:1"], check=True, capture_output=True).stdout
    victims = {role: f"{PREFIX}-{role}:1" for role in VICTIMS}
    for role, tag in victims.items():
        build(root / role, tag, f"{role} {PREFIX}\n")
    victim_archive = root / "victims.tar"
    subprocess.run(["docker", "save", "--output", str(victim_archive), *victims.values()], check=True)
    subprocess.run(["podman", "load", "--input", str(victim_archive)], check=True, capture_output=True)
    ids = {engine: {tag: image_id(engine, tag) for tag in victims.values()} for engine in ENGINES}
    assert all(ids["docker"].values()) and ids["podman"] == ids["docker"]
    yield SimpleNamespace(attacker=attacker, saved=saved, victims=victims, ids=ids["docker"])
    for engine in ENGINES:
        remove(engine, f"{PREFIX}-attacker:1", attacker, *victims.values(), *ids["docker"].values())


@pytest.fixture
def attacker_absent(images):
    """Neither engine has the attacker's image: the phase has to load it."""
    for engine in ENGINES:
        remove(engine, f"{PREFIX}-attacker:1", images.attacker)
        assert image_id(engine, images.attacker) is None


def members(saved: bytes) -> list[tuple[tarfile.TarInfo, bytes]]:
    with tarfile.open(fileobj=io.BytesIO(saved)) as tar:
        return [(info, tar.extractfile(info).read() if info.isreg() else b"") for info in tar]


def write_archive(path: Path, entries: list[tuple[tarfile.TarInfo, bytes]]) -> Path:
    """A tar of `entries`, compressed as the name says (.tar.gz, .tgz, .tar.xz)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for info, data in entries:
            info = tarfile.TarInfo(info.name) if info.isreg() else info
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    data = buffer.getvalue()
    if path.name.endswith((".gz", ".tgz")):
        data = gzip.compress(data, compresslevel=1)
    elif path.name.endswith(".xz"):
        data = lzma.compress(data)
    path.write_bytes(data)
    return path


def regular(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    return tarfile.TarInfo(name), data


def replaced(entries: list, name: str, data: bytes) -> list:
    return [(info, data if info.name == name else old) for info, old in entries]


def manifest_of(entries: list) -> list[dict]:
    return json.loads(next(data for info, data in entries if info.name == "manifest.json"))


def tagged(images, entries: list) -> list:
    """`entries` with manifest.json's RepoTags (and the legacy `repositories`) naming every victim's tag."""
    manifest = manifest_of(entries)
    manifest[0]["RepoTags"] = list(images.victims.values())
    repositories = {tag.split(":")[0]: {"1": images.attacker.removeprefix("sha256:")}
                    for tag in images.victims.values()}
    entries = replaced(entries, "manifest.json", json.dumps(manifest).encode())
    return replaced(entries, "repositories", json.dumps(repositories).encode())


def plan(tmp_path: Path, archive: Path, engine: str = "docker", cases: int = 3, max_image_gb: float = 10):
    """The phase's plan of one submission of `archive` on `cases` cases: (the planned submission, its
    submission.json, the task specs written)."""
    layout = PhaseLayout.of(tmp_path / "out")
    layout.out.mkdir(parents=True, exist_ok=True)
    settings = PhaseSettings("tb-caverns", engine, JobLimits(memory_gb=2), False)
    if max_image_gb != 10:
        settings = PhaseSettings("tb-caverns", engine, JobLimits(memory_gb=2), False, int(max_image_gb * (1 << 30)))
    cases_planned = [Case(file=tmp_path / f"case{i}.mha", hash=f"{i:064x}", image_pk=str(i),
                          image_name=f"case{i}.mha", image_file=tmp_path / f"case{i}.mha") for i in range(cases)]
    planned = plan_submission(layout, settings, ALGORITHMS["tb-caverns"],
                              Submission("mallory", archive.name, archive, None, None, None), cases_planned,
                              HashCache(layout.file_hashes))
    record = json.loads(layout.submission_file("mallory").read_text())
    specs = [json.loads(path.read_text()) for path in sorted(layout.tasks.glob("*.json"))]
    return planned, record, specs


def assert_refused(tmp_path: Path, archive: Path, message: str, **options) -> None:
    """Refused in one line naming the archive, in submission.json's `refused`, before any job is named."""
    planned, record, specs = plan(tmp_path, archive, **options)
    assert planned.refused is not None and message in planned.refused, planned.refused
    assert planned.refused.startswith(f"image archive {archive.name}: ") and "\n" not in planned.refused
    assert record["refused"] == planned.refused and record["jobs"] == [] and specs == []
    assert planned.jobs == []


def assert_victims_kept(images) -> None:
    for engine in ENGINES:
        for tag, digest in images.ids.items():
            assert image_id(engine, tag) == digest, f"{engine}: {tag} moved"


@pytest.mark.parametrize("engine", ENGINES)
def test_loading_an_archive_whose_tags_name_others_images_moves_no_tag(images, attacker_absent, tmp_path, engine):
    archive = write_archive(tmp_path / "mallory.tar", tagged(images, members(images.saved)))
    planned, record, specs = plan(tmp_path, archive, engine)
    assert planned.refused is None and record["digest"] == images.attacker and len(specs) == 3
    assert phase_task.image_to_run(specs[0]) == images.attacker  # what a task on a node runs: loaded by digest
    assert image_id(engine, images.attacker) == images.attacker
    assert_victims_kept(images)
    assert tags_of(engine, images.attacker) == []  # the attacker's image gets no tag either


@pytest.mark.parametrize("variant", ["second-manifest", "duplicate-manifest", "dot-manifest", "unnamed-entry"])
def test_a_refused_archive_whose_tags_name_others_images_moves_no_tag(images, attacker_absent, tmp_path, variant):
    entries = tagged(images, members(images.saved))
    hidden = json.dumps(manifest_of(entries)).encode()
    extra = {"second-manifest": regular("hidden/manifest.json", hidden),
             "duplicate-manifest": regular("manifest.json", hidden),
             "dot-manifest": regular("./manifest.json", hidden),
             "unnamed-entry": regular("payload.bin", b"x" * 100)}[variant]
    clean = replaced(members(images.saved), "manifest.json", json.dumps(manifest_of(members(images.saved))).encode())
    archive = write_archive(tmp_path / "mallory.tar", [*clean, extra] if variant != "second-manifest"
                            else [*clean[:-2], extra, *clean[-2:]])
    message = {"second-manifest": "a second manifest.json ('hidden/manifest.json')",
               "duplicate-manifest": "'manifest.json' appears twice",
               "dot-manifest": "'manifest.json' appears twice",
               "unnamed-entry": "holds 'payload.bin', which its manifest does not name"}[variant]
    assert_refused(tmp_path, archive, message)
    assert_victims_kept(images)
    assert image_id("docker", images.attacker) is None


def test_a_manifest_only_claim_of_another_images_id_is_refused(images, tmp_path):
    victim = images.ids[images.victims["other-team"]].removeprefix("sha256:")
    manifest = [{"Config": f"{victim}.json", "RepoTags": None, "Layers": []}]
    archive = write_archive(tmp_path / "claim.tar.gz", [regular("manifest.json", json.dumps(manifest).encode())])
    assert archive.stat().st_size < 1024  # as the probe's 266 bytes
    assert_refused(tmp_path, archive, "the image configuration its manifest names is not in it")


def test_a_configuration_that_is_not_the_claimed_one_is_refused(images, tmp_path):
    entries = members(images.saved)
    config_name = manifest_of(entries)[0]["Config"]
    config = json.loads(next(data for info, data in entries if info.name == config_name))
    config["config"]["Cmd"] = ["/b.txt"]  # another command under the same ID
    archive = write_archive(tmp_path / "config.tar", replaced(entries, config_name, json.dumps(config).encode()))
    assert_refused(tmp_path, archive, "its image configuration does not hash to the image ID its manifest claims")


def test_a_layer_that_is_not_its_diff_id_is_refused(images, tmp_path):
    entries = members(images.saved)
    layer_name = manifest_of(entries)[0]["Layers"][-1]
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as tar:
        info = tarfile.TarInfo("b.txt")
        info.size = 4
        tar.addfile(info, io.BytesIO(b"evil"))
    archive = write_archive(tmp_path / "layer.tar.gz", replaced(entries, layer_name, layer.getvalue()))
    assert_refused(tmp_path, archive, f"layer 2 ('{layer_name}') does not hash to its diff ID")


def test_a_gzip_layer_bomb_is_refused_before_it_is_unpacked(images, tmp_path):
    entries = members(images.saved)
    layer_name = manifest_of(entries)[0]["Layers"][-1]
    bomb = gzip.compress(b"\0" * (64 << 20), compresslevel=9)  # 64 MiB in about 64 KiB
    archive = write_archive(tmp_path / "bomb.tar", replaced(entries, layer_name, bomb))
    assert archive.stat().st_size < 1 << 20
    assert_refused(tmp_path, archive, "unpacks beyond the image size budget", max_image_gb=16 / 1024)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bomb.tar", "out"]  # nothing unpacked beside it


def test_an_archive_whose_tar_headers_exceed_the_budget_is_refused_before_it_is_read(tmp_path):
    header = tarfile.TarInfo("0" * 64 + "/layer.tar")
    header.size = 11 << 30  # 11 GiB said by the header; the data is not there
    archive = tmp_path / "huge.tar.gz"
    archive.write_bytes(gzip.compress(header.tobuf(format=tarfile.GNU_FORMAT) + b"\0" * 4096))
    assert_refused(tmp_path, archive, "larger than the image size budget of 10 GiB uncompressed")


def oci_layout(entries: list) -> list:
    """The archive as Docker 25+ writes it: blobs/sha256/<digest> for the configuration, the layers and the OCI
    manifest, index.json and oci-layout beside a manifest.json naming the blobs."""
    manifest = manifest_of(entries)[0]
    data = {info.name: content for info, content in entries}
    config = data[manifest["Config"]]
    layers = [data[name] for name in manifest["Layers"]]

    def digest(content: bytes) -> str:
        return hashlib.sha256(content).hexdigest()

    oci_manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": f"sha256:{digest(config)}",
                   "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": f"sha256:{digest(layer)}",
                    "size": len(layer)} for layer in layers]}).encode()
    index = json.dumps({"schemaVersion": 2, "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": f"sha256:{digest(oci_manifest)}",
        "size": len(oci_manifest)}]}).encode()
    blobs = [regular(f"blobs/sha256/{digest(content)}", content) for content in [config, *layers, oci_manifest]]
    legacy = [{"Config": f"blobs/sha256/{digest(config)}", "RepoTags": manifest["RepoTags"],
               "Layers": [f"blobs/sha256/{digest(layer)}" for layer in layers]}]
    return [*blobs, regular("index.json", index), regular("oci-layout", b'{"imageLayoutVersion": "1.0.0"}'),
            regular("manifest.json", json.dumps(legacy).encode())]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("form", ["mallory.tar", "mallory.tar.gz", "mallory.tgz", "mallory.tar.xz", "oci.tar.gz"])
def test_every_form_teams_upload_loads_on_both_engines_when_verified(images, attacker_absent, tmp_path, engine,
                                                                      form):
    entries = tagged(images, members(images.saved))
    archive = write_archive(tmp_path / form, oci_layout(entries) if form.startswith("oci") else entries)
    planned, record, specs = plan(tmp_path, archive, engine, cases=1)
    assert planned.refused is None and record["digest"] == images.attacker
    assert phase_task.image_to_run(specs[0]) == images.attacker
    assert image_id(engine, images.attacker) == images.attacker and tags_of(engine, images.attacker) == []
    assert_victims_kept(images)


def test_an_oci_blob_that_is_not_its_digest_is_refused(images, tmp_path):
    entries = oci_layout(members(images.saved))
    index = next(i for i, (info, _) in enumerate(entries) if info.name == "index.json")
    entries.insert(index, regular("blobs/sha256/" + "0" * 64, b"{}"))
    assert_refused(tmp_path, write_archive(tmp_path / "oci.tar", entries), f"'blobs/sha256/{'0' * 64}' does not hash")


def test_an_archive_replaced_after_planning_is_run_again_not_failed_for_the_team(images, attacker_absent, tmp_path):
    archive = write_archive(tmp_path / "mallory.tar", members(images.saved))
    planned, _, specs = plan(tmp_path, archive, cases=2)
    assert planned.refused is None
    entries = members(images.saved)
    layer_name = manifest_of(entries)[0]["Layers"][0]
    write_archive(archive, replaced(entries, layer_name, b"\0" * 2048))  # a different layer, after the plan
    spec_file = PhaseLayout.of(tmp_path / "out").task(specs[0]["job_id"])
    assert phase_task.main([str(spec_file)]) == phase_task.OUTSIDE
    state = json.loads(PhaseLayout.of(tmp_path / "out").state(specs[0]["job_id"]).read_text())
    assert state["status"] == "interrupted" and state["cause"] == "engine", state
    assert "changed since the phase was planned" in state["error"]
    assert image_id("docker", images.attacker) is None


def link(name: str, target: str) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = tarfile.SYMTYPE, target
    return info, b""


def pax_bomb(entries: list) -> bytes:
    """The archive with a 2 MiB PAX header before its first member (tarfile would read it into memory)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info, data = entries[0]
        info = tarfile.TarInfo(info.name)
        info.size, info.pax_headers = len(data), {"comment": "x" * (2 << 20)}
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.mark.parametrize(("variant", "message"), [
    ("link-out", "links outside the archive"),
    ("absolute-name", "a member's name leaves the archive ('/etc/cron.d/x')"),
    ("device", "is not a file, folder or link"),
    ("pax-bomb", "not a readable `docker save` archive (HeaderError)"),
    ("zstd", "compressed with zstd, which the phase does not read"),
    ("odd-index", "holds 'blobs/sha256/"),
])
def test_archive_members_an_engine_might_follow_are_refused_in_one_line(images, tmp_path, variant, message):
    entries = members(images.saved)
    device = tarfile.TarInfo("dev")
    device.type = tarfile.CHRTYPE
    if variant == "pax-bomb":
        archive = tmp_path / "mallory.tar"
        archive.write_bytes(pax_bomb([regular("a", b"1")]))
    elif variant == "zstd":
        archive = tmp_path / "mallory.tar.zst"
        archive.write_bytes(b"(\xb5/\xfd" + os.urandom(64))
    else:
        extra = {"link-out": [link("evil/layer.tar", "../../../etc/shadow")],
                 "absolute-name": [regular("/etc/cron.d/x", b"* * * * * root sh\n")], "device": [(device, b"")],
                 "odd-index": [regular("index.json", b'{"manifests": "blobs", "layers": 7}'),
                               regular("blobs/sha256/" + hashlib.sha256(b"x").hexdigest(), b"x")]}[variant]
        archive = write_archive(tmp_path / "mallory.tar", [*entries, *extra])
    assert_refused(tmp_path, archive, message)


def consistent(entries: list, layer: bytes | None = None, **config_fields) -> list:
    """`entries` with their last layer's bytes and configuration fields replaced, the diff ID, the configuration's
    name and the manifest made to match (an archive that hashes right but holds something an engine cannot load)."""
    manifest = manifest_of(entries)
    layer_name, config_name = manifest[0]["Layers"][-1], manifest[0]["Config"]
    config = json.loads(next(data for info, data in entries if info.name == config_name))
    if layer is not None:
        config["rootfs"]["diff_ids"][-1] = f"sha256:{hashlib.sha256(layer).hexdigest()}"
        entries = replaced(entries, layer_name, layer)
    config.update(config_fields)
    config_bytes = json.dumps(config).encode()
    manifest[0]["Config"] = f"{hashlib.sha256(config_bytes).hexdigest()}.json"
    entries = [(tarfile.TarInfo(manifest[0]["Config"]) if info.name == config_name else info,
                config_bytes if info.name == config_name else data) for info, data in entries]
    return replaced(entries, "manifest.json", json.dumps(manifest).encode())


@pytest.mark.parametrize(("variant", "message"), [
    ("not-a-tar", "layer 2 ('"), ("windows", "its image configuration is not a Linux image's")])
def test_an_archive_that_hashes_right_but_no_engine_would_load_is_refused_not_retried(images, tmp_path, variant,
                                                                                     message):
    entries = members(images.saved)
    rebuilt = consistent(entries, layer=os.urandom(4096)) if variant == "not-a-tar" else consistent(entries,
                                                                                                    os="windows")
    archive = write_archive(tmp_path / "mallory.tar", rebuilt)
    assert_refused(tmp_path, archive, message)
    if variant == "not-a-tar":
        assert_refused(tmp_path, archive, "is not a tar")


def test_an_archive_rebuilt_consistently_is_accepted_as_its_own_image_and_loaded_untagged(images, tmp_path):
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as tar:
        info = tarfile.TarInfo("c.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"c\n"))
    archive = write_archive(tmp_path / "mallory.tar.gz", consistent(members(images.saved), layer=layer.getvalue()))
    planned, record, specs = plan(tmp_path, archive, cases=1)
    assert planned.refused is None and record["digest"] not in (images.attacker, *images.ids.values())
    try:
        assert phase_task.image_to_run(specs[0]) == record["digest"]
        assert tags_of("docker", record["digest"]) == []  # not the attacker's tag its manifest still names
    finally:
        remove("docker", record["digest"])
