"""Every number of the gateway's configuration is bounded where it is read (issue 37 items 6 and 8, for the
gateway): nan, inf and values whose use would overflow (a route's memory, time, a wait of the gateway, the work
quota, a threshold) are refused at start in one `error:` line naming the file and the key, with the bounds a job's
limits (JobLimits) have, not accepted to fail every study later."""

from __future__ import annotations

import pytest
from gateway_helpers import config_text

from medchallenge.gateway import main

ROUTE = "timeout_seconds = 300"


@pytest.mark.parametrize(("table", "line", "key"), [
    ("route", "memory_gb = nan", "memory_gb = nan"),
    ("route", "memory_gb = inf", "memory_gb = inf"),
    ("route", "memory_gb = 1e308", "memory_gb = 1e+308"),
    ("route", "memory_gb = 0.5", "memory_gb = 0.5"),  # below what grand-challenge reserves: no job could run
    ("route", "timeout_seconds = nan", "timeout_seconds = nan"),
    ("route", "timeout_seconds = 1e300", "timeout_seconds = 1e+300"),
    ("route", "operating_points = {caverns = nan}", "operating_points: caverns = nan"),
    ("gateway", "study_quiet_seconds = inf", "study_quiet_seconds = inf"),
    ("gateway", "study_quiet_seconds = nan", "study_quiet_seconds = nan"),
    ("gateway", "acse_timeout_seconds = 1e300", "acse_timeout_seconds = 1e+300"),
    ("gateway", "unroutable_keep_hours = 1e300", "unroutable_keep_hours = 1e+300"),
    ("gateway", "work_quota_mib = 1e300", "work_quota_mib = 1e+300"),
])
def test_a_number_out_of_bounds_is_one_line_naming_the_file_and_key(tmp_path, capsys, table, line, key):
    text = config_text(tmp_path / "work", 11112, 4242, ["true"])
    if table == "route":
        text = text.replace(ROUTE, f"{ROUTE}\n{line}") if not line.startswith("timeout") else text.replace(ROUTE, line)
    else:
        text = text.replace("max_attempts = 2", f"max_attempts = 2\n{line}").replace(
            "study_quiet_seconds = 1.0\n", "" if line.startswith("study_quiet") else "study_quiet_seconds = 1.0\n")
    path = tmp_path / "gateway.toml"
    path.write_text(text)
    assert main(["--config", str(path), "--check"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {path}") and key in err, err
    assert "Traceback" not in err
