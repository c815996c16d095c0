"""`make demo`: every challenge end to end with docker compose on freshly generated data, metrics as a table."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Demo:
    """One challenge's demo: how to generate its data and which compose service scores it."""

    title: str
    folder: str
    service: str
    env_prefix: str
    synth: tuple[str, ...]
    runs_algorithm: bool = False


DEMOS = (
    Demo("ImageCLEF 2022 TB caverns", "tb_caverns", "tb-caverns-evaluator", "TB_CAVERNS",
         ("tb-caverns", "--cases", "8", "--seed", "2026"), runs_algorithm=True),
    Demo("MICCAI 2020 RibFrac", "ribfrac", "ribfrac-evaluator", "RIBFRAC",
         ("ribfrac", "--cases", "8", "--shape", "256", "256", "160", "--seed", "2026")),
    Demo("object-CXR", "object_cxr", "object-cxr-evaluator", "OBJECT_CXR",
         ("object-cxr", "--images", "1000", "--seed", "2026")),
    Demo("ImageCLEFmed Caption 2022", "caption_2022", "caption-2022-evaluator", "CAPTION_2022",
         ("imageclef-caption", "--edition", "2022", "--images", "2000", "--secondary", "--seed", "2026")),
    Demo("ImageCLEFmed Caption 2021", "caption_2021", "caption-2021-evaluator", "CAPTION_2021",
         ("imageclef-caption", "--edition", "2021", "--images", "2000", "--seed", "2026")),
)


def _open(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o777)
    return path


def run_demo(demo: Demo, root: Path, compose_file: Path) -> dict:
    """Generate the data, run the evaluator service (and the algorithm before it), return metrics.json."""
    base = root / demo.folder
    if base.exists():
        shutil.rmtree(base)
    subprocess.run([sys.executable, "-m", "medchallenge.synth", demo.synth[0], "--out", str(base), *demo.synth[1:]],
                   check=True)
    env = dict(os.environ)
    for name in ("input", "predictions", "ground_truth", "metrics"):
        folder = _open(base / name)
        for path in folder.rglob("*"):
            os.chmod(path, 0o777 if path.is_dir() else 0o644)
        env[f"{demo.env_prefix}_{name.upper()}"] = str(folder.resolve())
    command = ["docker", "compose", "-f", str(compose_file), "run", "--rm"]
    if not demo.runs_algorithm:
        command.append("--no-deps")
    subprocess.run([*command, demo.service], env=env, check=True)
    return json.loads((base / "metrics" / "metrics.json").read_text())


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m medchallenge.demo", description=__doc__)
    parser.add_argument("--root", type=Path, default=Path("demo"), help="where the demo data and results go")
    parser.add_argument("--compose-file", type=Path, default=Path("compose.yaml"))
    parser.add_argument("--only", nargs="*", help="folder names of the challenges to run (default: all)")
    args = parser.parse_args(argv)
    results = {}
    for demo in DEMOS:
        if args.only and demo.folder not in args.only:
            continue
        print(f"== {demo.title}: docker compose run --rm {demo.service}", flush=True)
        results[demo.title] = run_demo(demo, args.root, args.compose_file)
    print()
    print(format_table(results))
    print(f"\nmetrics.json and figures: {args.root}/<challenge>/metrics/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
