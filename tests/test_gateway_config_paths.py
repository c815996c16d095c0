"""The paths of the gateway's configuration (work_dir, audit_log, a route's inbox and model, the TLS files) as the
command line's: `~` expanded, and a relative path relative to the configuration file's folder, whatever folder the
gateway (a service, started from `/`) or `--check` runs in."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from gateway_helpers import REPO, config_text, make_ca

from medchallenge.gateway.config import load_config

TLS = """
[gateway.tls]
certificate = "tls/site-server.crt"
private_key = "~/keys/site-server.key"
ca_certificates = "./tls/site-ca.crt"
"""


def test_relative_paths_are_the_files_folders_and_a_tilde_is_home(tmp_path, monkeypatch):
    home, folder, elsewhere = tmp_path / "home", tmp_path / "site conf", tmp_path / "elsewhere"
    for made in (home, folder, elsewhere):
        made.mkdir()
    make_ca(folder / "tls", "site")
    (home / "keys").mkdir()
    (home / "models").mkdir()
    (home / "models" / "tb.tar.gz").write_bytes(b"")
    (folder / "tls" / "site-server.key").rename(home / "keys" / "site-server.key")
    text = config_text(tmp_path / "unused", 11112, 4242, ["true"]).replace(f'work_dir = "{tmp_path / "unused"}"',
                                                                          'work_dir = "queue/work"')
    text = text.replace("max_attempts = 2", 'max_attempts = 2\naudit_log = "~/audit.jsonl"' + TLS)
    text = text.replace("timeout_seconds = 300", 'timeout_seconds = 300\ninbox = "../inboxes/tb"\n'
                                                 'model = "~/models/tb.tar.gz"')
    (folder / "gateway.toml").write_text(text)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(elsewhere)
    config = load_config(Path("..") / "site conf" / "gateway.toml")
    assert config.work_dir == folder / "queue" / "work"
    assert config.audit_log == home / "audit.jsonl"
    (route,) = config.routes
    assert route.inbox == folder / ".." / "inboxes" / "tb" and route.model == home / "models" / "tb.tar.gz"
    assert config.tls.certificate == folder / "tls" / "site-server.crt"
    assert config.tls.private_key == home / "keys" / "site-server.key"
    assert config.tls.ca_certificates == folder / "tls" / "site-ca.crt"
    absolute = text.replace('work_dir = "queue/work"', f'work_dir = "{tmp_path / "abs"}"')
    (folder / "gateway.toml").write_text(absolute)
    assert load_config(folder / "gateway.toml").work_dir == tmp_path / "abs"  # an absolute path stays itself
    # `--check` from another folder, as a service started from / would read it
    checked = subprocess.run([sys.executable, "-m", "medchallenge.gateway", "--config", str(folder / "gateway.toml"),
                              "--check"], cwd="/", capture_output=True, text=True, timeout=120,
                             env={**os.environ, "PYTHONPATH": str(REPO / "shared")})
    assert checked.returncode == 0, checked.stderr
