"""Socket values (GC's ComponentInterfaceValue): what a job gets as input and gives as output, serialised and
provisioned as grand-challenge does (components/models.py, components/serializers.py)."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..sockets import Socket

GC_URL = "https://grand-challenge.org"
FICLONE = 0x40049409  # ioctl: `target` shares `source`'s blocks, copied on a write (btrfs, XFS, OCFS2)


def share_file(source: Path, target: Path) -> str:
    """`target` holding `source`'s bytes without a copy where the filesystem allows it: a hard link (same inode:
    only for a target its reader cannot write, as a read-only /input), else a reflink, else a copy; which it was."""
    try:
        os.link(source, target)
        return "link"
    except OSError:
        pass
    try:
        with open(source, "rb") as read, open(target, "wb") as write:
            fcntl.ioctl(write.fileno(), FICLONE, read.fileno())
        return "reflink"
    except OSError:
        shutil.copyfile(source, target)
        return "copy"


@dataclass
class SocketValue:
    """A ComponentInterfaceValue: a socket with a value, a file (its bytes) or an image (its stored file)."""

    pk: int
    socket: Socket
    value: object = None
    content: bytes | None = None  # File sockets: what is provisioned at relative_path
    image_pk: str | None = None
    image_name: str | None = None
    image_file: Path | None = None  # the stored `<image-pk>.mha`/`.tif`

    @property
    def relative_path(self) -> str:
        """Where the value is provisioned; image files keep their stored name (ComponentInterfaceValue)."""
        if self.image_file is not None:
            return f"{self.socket.relative_path}/{self.image_file.name}"
        return self.socket.relative_path

    def serialize(self) -> dict:
        """ComponentInterfaceValueSerializer: `socket` and (legacy) `interface`, value, file, image, pk."""
        interface = self.socket.serialize()
        file_url = (f"{GC_URL}/media/components/componentinterfacevalue/{self.pk}/"
                    f"{Path(self.socket.relative_path).name}" if self.content is not None else None)
        image = {"pk": self.image_pk, "name": self.image_name} if self.image_pk is not None else None
        return {"socket": interface, "interface": interface, "value": self.value, "file": file_url, "image": image,
                "pk": self.pk}

    def provision(self, base: Path, share: bool = False) -> Path:
        """Write this value under `base` as GC provisions it (images copied, JSON values as `json.dumps`); with
        `share`, an image is its stored file shared (share_file), for a job that cannot write its input."""
        target = base / self.relative_path
        target.parent.mkdir(parents=True, exist_ok=True)
        if self.image_file is not None and share:
            share_file(self.image_file, target)
        elif self.image_file is not None:
            shutil.copyfile(self.image_file, target)
        elif self.content is not None:
            target.write_bytes(self.content)
        else:
            target.write_text(json.dumps(self.value), encoding="utf-8")
        return target


def sort_values(values: Iterable[SocketValue]) -> list[SocketValue]:
    """GC's `sort_civs`: by slug, then values, files, images."""
    def group(v: SocketValue) -> int:
        if v.value is not None:
            return 0
        return {"File": 1, "Image": 2}.get(v.socket.super_kind, 3)

    ordered = sorted(values, key=lambda v: v.socket.slug)  # stable: equal slugs keep their (pk) order
    return sorted(ordered, key=group)


def serialize_values(values: Iterable[SocketValue]) -> list[dict]:
    return [v.serialize() for v in sort_values(values)]
