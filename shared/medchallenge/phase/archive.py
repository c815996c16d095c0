"""A team's `docker save` archive proven to hold the image it claims, and the only thing an engine is given to load.

`verify_archive` reads the archive once, as a stream (never extracted, every size checked before it is read): exactly
one manifest.json naming one image; the image configuration's bytes hash to the image ID the manifest claims (a
Linux image's); every layer's uncompressed bytes hash to the configuration's `rootfs.diff_ids` (what the engine checks
on load) and are a tar; nothing in the archive that the manifest (or, in the OCI layout Docker 25+ writes,
index.json) does not name; the uncompressed size within the organiser's budget. Anything else is refused in one line:
an archive that passes is one an engine loads, so a load that fails later is the engine's or the node's fault.

`write_load_stream` writes, from the archive and its verified record, a plain tar in Docker's legacy layout holding
that configuration and those layers only, under a manifest with no tags: what Docker and Podman load, whatever the
team's archive's compression or layout, without creating or moving a tag (the archive's `RepoTags` are not
carried). Its bytes are checked again as they are written: an archive changed since it was verified stops the load."""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import json
import lzma
import posixpath
import re
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, BinaryIO

from ..errors import InputError

GIB = 1 << 30
DEFAULT_MAX_IMAGE_GB = 10.0  # grand-challenge's COMPONENTS_MAXIMUM_IMAGE_SIZE (10 GiB), uncompressed
MAX_JSON_BYTES = 4 << 20  # manifest.json, index.json, an image configuration, an OCI manifest
MAX_KEPT_BYTES = 32 << 20  # the small members kept in memory while the archive is read, in all
MAX_MEMBERS = 10_000
MAX_HEADER_BYTES = 1 << 20  # a PAX or GNU long-name header, read into memory by tarfile
CHUNK = 1 << 20
DIFF_ID = re.compile(r"sha256:([0-9a-f]{64})")
CONFIG_NAME = re.compile(r"(?:blobs/sha256/([0-9a-f]{64})|([0-9a-f]{64})\.json)")
BLOB = re.compile(r"blobs/sha256/([0-9a-f]{64})")
# what Docker's legacy layout and the OCI layout hold beside the manifest's members (none of it is loaded)
METADATA = re.compile(r"repositories|oci-layout|index\.json|[0-9a-f]{64}/(?:json|VERSION)")
MAGIC = {b"\x1f\x8b": "gzip", b"\xfd7zXZ\x00": "xz", b"BZh": "bzip2", b"(\xb5/\xfd": "zstd"}
OPENERS = {"gzip": lambda source: gzip.GzipFile(fileobj=source), "xz": lzma.LZMAFile, "bzip2": bz2.BZ2File}
HEADER_TYPES = (tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE, tarfile.GNUTYPE_LONGNAME,
                tarfile.GNUTYPE_LONGLINK)


class ArchiveChanged(Exception):
    """The archive's bytes are no longer those verified (it was replaced after the phase was planned)."""


@dataclass(frozen=True)
class VerifiedImage:
    """What a verified archive holds: its image ID, the member holding its configuration, its layers (member, diff
    ID, uncompressed size, in the manifest's order) and its uncompressed size."""

    digest: str
    config: str
    config_size: int
    layers: tuple[tuple[str, str, int], ...]
    size: int

    def to_json(self) -> dict[str, Any]:
        return {"digest": self.digest, "config": self.config, "config_size": self.config_size,
                "layers": [list(layer) for layer in self.layers], "size": self.size}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> VerifiedImage:
        return cls(data["digest"], data["config"], data["config_size"],
                   tuple((m, d, s) for m, d, s in data["layers"]), data["size"])


@dataclass
class _Member:
    """A regular member of the archive as read: its size, sha256, compression, the same once uncompressed, and
    whether its uncompressed bytes are a tar that an engine can unpack as a layer."""

    size: int
    sha256: str
    compression: str | None
    unpacked_sha256: str
    unpacked_size: int
    is_tar: bool
    data: bytes | None = field(default=None, repr=False)


class _Headers(tarfile.TarInfo):
    """Tar headers whose extended (PAX, GNU long name) parts are refused beyond MAX_HEADER_BYTES before tarfile
    reads them into memory."""

    def _proc_member(self, tar):
        if self.type in HEADER_TYPES and self.size > MAX_HEADER_BYTES:
            raise tarfile.HeaderError(f"an extended tar header of {self.size} bytes")
        return super()._proc_member(tar)


