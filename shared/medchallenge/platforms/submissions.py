"""What a participant uploads on AIcrowd or Codabench, and how it becomes the evaluator's input folder.

A challenge lists its `SubmissionFormat`s in the registry (one per task a platform runs as a challenge of its own:
ImageCLEFmed Caption's concept detection and caption prediction). A format of one run file is uploaded as that file;
a format of several files (object-CXR's two CSVs, RibFrac's masks and CSV) as a zip holding them at its top level
(or inside one folder). A zip is hostile input: before anything is extracted, links, special files, absolute or
`..` member names, names that name no file (`.`, empty), two members naming one file (`a.csv`, `./a.csv`, `sub//a.csv`
are one name once empty and `.` parts are dropped) or a file that another member needs as a folder, encrypted members
and a declared unpacked size over the limit are refused, and every member is decompressed once into nothing,
counting, so that a member whose data inflates beyond its declared size (or the total beyond the limit) is refused
too; only then are the members written, under the names so checked.
"""

from __future__ import annotations

import shutil
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..errors import InputError
from ..limits import Limit

# the unpacked size of a zip submission (RibFrac's 160 test masks as .nii.gz take about 100 MB) and its members
MAX_UNPACKED_BYTES = Limit("MEDCHALLENGE_MAX_SUBMISSION_BYTES", 8 << 30, "bytes unpacked")
MAX_MEMBERS = Limit("MEDCHALLENGE_MAX_SUBMISSION_FILES", 100_000, "files")
_CHUNK = 1 << 20


@dataclass(frozen=True)
class SubmissionFormat:
    """One task's submission: the files the evaluator reads from its input folder, what they hold, and which
    aggregates AIcrowd shows as `score` (the primary metric) and `score_secondary` (the official secondary; 0.0
    where the challenge has none or the run gives none, as the official evaluators returned)."""

    task: str  # "" for a challenge's only task, else its name (`concept-detection`)
    files: tuple[str, ...]  # file names or patterns in the evaluator's input folder
    contents: str  # for participants: what each file holds
    primary: str
    secondary: str = ""

    @property
    def zipped(self) -> bool:
        """Whether a submission is a zip (several files, or files named by the participant)."""
        return len(self.files) > 1 or any("*" in name for name in self.files)


def _member_problem(info: zipfile.ZipInfo) -> str | None:
    """Why a zip member cannot be extracted as it is named, or None."""
    name = info.filename
    mode = info.external_attr >> 16
    if any(ord(c) < 32 for c in name) or "\\" in name:
        return "a member name with a control character or backslash"
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        return f"an absolute member name {name!r}"
    if ".." in PurePosixPath(name).parts:
        return f"a member name with '..' ({name!r})"
    if mode and stat.S_IFMT(mode) not in (0, stat.S_IFREG, stat.S_IFDIR):
        kind = "a symbolic link" if stat.S_ISLNK(mode) else "a special file"
        return f"{kind} ({name!r})"
    if info.flag_bits & 0x1:
        return f"an encrypted member ({name!r})"
    return None


def _member_parts(name: str) -> tuple[str, ...]:
    """The path a member name is extracted to, as folder and file names: empty and `.` parts dropped."""
    return tuple(part for part in name.split("/") if part not in ("", "."))


def _naming_problem(members: list[zipfile.ZipInfo]) -> str | None:
    """Why the members' names cannot all be extracted side by side (a name of no file, two members naming one file,
    a file another member needs as its folder), or None."""
    named: dict[tuple[str, ...], zipfile.ZipInfo] = {}
    for info in members:
        parts = _member_parts(info.filename)
        if not parts:
            return f"the member {info.filename!r} names no file"
        if parts in named:
            return f"the members {named[parts].filename!r} and {info.filename!r} both name {'/'.join(parts)!r}"
        named[parts] = info
    ordered = sorted(named)
    for parts, following in zip(ordered, ordered[1:]):  # the paths under a path sort right after it
        if not named[parts].is_dir() and following[:len(parts)] == parts:
            return (f"the member {named[parts].filename!r} is a file, and the member {named[following].filename!r} "
                    "needs it as a folder")
    return None


