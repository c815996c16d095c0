"""The gateway's configuration (TOML), read and checked at start: every problem is one `error:` line naming the
file and the key."""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from ..phase.backend import BACKENDS
from ..phase.slurm_options import DEFAULT_PREFIX, check_prefix, check_sbatch_options
from ..registry import CHALLENGES, IMAGE_NAMESPACE
from .contexts import ACCEPT, MODALITY_SOP_CLASSES, accepted_contexts
from .output_dicom import check_image_route

AE_TITLE = re.compile(r"[ -\[\]-~]{1,16}")  # printable ASCII without backslash, at most 16 characters

log = logging.getLogger(__name__)


def significant_ae_title(title: str) -> str | None:
    """An AE title as DICOM compares it (PS3.5 6.2, VR AE): without its leading and trailing spaces, the only
    characters that are not significant; None where it is no AE title (1 to 16 printable ASCII characters other than
    backslash, not all spaces): a tab, a newline or a NUL makes a title invalid, never padding."""
    if not AE_TITLE.fullmatch(title) or not title.strip(" "):
        return None
    return title.strip(" ")


def same_ae_title(sent: str, configured: str) -> bool:
    """Whether an AE title a peer sent is the configured one, as DICOM compares them (significant_ae_title)."""
    title = significant_ae_title(sent)
    return title is not None and title == significant_ae_title(configured)


@dataclass(frozen=True)
class SlurmRoute:
    """A route's jobs on a Slurm cluster (`backend = "slurm"`, its [route.slurm] table): sbatch's partition and
    account (the cluster's defaults when absent), the GPUs and CPUs of each job, more sbatch options, and how often a
    job the cluster lost (node failure, preemption, cancellation) is submitted again before the study fails."""

    partition: str | None = None
    account: str | None = None
    gpus: int = 0
    cpus: float | None = None  # None: the job runner's (grand-challenge's instance for the memory)
    extra: tuple[str, ...] = ()  # the sbatch options a site sets (phase.slurm_options.ALLOWED)
    max_resubmissions: int = 2
    job_name_prefix: str = DEFAULT_PREFIX  # Slurm job names PREFIXgw-<route>-<study hash>


@dataclass(frozen=True)
class Route:
    """Studies with a series of one of `modalities` (and, if given, one of `body_parts`) go to an algorithm, run as
    one grand-challenge job (image_routes.py): the study's series as `interface`'s input socket, the output sockets
    as DICOM objects in the study. The job launches `image`, a Docker image run as grand-challenge runs it, or
    `command`, the algorithm's entry as a process on this host (jobs.process_run: installs without Docker, tests);
    its optional `model` tarball or folder is /opt/ml/model, `memory_gb`, `timeout_seconds` and `gpu` ("auto",
    "on", "off") its limits. With an `inbox`, the job-runner service runs it (job_runner.py); with `slurm` (backend
    = "slurm"), a Slurm cluster (cluster.py); else the gateway; up to `max_parallel_jobs` studies' jobs at once (a
    GPU route on this host: one per GPU of its `gpu_devices`, each job given one of them). Its `operating_points`:
    the threshold of each output carrying probabilities (output_dicom.route_points), findings under it kept, marked,
    only with `keep_below_threshold`."""

    name: str
    modalities: tuple[str, ...]
    body_parts: tuple[str, ...]
    interface: str
    timeout_seconds: float
    image: str | None = None
    command: tuple[str, ...] = ()
    inbox: Path | None = None
    model: Path | None = None
    memory_gb: float = 8.0
    gpu: str = "off"
    input_socket: str | None = None  # interface "generic": the input socket's slug
    outputs: tuple[tuple[str, str], ...] = ()  # interface "generic": (slug, kind) of each output socket
    slurm: SlurmRoute | None = None
    max_parallel_jobs: int = 1  # the route's jobs running at once (a GPU route on this host: one per GPU)
    gpu_devices: tuple[str, ...] = ()  # a GPU route on this host: the GPUs its jobs take, one job each
    operating_points: tuple[tuple[str, float], ...] = ()  # (output slug, threshold)
    keep_below_threshold: bool = False

    @property
    def algorithm(self) -> str:
        """What runs, for the results' algorithm version and the log: the image, or the command line."""
        return self.image or " ".join(self.command)


