"""The gateway's configuration (TOML), read and checked at start: every problem is one `error:` line naming the
file and the key."""

from __future__ import annotations

import dataclasses
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError

AE_TITLE = re.compile(r"[ -\[\]-~]{1,16}")  # printable ASCII without backslash, at most 16 characters


@dataclass(frozen=True)
class Route:
    """Studies with a series of one of `modalities` (and, if given, one of `body_parts`) go to a detector: either
    `command`, run with `--input DIR --output DIR` (an algorithm's entry script), or `inbox`, the folder a detector
    container without network watches (`inference.py --watch DIR`: jobs in pending/, results in done/), or `image`,
    a grand-challenge algorithm image run by the job runner with `interface`'s sockets (image_routes.py), its
    optional `model` tarball at /opt/ml/model, `memory_gb` and `gpu` ("auto", "on", "off")."""

    name: str
    modalities: tuple[str, ...]
    body_parts: tuple[str, ...]
    command: tuple[str, ...]
    inbox: Path | None
    timeout_seconds: float
    image: str | None = None
    interface: str | None = None
    model: Path | None = None
    memory_gb: float = 8.0
    gpu: str = "off"


@dataclass(frozen=True)
class GatewayConfig:
    ae_title: str
    host: str
    port: int
    work_dir: Path
    study_quiet_seconds: float
    max_attempts: int
    pacs_ae_title: str
    pacs_host: str
    pacs_port: int
    routes: tuple[Route, ...]


def _take(table: dict, key: str, kind, where: str, default=None):
    """`table[key]` checked against `kind`; `default` when absent and a default is given."""
    if key not in table:
        if default is None:
            raise InputError(f"{where}: missing key {key!r}")
        return default
    value = table[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise InputError(f"{where}: {key} = {value!r}: expected {' or '.join(k.__name__ for k in kinds)}")
    return value


def _port(table: dict, where: str, default=None) -> int:
    port = _take(table, "port", int, where, default)
    if not 1 <= port <= 65535:
        raise InputError(f"{where}: port = {port}: expected 1 to 65535")
    return port


def _ae_title(table: dict, where: str, default=None) -> str:
    title = _take(table, "ae_title", str, where, default)
    if not AE_TITLE.fullmatch(title) or not title.strip():
        raise InputError(f"{where}: ae_title = {title!r}: expected 1 to 16 printable ASCII characters, no backslash")
    return title


def _strings(table: dict, key: str, where: str, required: bool) -> tuple[str, ...]:
    values = _take(table, key, list, where, None if required else [])
    if (required and not values) or not all(isinstance(v, str) and v for v in values):
        raise InputError(f"{where}: {key} = {values!r}: expected a {'non-empty ' if required else ''}list of strings")
    return tuple(values)


def _no_unknown_keys(table: dict, known: set[str], where: str) -> None:
    unknown = sorted(set(table) - known)
    if unknown:
        raise InputError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")


IMAGE_KEYS = {"image", "interface", "model", "memory_gb", "gpu"}


def _image_route(route: Route, table: dict, where: str) -> Route:
    """An image route's keys, checked (the interface's DICOM mapping too: image_routes.check_image_route)."""
    from .image_routes import check_image_route

    gpu = _take(table, "gpu", str, where, "off")
    memory = float(_take(table, "memory_gb", (int, float), where, 8))
    if gpu not in ("auto", "on", "off") or memory <= 0:
        raise InputError(f"{where}: gpu must be auto, on or off and memory_gb positive")
    model = Path(_take(table, "model", str, where)) if "model" in table else None
    route = dataclasses.replace(route, image=_take(table, "image", str, where),
                                interface=_take(table, "interface", str, where), model=model, memory_gb=memory,
                                gpu=gpu)
    check_image_route(route, where)
    return route


def load_config(path: Path) -> GatewayConfig:
    """The gateway's configuration, checked: one InputError line naming the file and key for each kind of mistake."""
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"{path}: cannot read the configuration ({exc.strerror or exc})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not valid TOML ({exc})") from None
    _no_unknown_keys(document, {"gateway", "pacs", "route"}, str(path))
    gateway = _take(document, "gateway", dict, str(path))
    pacs = _take(document, "pacs", dict, str(path))
    where_g, where_p = f"{path} [gateway]", f"{path} [pacs]"
    _no_unknown_keys(gateway, {"ae_title", "host", "port", "work_dir", "study_quiet_seconds", "max_attempts"}, where_g)
    _no_unknown_keys(pacs, {"ae_title", "host", "port"}, where_p)
    quiet = float(_take(gateway, "study_quiet_seconds", (int, float), where_g, 30))
    attempts = _take(gateway, "max_attempts", int, where_g, 2)
    if quiet <= 0 or attempts < 1:
        raise InputError(f"{where_g}: study_quiet_seconds must be positive and max_attempts at least 1")
    routes = []
    tables = _take(document, "route", list, str(path))
    if not tables:
        raise InputError(f"{path}: no [[route]]: the gateway would route nothing")
    for number, table in enumerate(tables, start=1):
        where = f"{path} [[route]] {number}"
        if not isinstance(table, dict):
            raise InputError(f"{where}: expected a table")
        _no_unknown_keys(table, {"name", "modalities", "body_parts", "command", "inbox", "timeout_seconds",
                                 *IMAGE_KEYS}, where)
        if sum(key in table for key in ("command", "inbox", "image")) != 1:
            raise InputError(f"{where}: give either command (a detector run here), inbox (a detector container's "
                             "watched folder) or image (a grand-challenge algorithm image)")
        command = _strings(table, "command", where, required=True) if "command" in table else ()
        inbox = Path(_take(table, "inbox", str, where)) if "inbox" in table else None
        timeout = float(_take(table, "timeout_seconds", (int, float), where, 3600))
        route = Route(_take(table, "name", str, where), tuple(m.upper() for m in _strings(table, "modalities",
                      where, True)), tuple(b.upper() for b in _strings(table, "body_parts", where, False)),
                      command, inbox, timeout)
        extra = sorted(set(table) & IMAGE_KEYS) if "image" not in table else []
        if extra:
            raise InputError(f"{where}: {', '.join(extra)} only go with image")
        routes.append(_image_route(route, table, where) if "image" in table else route)
    names = [r.name for r in routes]
    if len(set(names)) != len(names):
        raise InputError(f"{path}: route names must differ ({', '.join(names)})")
    return GatewayConfig(
        ae_title=_ae_title(gateway, where_g, "MEDCHALLENGE"), host=_take(gateway, "host", str, where_g, "0.0.0.0"),
        port=_port(gateway, where_g, 11112), work_dir=Path(_take(gateway, "work_dir", str, where_g)),
        study_quiet_seconds=quiet, max_attempts=attempts, pacs_ae_title=_ae_title(pacs, where_p),
        pacs_host=_take(pacs, "host", str, where_p), pacs_port=_port(pacs, where_p), routes=tuple(routes))