class _Hashing(io.RawIOBase):
    """A reader that hashes and counts what it passes on, refusing beyond `limit` bytes (`where` names the member
    in that refusal), and keeps it where asked."""

    def __init__(self, source: IO[bytes], limit: int | None = None, where: str = "", keep: bool = False,
                 hashes: bool = True):
        self.source = source
        self.hash = hashlib.sha256() if hashes else None
        self.count = 0
        self.limit = limit
        self.where = where
        self.kept: list[bytes] | None = [] if keep else None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self.source.read(len(buffer))
        buffer[:len(data)] = data
        if self.hash is not None:
            self.hash.update(data)
        self.count += len(data)
        if self.limit is not None and self.count > self.limit:
            raise InputError(f"{self.where} unpacks beyond the image size budget (more than {self.limit} bytes left "
                             "of it)")
        if self.kept is not None:
            self.kept.append(bytes(data))
        return len(data)

    def drain(self) -> None:
        while self.read(CHUNK):
            pass


def _is_tar(reader: IO[bytes]) -> bool:
    """Whether `reader` starts with a tar an engine can unpack (every header read, the data skipped as a stream)."""
    try:
        with tarfile.open(fileobj=reader, mode="r|", tarinfo=_Headers) as tar:
            for _ in tar:
                pass
    except (tarfile.TarError, EOFError):
        return False
    return True


def _shown(name: str) -> str:
    """A member's name as a refusal shows it: quoted, its odd characters escaped, at most 80 of them."""
    return ascii(name[:80])


def _listed(value: Any) -> list:
    return value if isinstance(value, list) else []


def _compression(head: bytes) -> str | None:
    return next((name for magic, name in MAGIC.items() if head.startswith(magic)), None)


def _open_stream(archive: Path) -> tuple[BinaryIO, BinaryIO]:
    """The archive's file and its tar stream (gzip, xz or bzip2 undone); InputError for another compression."""
    raw = open(archive, "rb")
    compression = _compression(raw.read(6))
    raw.seek(0)
    if compression is None:
        return raw, raw
    if compression not in OPENERS:
        raw.close()
        raise InputError(f"image archive {archive.name}: compressed with {compression}, which the phase does not "
                         "read; give the `docker save` archive as .tar, .tar.gz or .tar.xz")
    return raw, OPENERS[compression](raw)


def _normal(name: str) -> str | None:
    """A member's name as the engine reads it (`./` and trailing `/` dropped), None for one outside the archive."""
    normal = posixpath.normpath(name.strip("/") if not name.startswith("/") else "/")
    return None if normal.startswith(("/", "..")) or normal in ("", ".") else normal


def _read_member(stream: IO[bytes], size: int, budget_left: int, keep: bool, where: str) -> _Member:
    """One regular member read as a stream: hashed as it is, and uncompressed (gzip, xz, bzip2), read as a tar and
    hashed again, refused once it unpacks beyond `budget_left`."""
    hashing = _Hashing(stream)
    reader = io.BufferedReader(hashing, CHUNK)
    compression = _compression(reader.peek(6)[:6])
    if compression == "zstd":
        raise InputError(f"{where} is compressed with zstd, which the phase does not read")
    keep = keep and reader.peek(1)[:1] in (b"{", b"[")  # JSON, not a small layer
    unpacked = _Hashing(OPENERS[compression](reader) if compression else reader, budget_left, where,
                        keep and compression is None, hashes=compression is not None)  # else the same bytes
    try:
        is_tar = _is_tar(unpacked)
        unpacked.drain()
    except (OSError, EOFError, lzma.LZMAError) as exc:
        raise InputError(f"{where} is not readable as {compression or 'a file'} ({type(exc).__name__})") from None
    if hashing.count != size:
        raise InputError(f"{where} is shorter than its tar header says")
    return _Member(size, hashing.hash.hexdigest(), compression, (unpacked.hash or hashing.hash).hexdigest(),
                   unpacked.count, is_tar,
                   b"".join(unpacked.kept) if unpacked.kept is not None else None)