def _inflated_size(archive: zipfile.ZipFile, info: zipfile.ZipInfo, budget: int) -> int:
    """The bytes `info` decompresses to, reading at most its declared size + 1 and `budget` + 1 bytes."""
    cap = min(info.file_size, budget) + 1
    count = 0
    with archive.open(info) as member:
        while count < cap and (chunk := member.read(min(_CHUNK, cap - count))):
            count += len(chunk)
    return count


def check_zip(path: Path) -> list[zipfile.ZipInfo]:
    """The members of zip `path` (files and folders), or an InputError saying why it is refused; nothing is
    written."""
    max_members, max_bytes = MAX_MEMBERS.value(), MAX_UNPACKED_BYTES.value()
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
            if len(members) > max_members:
                raise MAX_MEMBERS.refuse(path, f"{len(members)} members")
            for info in members:
                problem = _member_problem(info)
                if problem:
                    raise InputError(f"{path}: {problem}; a submission zip holds regular files and folders only")
            problem = _naming_problem(members)
            if problem:
                raise InputError(f"{path}: {problem}; each member of a submission zip must name a file of its own")
            declared = sum(info.file_size for info in members)
            if declared > max_bytes:
                raise MAX_UNPACKED_BYTES.refuse(path, f"the members declare {declared} bytes")
            total = 0
            for info in members:
                if info.is_dir():
                    continue
                size = _inflated_size(archive, info, max_bytes - total)
                if size > info.file_size:
                    raise InputError(f"{path}: the member {info.filename!r} inflates beyond its declared size of "
                                     f"{info.file_size} bytes")
                total += size
                if total > max_bytes:
                    raise MAX_UNPACKED_BYTES.refuse(path, f"the members inflate to more than {total - 1} bytes")
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError, ValueError) as exc:
        raise InputError(f"{path}: not a readable zip file ({exc})") from None
    return members


def unpack_zip(path: Path, target: Path) -> Path:
    """Extract zip `path` into the new folder `target` after `check_zip`; the folder the run files are in: `target`,
    or its only entry where that is a folder (a zip of the folder rather than of its files)."""
    members = check_zip(path)
    target.mkdir(parents=True)
    with zipfile.ZipFile(path) as archive:
        for info in members:
            destination = target.joinpath(*_member_parts(info.filename))
            try:
                if info.is_dir():
                    destination.mkdir(parents=True, exist_ok=True)
                    continue
                destination.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(info) as source, open(destination, "xb") as sink:
                    shutil.copyfileobj(source, sink, _CHUNK)
            except OSError as exc:  # a name too long for the file system, a full disk: without the folder's path
                raise InputError(f"{path}: cannot unpack the member {info.filename!r} ({exc.strerror})") from None
    entries = [p for p in target.iterdir() if p.name != "__MACOSX"]
    return entries[0] if len(entries) == 1 and entries[0].is_dir() else target


def place_submission(submission_format: SubmissionFormat, submission: Path, folder: Path) -> Path:
    """The evaluator's input folder for an uploaded `submission`, created under `folder` (which must not exist):
    the one run file copied under the name the evaluator reads, or the zip unpacked."""
    if submission.is_symlink() or not submission.is_file():
        raise InputError(f"{submission.name}: not a regular file")
    if submission_format.zipped:
        if not zipfile.is_zipfile(submission):
            raise InputError(f"{submission.name}: not a zip file; this challenge's submission is a zip of "
                             f"{', '.join(submission_format.files)}")
        return unpack_zip(submission, folder)
    folder.mkdir(parents=True)
    shutil.copyfile(submission, folder / submission_format.files[0])
    return folder
