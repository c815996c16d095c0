"""`make demo`: every challenge end to end with docker compose on freshly generated data, metrics as a table."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from .registry import CONFIGURATIONS_WITH_DATA, DEMO_ROOT, Configuration
from .review.evaluator_review import REVIEW_PAGE

SEED = "2026"


def _open(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o777)
    return path


def _under(root: Path, default: str) -> Path:
    """A compose folder default (`./demo/ribfrac/metrics`) moved under `root`."""
    return root / Path(default).relative_to(DEMO_ROOT)


def metrics_folder(configuration: Configuration, root: Path) -> Path:
    """Where the configuration's evaluator service writes metrics.json (and review.html) under `root`."""
    return _under(root, configuration.service.mount("metrics").default)


def generate(configuration: Configuration, out: Path) -> None:
    """The demo's data of a configuration in `out` (input/ and ground_truth/; predictions/ where the challenge has
    no algorithm): its input generator at the demo size, seed SEED."""
    challenge = configuration.challenge
    subprocess.run([sys.executable, "-m", "medchallenge.synth", challenge.input_generator, "--out", str(out),
                    *challenge.input_generator_size(demo=True), *configuration.edition.synth_arguments,
                    "--seed", SEED], check=True)


def run_demo(configuration: Configuration, root: Path, compose_file: Path) -> dict:
    """Generate the data, run the evaluator service (and the algorithm before it), return metrics.json."""
    service = configuration.service
    if (root / configuration.demo_folder).exists():
        shutil.rmtree(root / configuration.demo_folder)
    generate(configuration, root / configuration.demo_folder)
    algorithm = configuration.algorithm_service
    mounts = [*service.mounts, *(algorithm.mounts if algorithm else ())]
    env = dict(os.environ)
    for mount in mounts:
        if not mount.default.startswith(f"{DEMO_ROOT}/"):
            continue  # the algorithm's model: the one in the repository
        folder = _open(_under(root, mount.default))
        for path in folder.rglob("*"):
            os.chmod(path, 0o777 if path.is_dir() else 0o644)
        env[mount.variable] = str(folder.resolve())
    command = ["docker", "compose", "-f", str(compose_file), "run", "--rm"]
    if service.depends_on is None:
        command.append("--no-deps")
    subprocess.run([*command, service.name], env=env, check=True)
    return json.loads((metrics_folder(configuration, root) / "metrics.json").read_text())


def format_table(results: dict[str, dict]) -> str:
    """Challenge | metric | value, one row per aggregate."""
    rows = [(title, key, f"{value:.4f}" if isinstance(value, float) else str(value))
            for title, metrics in results.items() for key, value in metrics["aggregates"].items()
            if isinstance(value, (int, float))]
    widths = [max(len(r[i]) for r in rows + [("challenge", "metric", "value")]) for i in range(3)]
    line = "-+-".join("-" * w for w in widths)
    out = [" | ".join(h.ljust(w) for h, w in zip(("challenge", "metric", "value"), widths)), line]
    previous = None
    for title, key, value in rows:
        out.append(" | ".join([(title if title != previous else "").ljust(widths[0]), key.ljust(widths[1]),
                               value.rjust(widths[2])]))
        previous = title
    return "\n".join(out)


def review_lines(configurations: list[Configuration], root: Path) -> list[str]:
    """`<title>: <root>/<challenge>/metrics/review.html`, one line per configuration whose evaluator wrote one."""
    pages = ((c.title, metrics_folder(c, root) / REVIEW_PAGE) for c in configurations)
    return [f"{title}: {page}" for title, page in pages if page.is_file()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m medchallenge.demo", description=__doc__)
    parser.add_argument("--root", type=Path, default=Path("demo"), help="where the demo data and results go")
    parser.add_argument("--compose-file", type=Path, default=Path("compose.yaml"))
    parser.add_argument("--only", nargs="*", help="folder names of the challenges to run (default: all)")
    args = parser.parse_args(argv)
    configurations = [c for c in CONFIGURATIONS_WITH_DATA if not args.only or c.demo_folder in args.only]
    results = {}
    for configuration in configurations:
        print(f"== {configuration.title}: docker compose run --rm {configuration.service.name}", flush=True)
        results[configuration.title] = run_demo(configuration, args.root, args.compose_file)
    print()
    print(format_table(results))
    print(f"\nmetrics.json and figures: {args.root}/<challenge>/metrics/")
    reviews = review_lines(configurations, args.root)
    if reviews:
        print(f"{REVIEW_PAGE} (each case's image with the predictions and the ground truth, worst first):")
        print("\n".join(f"  {line}" for line in reviews))
    return 0


if __name__ == "__main__":
    sys.exit(main())
