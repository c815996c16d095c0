"""The gateway's job-runner service at its start: panimg, which converts every study for its job, is imported before
the first study arrives (0.7 s of CPU here that the first study of a burst would otherwise wait for)."""

from __future__ import annotations

import subprocess
import sys

from gateway_helpers import REPO, config_text, free_port, route_text

START_AND_STOP = """
import sys, threading
from pathlib import Path
from medchallenge.gateway import load_config
from medchallenge.gateway.job_runner import serve_job_runner
stopping = threading.Event()
stopping.set()
before = "panimg" in sys.modules
serve_job_runner(load_config(Path(sys.argv[1])), stopping)
print(before, "panimg" in sys.modules)
"""


def test_the_job_runner_imports_panimg_at_its_start_not_at_the_first_study(tmp_path):
    config = tmp_path / "gateway.toml"
    config.write_text(config_text(tmp_path / "work", free_port(), free_port(), [sys.executable, "-c", "pass"])
                      + route_text("object-cxr", ["CR"], [], [sys.executable, "-c", "pass"])
                      + f'inbox = "{tmp_path / "inbox"}"\n')
    ran = subprocess.run([sys.executable, "-c", START_AND_STOP, str(config)], capture_output=True, text=True,
                         env={"PYTHONPATH": str(REPO / "shared"), "PATH": "/usr/bin:/bin"}, timeout=300)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["False", "True"]  # no study came: imported at the start