def _scan(archive: Path, budget: int) -> tuple[dict[str, _Member], dict[str, str]]:
    """Every regular member (by normal name) and every link (name -> target), read once; the archive's checks that
    need no manifest: names, duplicates, member kinds, sizes."""
    where = f"image archive {archive.name}"
    members: dict[str, _Member] = {}
    links: dict[str, str] = {}
    seen: set[str] = set()
    total = kept = 0
    raw, stream = _open_stream(archive)
    try:
        with raw, tarfile.open(fileobj=stream, mode="r|", tarinfo=_Headers) as tar:
            for info in tar:
                name = _normal(info.name)
                if name is None:
                    raise InputError(f"{where}: a member's name leaves the archive ({_shown(info.name)})")
                if name in seen:
                    raise InputError(f"{where}: {_shown(name)} appears twice (an engine would read the last one)")
                seen.add(name)
                if len(seen) > MAX_MEMBERS:
                    raise InputError(f"{where}: more than {MAX_MEMBERS} members")
                if posixpath.basename(name) == "manifest.json" and name != "manifest.json":
                    raise InputError(f"{where}: a second manifest.json ({_shown(name)}); an archive has one")
                if info.isdir():
                    continue
                if info.issym() or info.islnk():
                    base = posixpath.dirname(name) if info.issym() else ""
                    target = _normal(posixpath.join(base, info.linkname))
                    if target is None or info.linkname.startswith("/"):
                        raise InputError(f"{where}: {_shown(name)} links outside the archive")
                    links[name] = target
                    continue
                if not info.isreg():
                    raise InputError(f"{where}: {_shown(name)} is not a file, folder or link")
                if total + info.size > budget:
                    raise InputError(f"{where}: larger than the image size budget of {budget / GIB:g} GiB "
                                     "uncompressed (its tar headers say so before it is read)")
                keep = info.size <= MAX_JSON_BYTES and kept + info.size <= MAX_KEPT_BYTES
                member = _read_member(tar.extractfile(info), info.size, budget - total, keep,
                                      f"{where}: {_shown(name)}")
                members[name] = member
                total += max(member.size, member.unpacked_size)
                kept += len(member.data or b"")
    except (tarfile.TarError, EOFError, OSError, lzma.LZMAError) as exc:
        raise InputError(f"{where}: not a readable `docker save` archive ({type(exc).__name__})") from None
    return members, links


def _resolve(name: str, members: dict[str, _Member], links: dict[str, str], named: set[str]) -> str | None:
    """The regular member that `name` is or links to (links followed a few times), each hop added to `named`."""
    for _ in range(8):
        named.add(name)
        if name in members:
            return name
        if name not in links:
            return None
        name = links[name]
    return None


def _json(member: _Member | None, what: str, where: str) -> Any:
    if member is None or member.data is None:
        raise InputError(f"{where}: its {what} is missing or larger than {MAX_JSON_BYTES} bytes")
    try:
        return json.loads(member.data)
    except (ValueError, RecursionError):
        raise InputError(f"{where}: its {what} is not JSON") from None


def _oci_reachable(members: dict[str, _Member], where: str) -> set[str]:
    """The blobs that index.json names, directly or through the OCI manifests and indexes it names."""
    reachable: set[str] = set()
    todo = [_json(members["index.json"], "index.json", where)] if "index.json" in members else []
    while todo:
        document = todo.pop()
        if not isinstance(document, dict):
            continue
        named = [*_listed(document.get("manifests")), document.get("config"), *_listed(document.get("layers"))]
        for entry in named:
            digest = entry.get("digest") if isinstance(entry, dict) else None
            found = DIFF_ID.fullmatch(digest) if isinstance(digest, str) else None
            blob = f"blobs/sha256/{found.group(1)}" if found else None
            if blob is None or blob in reachable:
                continue
            reachable.add(blob)
            media = str(entry.get("mediaType", ""))
            if blob in members and members[blob].data is not None and ("manifest" in media or "index" in media):
                todo.append(_json(members[blob], blob, where))
    return reachable


