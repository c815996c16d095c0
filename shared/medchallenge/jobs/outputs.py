"""A job's output sockets as grand-challenge reads them from /output (components/backends/base.py `get_outputs`,
components/models.py validators): only the declared sockets, each checked by its kind (kinds.py: the kind's JSON
schema, an image kind's rules, a file's type), failures in GC's words.

/output was written by the container: only regular files are read (a link or a special file there is left out, as
the shim uploads regular files only), every file is size-checked before it is read, and image folders are
size-checked (a sparse file by the size its copy would have) and copied out before panimg reads them. The outputs a
challenge scores per case are bounded in count too (MAX_ENTRIES), so that no team's output swamps its evaluation."""

from __future__ import annotations

import json
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from ..limits import MAX_TEXT_BYTES, MAX_VOXELS, load_json
from ..sockets import CAPTION, FOREIGN_OBJECTS, RIB_FRACTURE_DETECTIONS, TB_CAVERN_BOXES, UMLS_CONCEPTS, Socket
from .errors import EmulationError
from .kinds import MIME_BYTES, file_error, image_error, value_error
from .uploads import import_output_image
from .values import SocketValue

VOXEL_BYTES = 8  # of the widest voxel type (float64): an output image folder holds at most MAX_VOXELS of them
HEADER_BYTES = 1 << 20  # and its headers
# What one case's output may hold, per socket: (the JSON key of its list, or None: the value itself; what it counts;
# at most). Boxes, points and detections: 10 times COCO's 100 detections per image, far above what any of these
# challenges' evaluations rewards; concepts: the most an ImageCLEF evaluator accepts (2021: 1286; 2022: 100); a
# caption: some 1,500 words.
MAX_ENTRIES: dict[str, tuple[str | None, str, int]] = {
    TB_CAVERN_BOXES.slug: ("boxes", "boxes", 1000), FOREIGN_OBJECTS.slug: ("points", "points", 1000),
    RIB_FRACTURE_DETECTIONS.slug: ("detections", "detections", 1000), UMLS_CONCEPTS.slug: (None, "concepts", 1286),
    CAPTION.slug: (None, "characters", 10_000),
}
ENTRY_BYTES = 512  # of JSON per counted entry at most (a box is about 70, indented 150): checked before it is read


@dataclass
class OutputResult:
    """One declared output socket of a job: its stored value, or why GC would fail the job on it."""

    socket: Socket
    value: SocketValue | None = None
    error: str | None = None

    def to_json(self) -> dict:
        return {"socket": self.socket.slug, "relative_path": self.socket.relative_path,
                "valid": self.error is None, "error": self.error}


def regular_files(output: Path) -> tuple[set[str], list[str]]:
    """The regular files under `output` (relative POSIX paths), and what else is there (links, FIFOs, devices),
    without following any link."""
    files, others = set(), []
    for root, dirs, names in os.walk(output, followlinks=False):
        for name in [*names, *dirs]:
            path = Path(root) / name
            mode = path.lstat().st_mode
            relative = path.relative_to(output).as_posix()
            if stat.S_ISREG(mode):
                files.add(relative)
            elif not stat.S_ISDIR(mode):
                others.append(relative)
    return files, sorted(others)


def _read_json(path: Path, socket: Socket):
    try:
        value = load_json(path.read_text(encoding="utf-8"), f"The output file '{socket.relative_path}'",
                          parse_constant=lambda _: None)
    except (ValueError, UnicodeDecodeError):  # JSONDecodeError, and an integer of more than 4,300 digits
        raise EmulationError(f"The output file '{socket.relative_path}' is not valid json") from None
    except InputError as exc:  # nested beyond MAX_JSON_DEPTH
        raise EmulationError(str(exc)) from None
    error = value_error(socket.kind, value)  # the kind's schema (kinds.SCHEMAS)
    if error:
        raise EmulationError(f"The output file '{socket.relative_path}' does not fulfill the schema of "
                             f"'{socket.kind}': {error}")
    return value