@dataclass(frozen=True)
class Caller:
    """A sender allowed to store studies: its calling AE title and, if given, the addresses (IP addresses or
    networks) it may call from; an IPv4 caller reaching a gateway that listens on IPv6 (`host = "::"`) arrives as an
    IPv4-mapped address (`::ffff:10.0.0.20`) and is compared as the IPv4 address it is."""

    ae_title: str
    networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]

    def allows(self, ae_title: str, address: str) -> bool:
        if not same_ae_title(ae_title, self.ae_title):
            return False
        if not self.networks:
            return True
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        return any(ip in network for network in self.networks)


@dataclass(frozen=True)
class Limits:
    """What one sender can make the gateway hold, and how long it waits for a peer."""

    max_instance_bytes: int
    max_study_bytes: int
    work_quota_bytes: int
    max_associations: int
    acse_timeout_seconds: float
    dimse_timeout_seconds: float
    network_timeout_seconds: float
    max_connections_per_address: int  # open connections from one address, associated or not
    max_pending_connections: int  # connections still in their TLS handshake or before their A-ASSOCIATE request


@dataclass(frozen=True)
class Tls:
    """DICOM TLS for one direction: our certificate and key (optional for a client), and the CA certificates the
    peer's certificate must chain to (for the gateway's server: required of every caller, mutual TLS)."""

    certificate: Path | None
    private_key: Path | None
    ca_certificates: Path

    def server_context(self):
        import ssl

        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(self.ca_certificates))
        context.verify_mode = ssl.CERT_REQUIRED
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(str(self.certificate), str(self.private_key))
        return context

    def client_context(self):
        import ssl

        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(self.ca_certificates))
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        if self.certificate is not None:
            context.load_cert_chain(str(self.certificate), str(self.private_key))
        return context


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
    callers: tuple[Caller, ...]
    limits: Limits
    audit_log: Path
    unroutable_keep_hours: float
    disk_full_retry_seconds: float
    tls: Tls | None = None  # the gateway's server
    pacs_tls: Tls | None = None  # to the PACS
    accept: str = "all"  # what the SCP accepts: "all" storage SOP classes, or only the "routes"' (contexts.py)

    def accepted_contexts(self) -> list[tuple[str, list[str]]]:
        """The presentation contexts the gateway's SCP accepts (contexts.accepted_contexts)."""
        return accepted_contexts(self.accept, tuple(sorted({m for r in self.routes for m in r.modalities})))


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
    if significant_ae_title(title) is None:
        raise InputError(f"{where}: ae_title = {title!r}: expected 1 to 16 printable ASCII characters, no backslash")
    return title


def _strings(table: dict, key: str, where: str, required: bool) -> tuple[str, ...]:
    values = _take(table, key, list, where, None if required else [])
    if (required and not values) or not all(isinstance(v, str) and v for v in values):
        raise InputError(f"{where}: {key} = {values!r}: expected a {'non-empty ' if required else ''}list of strings")
    return tuple(values)


def _positive(table: dict, key: str, where: str, default: float) -> float:
    value = float(_take(table, key, (int, float), where, default))
    if not value > 0 or value == float("inf"):
        raise InputError(f"{where}: {key} = {table[key]!r}: expected a positive number")
    return value


MIB = 1 << 20
GATEWAY_KEYS = {"tls", "ae_title", "host", "port", "work_dir", "study_quiet_seconds", "max_attempts", "audit_log",
                "max_instance_mib", "max_study_mib", "work_quota_mib", "max_associations", "acse_timeout_seconds",
                "dimse_timeout_seconds", "network_timeout_seconds", "unroutable_keep_hours",
                "disk_full_retry_seconds", "max_connections_per_address", "max_pending_connections", "accept"}