def verify_archive(archive: Path, max_bytes: int) -> VerifiedImage:
    """The image `archive` holds, proven (see the module's docstring), or InputError in one line."""
    where = f"image archive {archive.name}"
    members, links = _scan(archive, max_bytes)
    manifest = _json(members.get("manifest.json"), "manifest.json", where) if "manifest.json" in members else None
    if manifest is None:
        raise InputError(f"{where}: no manifest.json (not made by `docker save`)")
    if not isinstance(manifest, list) or len(manifest) != 1 or not isinstance(manifest[0], dict):
        raise InputError(f"{where}: holds {len(manifest) if isinstance(manifest, list) else 0} images; a submission "
                         "is one image")
    entry = manifest[0]
    if entry.get("LayerSources"):
        raise InputError(f"{where}: its manifest names foreign layers (LayerSources), which the phase does not fetch")
    claimed = CONFIG_NAME.fullmatch(str(entry.get("Config", "")))
    layer_names = entry.get("Layers")
    if not claimed or not isinstance(layer_names, list) or not all(isinstance(n, str) for n in layer_names):
        raise InputError(f"{where}: its manifest names no image configuration and layers")
    image_id = claimed.group(1) or claimed.group(2)
    named = {"manifest.json"}
    config_name = _resolve(entry["Config"], members, links, named)
    config = members.get(config_name) if config_name else None
    if config is None:
        raise InputError(f"{where}: the image configuration its manifest names is not in it")
    if config.sha256 != image_id:
        raise InputError(f"{where}: its image configuration does not hash to the image ID its manifest claims "
                         f"(sha256:{image_id[:12]})")
    configuration = _json(config, "image configuration", where)
    if not isinstance(configuration, dict) or configuration.get("os") != "linux":
        raise InputError(f"{where}: its image configuration is not a Linux image's")
    rootfs = configuration.get("rootfs")
    diff_ids = rootfs.get("diff_ids") if isinstance(rootfs, dict) else None
    if not isinstance(diff_ids, list) or len(diff_ids) != len(layer_names) \
            or not all(isinstance(d, str) and DIFF_ID.fullmatch(d) for d in diff_ids):
        raise InputError(f"{where}: its image configuration's layers (rootfs.diff_ids) are not the "
                         f"{len(layer_names)} its manifest names")
    layers = []
    for number, (name, diff_id) in enumerate(zip(layer_names, diff_ids), start=1):
        resolved = _resolve(name, members, links, named)
        if resolved is None:
            raise InputError(f"{where}: layer {number} ({_shown(name)}) is not in it")
        if members[resolved].unpacked_sha256 != diff_id.removeprefix("sha256:"):
            raise InputError(f"{where}: layer {number} ({_shown(name)}) does not hash to its diff ID in the image "
                             "configuration")
        if not members[resolved].is_tar:
            raise InputError(f"{where}: layer {number} ({_shown(name)}) is not a tar")
        layers.append((resolved, diff_id, members[resolved].unpacked_size))
    reachable = _oci_reachable(members, where)
    for name in [*members, *links]:
        blob = BLOB.fullmatch(name)
        if blob and name in members and members[name].sha256 != blob.group(1):
            raise InputError(f"{where}: {_shown(name)} does not hash to its name")
        if name not in named and name not in reachable and not METADATA.fullmatch(name):
            raise InputError(f"{where}: holds {_shown(name)}, which its manifest does not name")
    return VerifiedImage(f"sha256:{image_id}", config_name, config.size, tuple(layers),
                         sum(max(m.size, m.unpacked_size) for m in members.values()))


def _copy_checked(tar: tarfile.TarFile, info: tarfile.TarInfo, source: IO[bytes], sha256: str) -> None:
    """`source` (uncompressed where it is compressed) into `tar` as `info`, its bytes hashed on the way; ArchiveChanged
    where they are not those verified."""
    reader = io.BufferedReader(_Hashing(source, hashes=False), CHUNK)
    compression = _compression(reader.peek(6)[:6])
    hashing = _Hashing(OPENERS[compression](reader) if compression in OPENERS else reader)
    try:
        tar.addfile(info, io.BufferedReader(hashing, CHUNK))
    except BrokenPipeError:
        raise
    except (OSError, EOFError, lzma.LZMAError) as exc:
        raise ArchiveChanged(f"{_shown(info.name)}: {type(exc).__name__}") from None
    if hashing.hash.hexdigest() != sha256 or hashing.source.read(1):
        raise ArchiveChanged(f"{_shown(info.name)} is not the member verified")


def write_load_stream(archive: Path, image: VerifiedImage, out: IO[bytes]) -> None:
    """The tar an engine loads (see the module's docstring) written to `out`; ArchiveChanged where the archive's
    bytes are not those verified (the tar is then left without its manifest.json, which no engine loads)."""
    image_hex = image.digest.removeprefix("sha256:")
    layer_names = [f"{diff_id.removeprefix('sha256:')}/layer.tar" for _, diff_id, _ in image.layers]
    wanted = {image.config: (f"{image_hex}.json", image_hex, image.config_size)}
    for (member, diff_id, size), name in zip(image.layers, layer_names):
        if all(name != target for target, _, _ in wanted.values()):  # a layer named twice is written once
            wanted[member] = (name, diff_id.removeprefix("sha256:"), size)
    raw, stream = _open_stream(archive)
    try:
        with raw, tarfile.open(fileobj=stream, mode="r|", tarinfo=_Headers) as source, \
                tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tar:
            for info in source:
                name = _normal(info.name)
                if not info.isreg() or name not in wanted:
                    continue
                target, sha256, size = wanted.pop(name)
                entry = tarfile.TarInfo(target)
                entry.size, entry.mode = size, 0o644
                _copy_checked(tar, entry, source.extractfile(info), sha256)
            if wanted:
                raise ArchiveChanged(f"{', '.join(_shown(name) for name in sorted(wanted))[:200]} not found again")
            data = json.dumps([{"Config": f"{image_hex}.json", "RepoTags": [], "Layers": layer_names}]).encode()
            entry = tarfile.TarInfo("manifest.json")
            entry.size, entry.mode = len(data), 0o644
            tar.addfile(entry, io.BytesIO(data))
    except (tarfile.TarError, EOFError, lzma.LZMAError) as exc:
        raise ArchiveChanged(f"not readable again ({type(exc).__name__})") from None