def _check_size(path: Path, socket: Socket) -> None:
    """A counted socket's file no larger than its entries can take (before it is read)."""
    if socket.slug in MAX_ENTRIES:
        _, what, limit = MAX_ENTRIES[socket.slug]
        most = limit * ENTRY_BYTES + ENTRY_BYTES
        if path.stat().st_size > most:
            raise EmulationError(f"The output file '{socket.relative_path}' is larger than {most} bytes, more than "
                                 f"{limit} {what} (what one case may hold here) can take")


def _check_count(value: object, socket: Socket) -> None:
    """A counted socket's list (or text) no longer than one case may hold."""
    if socket.slug in MAX_ENTRIES:
        key, what, limit = MAX_ENTRIES[socket.slug]
        entries = value.get(key) if key is not None and isinstance(value, dict) else value if key is None else None
        if isinstance(entries, (list, str)) and len(entries) > limit:
            raise EmulationError(f"The output file '{socket.relative_path}' holds {len(entries)} {what}, more than "
                                 f"the {limit} one case may hold here (the evaluation scores each case's)")


def read_output(output: Path, files: set[str], socket: Socket, pk: int, store: Path) -> SocketValue:
    """One declared output socket from /output; an EmulationError in GC's words where GC would fail the job."""
    path = output / socket.relative_path
    if socket.super_kind == "Image":
        prefix = socket.relative_path.rstrip("/") + "/"
        members = sorted(f for f in files if f.startswith(prefix))
        if not members:
            raise EmulationError(f"Output directory '{socket.relative_path}' is empty")
        size = sum((output / member).stat().st_size for member in members)  # a sparse file: what a copy writes
        if size > MAX_VOXELS.value() * VOXEL_BYTES + HEADER_BYTES:
            raise EmulationError(f"Output directory '{socket.relative_path}' holds {size} bytes, more than an image "
                                 f"of {MAX_VOXELS.value()} voxels (${MAX_VOXELS.variable} sets it) of "
                                 f"{VOXEL_BYTES} bytes; not copied")
        staged = store / "staged"
        for member in members:  # regular files only, copied so that panimg never follows a link of the container's
            (staged / member).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(output / member, staged / member)
        image = import_output_image(staged / socket.relative_path, store / "imported", socket)
        error = image_error(socket.kind, image.segments, image.shape_without_color, image.metadata["color_space"])
        if error:
            raise EmulationError(f"The image produced in '{socket.relative_path}' is not valid. {error}")
        return image.value(pk, socket)
    if socket.relative_path not in files:
        raise EmulationError(f"Output file '{socket.relative_path}' was not produced")
    if path.stat().st_size > MAX_TEXT_BYTES.value():  # before it is read
        raise EmulationError(f"The output file '{socket.relative_path}' is larger than {MAX_TEXT_BYTES.value()} "
                             f"bytes (${MAX_TEXT_BYTES.variable} sets it)")
    if socket.relative_path.endswith(".json"):
        _check_size(path, socket)
        value = _read_json(path, socket)
        _check_count(value, socket)
        if socket.super_kind == "Value":
            return SocketValue(pk, socket, value=value)
        return SocketValue(pk, socket, content=json.dumps(value).encode("utf-8"))
    content = path.read_bytes()
    error = file_error(content[:MIME_BYTES])  # the file's type, as grand-challenge's MimeTypeValidator reads it
    if error:
        raise EmulationError(f"The output file '{socket.relative_path}' is not valid. {error}")
    return SocketValue(pk, socket, content=content)


def read_outputs(output: Path, sockets: tuple[Socket, ...] | list[Socket], pks, store: Path) -> list[OutputResult]:
    """Every declared output socket, each with its value or its error (GC fails the job on the first)."""
    files, _ = regular_files(output)
    results = []
    for socket in sockets:
        try:
            results.append(OutputResult(socket, value=read_output(output, files, socket, next(pks),
                                                                  store / socket.slug)))
        except EmulationError as exc:
            results.append(OutputResult(socket, error=str(exc)))
    return results


def undeclared_files(output: Path, sockets) -> list[str]:
    """What the job left in /output that no declared socket reads (GC drops it), and links or special files."""
    files, others = regular_files(output)
    declared = {s.relative_path for s in sockets}
    image_folders = tuple(s.relative_path.rstrip("/") + "/" for s in sockets if s.super_kind == "Image")
    return sorted([f for f in files if f not in declared and not f.startswith(image_folders)] + others)