def _network(address: str, where: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    """One entry of a caller's `addresses`: an IP address or a network written as one (no host bits set, which
    would silently widen `10.0.0.20/8` to all of 10.0.0.0/8), IPv4 written as IPv4."""
    try:
        network = ipaddress.ip_network(address)
    except ValueError:
        try:
            widened = ipaddress.ip_network(address, strict=False)
        except ValueError:
            raise InputError(f"{where}: addresses: {address!r} is not an IP address or network") from None
        raise InputError(f"{where}: addresses: {address!r} has host bits set: write '{widened}' for the whole "
                         f"network, or '{address.split('/')[0]}' for the one address") from None
    mapped = network.network_address.ipv4_mapped if network.version == 6 and network.prefixlen >= 96 else None
    if mapped is not None:
        ipv4 = mapped if network.prefixlen == 128 else ipaddress.ip_network((mapped, network.prefixlen - 96))
        raise InputError(f"{where}: addresses: {address!r} is an IPv4-mapped IPv6 address: write it as IPv4, "
                         f"'{ipv4}' (IPv4 callers are compared as IPv4 whichever way they arrive)")
    return network


def _callers(document: dict, path: Path) -> tuple[Caller, ...]:
    """The [[caller]] tables: at least one (a gateway taking studies from anyone is refused). A caller without
    `addresses` is accepted from any address, which is logged; `addresses = []` is refused (it would mean the
    same without saying so)."""
    tables = document.get("caller")
    if not isinstance(tables, list) or not tables:
        raise InputError(f"{path}: no [[caller]]: give the AE title (and, better, the addresses) of each sender "
                         "allowed to store studies")
    callers = []
    for number, table in enumerate(tables, start=1):
        where = f"{path} [[caller]] {number}"
        if not isinstance(table, dict):
            raise InputError(f"{where}: expected a table")
        _no_unknown_keys(table, {"ae_title", "addresses"}, where)
        title = _ae_title(table, where)
        if table.get("addresses") == []:
            raise InputError(f"{where}: addresses = [] lists no address: give the sender's IP addresses or "
                             "networks, or leave addresses out to accept this AE title from any address")
        networks = tuple(_network(address, where) for address in _strings(table, "addresses", where, required=False))
        if not networks:
            log.warning("%s: no addresses: AE title %r is accepted from any address", where, title)
        callers.append(Caller(title, networks))
    return tuple(callers)


def _tls(table: dict, where: str, server: bool) -> Tls | None:
    """The optional `tls` table of [gateway] (server: certificate and key required) or [pacs]; files checked."""
    if "tls" not in table:
        return None
    tls = _take(table, "tls", dict, where)
    where = f"{where[:-1]}.tls]"
    _no_unknown_keys(tls, {"certificate", "private_key", "ca_certificates"}, where)
    paths = {}
    for key in ("certificate", "private_key", "ca_certificates"):
        if key in tls or server or key == "ca_certificates":
            path = Path(_take(tls, key, str, where))
            if not path.is_file():
                raise InputError(f"{where}: {key} = {str(path)!r}: no such file")
            paths[key] = path
    if ("certificate" in paths) != ("private_key" in paths):
        raise InputError(f"{where}: give both certificate and private_key, or neither")
    config = Tls(paths.get("certificate"), paths.get("private_key"), paths["ca_certificates"])
    try:
        config.server_context() if server else config.client_context()
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
        raise InputError(f"{where}: cannot load the certificates ({exc})") from None
    return config


def _count(table: dict, key: str, where: str, default: int) -> int:
    value = _take(table, key, int, where, default)
    if not 1 <= value <= 1000:
        raise InputError(f"{where}: {key} = {value}: expected 1 to 1000")
    return value


def _limits(gateway: dict, where: str) -> Limits:
    max_associations = _count(gateway, "max_associations", where, 10)
    instance = _positive(gateway, "max_instance_mib", where, 1024)
    study = _positive(gateway, "max_study_mib", where, 8192)
    quota = _positive(gateway, "work_quota_mib", where, 65536)
    if not instance <= study <= quota:
        raise InputError(f"{where}: expected max_instance_mib <= max_study_mib <= work_quota_mib")
    return Limits(int(instance * MIB), int(study * MIB), int(quota * MIB), max_associations,
                  _positive(gateway, "acse_timeout_seconds", where, 30),
                  _positive(gateway, "dimse_timeout_seconds", where, 60),
                  _positive(gateway, "network_timeout_seconds", where, 60),
                  _count(gateway, "max_connections_per_address", where, max_associations),
                  _count(gateway, "max_pending_connections", where, 50))


def _no_unknown_keys(table: dict, known: set[str], where: str) -> None:
    unknown = sorted(set(table) - known)
    if unknown:
        raise InputError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")


ROUTE_KEYS = {"name", "modalities", "body_parts", "interface", "image", "command", "inbox", "timeout_seconds",
              "model", "memory_gb", "gpu", "input", "outputs", "backend", "slurm", "max_parallel_jobs",
              "gpu_devices", "operating_points", "keep_below_threshold"}
SLURM_KEYS = {"partition", "account", "gpus", "cpus", "extra", "max_resubmissions", "job_name_prefix"}


def _slurm_route(table: dict, where: str, gpu: str) -> SlurmRoute | None:
    """The route's Slurm backend (None: the local one), checked: an image route without inbox, GPUs only where the
    job gets them (gpu "on" asks for one by default), sbatch options as a list of options."""
    backend = _take(table, "backend", str, where, "local")
    if backend not in BACKENDS:
        raise InputError(f"{where}: backend = {backend!r}: expected one of {', '.join(BACKENDS)}")
    if backend == "local":
        if "slurm" in table:
            raise InputError(f"{where}: a [route.slurm] table is for backend = \"slurm\"")
        return None
    if "image" not in table or "inbox" in table:
        raise InputError(f"{where}: backend = \"slurm\" runs an image (not a command) on the cluster's nodes, "
                         "without an inbox")
    slurm = _take(table, "slurm", dict, where, {})
    where = f"{where} [route.slurm]"
    _no_unknown_keys(slurm, SLURM_KEYS, where)
    gpus = _take(slurm, "gpus", int, where, 1 if gpu == "on" else 0)
    if not 0 <= gpus <= 64 or (gpu == "on" and gpus == 0) or (gpu == "off" and gpus > 0):
        raise InputError(f"{where}: gpus = {gpus}: expected 0 to 64, at least 1 with the route's gpu = \"on\" and "
                         "0 with gpu = \"off\"")
    extra = tuple(check_sbatch_options(_strings(slurm, "extra", where, required=False), f"{where}: extra"))
    resubmissions = _take(slurm, "max_resubmissions", int, where, 2)
    if not 0 <= resubmissions <= 100:
        raise InputError(f"{where}: max_resubmissions = {resubmissions}: expected 0 to 100")
    return SlurmRoute(partition=_take(slurm, "partition", str, where) if "partition" in slurm else None,
                      account=_take(slurm, "account", str, where) if "account" in slurm else None, gpus=gpus,
                      cpus=_positive(slurm, "cpus", where, 1) if "cpus" in slurm else None, extra=extra,
                      max_resubmissions=resubmissions,
                      job_name_prefix=check_prefix(slurm.get("job_name_prefix", DEFAULT_PREFIX),
                                                   f"{where}: job_name_prefix"))


MAX_PARALLEL_JOBS = 64


GPU_DEVICE = re.compile(r"[0-9]{1,3}|(GPU|MIG)-[0-9a-fA-F-]{8,64}")  # an index, or a GPU's or MIG device's UUID


def _gpu_devices(table: dict, where: str, gpu: str, slurm: SlurmRoute | None) -> tuple[str, ...]:
    """A GPU route's `gpu_devices` on this host (indices or UUIDs as `nvidia-smi -L` shows them, each once): the GPUs
    its jobs take, one job per GPU. None given: each job gets one GPU of the engine's choice, one job at a time."""
    devices = _strings(table, "gpu_devices", where, False)
    if devices and (gpu == "off" or slurm is not None):
        raise InputError(f"{where}: gpu_devices is for a route with gpu = \"on\" or \"auto\" run on this host (on "
                         "Slurm, the cluster gives each job its GPUs)")
    if len(set(devices)) != len(devices) or not all(GPU_DEVICE.fullmatch(d) for d in devices):
        raise InputError(f"{where}: gpu_devices: expected distinct GPU indices (\"0\", \"1\") or UUIDs "
                         "(\"GPU-...\", \"MIG-...\")")
    return devices


def _max_parallel_jobs(table: dict, where: str, gpu: str, slurm: SlurmRoute | None,
                       gpu_devices: tuple[str, ...]) -> int:
    """A route's `max_parallel_jobs` (default 1: one study at a time), 1 to MAX_PARALLEL_JOBS; a GPU route run on
    this host (`gpu` "on" or "auto", not on Slurm, which gives each job GPUs of its own) runs one job per GPU of its
    `gpu_devices` (one without them: each job would be given the same GPU): more is clipped, with one line."""
    value = _take(table, "max_parallel_jobs", int, where, 1)
    if not 1 <= value <= MAX_PARALLEL_JOBS:
        raise InputError(f"{where}: max_parallel_jobs = {value}: expected 1 to {MAX_PARALLEL_JOBS}")
    most = max(1, len(gpu_devices))
    if value > most and gpu != "off" and slurm is None:
        log.warning("%s: max_parallel_jobs = %d clipped to %d: a route with gpu = %r runs one job per GPU of its "
                    "gpu_devices (%s); set gpu = \"off\" to run its jobs in parallel on the CPU", where, value, most,
                    gpu, ", ".join(gpu_devices) or "none given: one job at a time")
        return most
    return value


def project_image(route: Route) -> bool:
    """Whether the route runs the project's own algorithm image of its interface (whose model card the defaults
    are)."""
    return route.image is not None and route.image.rsplit(":", 1)[0] == f"{IMAGE_NAMESPACE}/{route.interface}-algorithm"


def _operating_points(table: dict, where: str, route: Route) -> tuple[tuple[str, float], ...]:
    """The route's `operating_points` table (output slug = threshold), over the defaults of a challenge interface:
    the project's algorithm's model card. A route running another team's image on the defaults gets one log line: its
    own model card's thresholds are what it should state (a `command` route, an install without Docker running the
    project's algorithm as a process, takes the defaults silently)."""
    given = _take(table, "operating_points", dict, where, {})
    for slug, value in given.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InputError(f"{where}: operating_points: {slug} = {value!r}: expected a probability, 0 to 1")
    card = dict(CHALLENGES[route.interface].algorithm.operating_points) if route.interface in CHALLENGES else {}
    defaulted = sorted(set(card) - set(given))
    if defaulted and route.image is not None and not project_image(route):
        log.warning("%s: operating_points: %s from the model card of the project's %s algorithm; give this "
                    "algorithm's own (its model card's) in operating_points", where,
                    ", ".join(f"{slug} = {card[slug]}" for slug in defaulted), route.interface)
    points = {**card, **{slug: float(value) for slug, value in given.items()}}
    return tuple((slug, points[slug]) for slug in sorted(points))


def _route(table: dict, where: str) -> Route:
    """One [[route]], checked (the interface's DICOM mapping too: output_dicom.check_image_route)."""
    _no_unknown_keys(table, ROUTE_KEYS, where)
    if ("image" in table) == ("command" in table):
        raise InputError(f"{where}: give image (a Docker image, run as grand-challenge runs it) or command (the "
                         "algorithm's entry as a process on this host), one of them")
    gpu = _take(table, "gpu", str, where, "off")
    memory = float(_take(table, "memory_gb", (int, float), where, 8))
    if gpu not in ("auto", "on", "off") or memory <= 0:
        raise InputError(f"{where}: gpu must be auto, on or off and memory_gb positive")
    route = Route(
        name=_take(table, "name", str, where),
        modalities=tuple(m.upper() for m in _strings(table, "modalities", where, True)),
        body_parts=tuple(b.upper() for b in _strings(table, "body_parts", where, False)),
        interface=_take(table, "interface", str, where),
        timeout_seconds=_positive(table, "timeout_seconds", where, 3600),
        image=_take(table, "image", str, where) if "image" in table else None,
        command=_strings(table, "command", where, required=True) if "command" in table else (),
        inbox=Path(_take(table, "inbox", str, where)) if "inbox" in table else None,
        model=Path(_take(table, "model", str, where)) if "model" in table else None, memory_gb=memory, gpu=gpu,
        slurm=_slurm_route(table, where, gpu))
    devices = _gpu_devices(table, where, gpu, route.slurm)
    route = dataclasses.replace(route, gpu_devices=devices,
                                max_parallel_jobs=_max_parallel_jobs(table, where, gpu, route.slurm, devices))
    if route.interface == "generic":  # the interface declared here: its input socket and its outputs' kinds
        outputs = _take(table, "outputs", list, where)
        if not outputs or not all(isinstance(o, dict) and isinstance(o.get("slug"), str) and
                                  isinstance(o.get("kind"), str) for o in outputs):
            raise InputError(f"{where}: outputs: expected a list of {{slug = \"...\", kind = \"...\"}}")
        route = dataclasses.replace(route, input_socket=_take(table, "input", str, where),
                                    outputs=tuple((o["slug"], o["kind"]) for o in outputs))
    elif "input" in table or "outputs" in table:
        raise InputError(f"{where}: input and outputs declare an interface = \"generic\"")
    keep_below = table.get("keep_below_threshold", False)
    if not isinstance(keep_below, bool):
        raise InputError(f"{where}: keep_below_threshold = {keep_below!r}: expected true or false")
    route = dataclasses.replace(route, keep_below_threshold=keep_below,
                                operating_points=_operating_points(table, where, route))
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
    except RecursionError:  # tomllib recurses once per level of nested arrays and inline tables
        raise InputError(f"{path}: not valid TOML (arrays or tables nested too deeply)") from None
    _no_unknown_keys(document, {"gateway", "pacs", "route", "caller"}, str(path))
    gateway = _take(document, "gateway", dict, str(path))
    pacs = _take(document, "pacs", dict, str(path))
    where_g, where_p = f"{path} [gateway]", f"{path} [pacs]"
    _no_unknown_keys(gateway, GATEWAY_KEYS, where_g)
    _no_unknown_keys(pacs, {"ae_title", "host", "port", "tls"}, where_p)
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
        routes.append(_route(table, where))
    names = [r.name for r in routes]
    if len(set(names)) != len(names):
        raise InputError(f"{path}: route names must differ ({', '.join(names)})")
    work_dir = Path(_take(gateway, "work_dir", str, where_g))
    accept = _take(gateway, "accept", str, where_g, "all")
    unknown = sorted({m for r in routes for m in r.modalities} - set(MODALITY_SOP_CLASSES))
    if accept not in ACCEPT or (accept == "routes" and unknown):
        refused = f"; not {', '.join(unknown)}" if unknown else ""
        raise InputError(f"{where_g}: accept = {accept!r}: expected \"all\" or \"routes\" (the storage SOP classes of "
                         f"the modalities {', '.join(MODALITY_SOP_CLASSES)}{refused})")
    return GatewayConfig(
        ae_title=_ae_title(gateway, where_g, "MEDCHALLENGE"), host=_take(gateway, "host", str, where_g, "0.0.0.0"),
        port=_port(gateway, where_g, 11112), work_dir=work_dir,
        study_quiet_seconds=quiet, max_attempts=attempts, pacs_ae_title=_ae_title(pacs, where_p),
        pacs_host=_take(pacs, "host", str, where_p), pacs_port=_port(pacs, where_p), routes=tuple(routes),
        callers=_callers(document, path), limits=_limits(gateway, where_g),
        audit_log=Path(_take(gateway, "audit_log", str, where_g, str(work_dir / "audit.jsonl"))),
        unroutable_keep_hours=_positive(gateway, "unroutable_keep_hours", where_g, 72),
        disk_full_retry_seconds=_positive(gateway, "disk_full_retry_seconds", where_g, 60),
        tls=_tls(gateway, where_g, server=True), pacs_tls=_tls(pacs, where_p, server=False), accept=accept)
