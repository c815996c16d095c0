"""The leaderboard page in a real headless browser (Debian's chromium-headless-shell, installed by
.ci/provision-browser.sh, a prerequisite of `make test`): it loads offline without console errors, its DOM holds
the table and both plots, and the screenshot shows them drawn (the plots' colours on screen).

Without a browser the test is skipped, except in CI (CI=true) or with REQUIRE_BROWSER=1, where that fails."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from leaderboard_helpers import caption_teams
from PIL import Image

from medchallenge.cli import main as cli_main

BROWSERS = ("chromium-headless-shell", "chromium")
SIGNIFICANT_RGB = (0xF2, 0xC1, 0x2E)
BLOB_RGB_RANGE = ((0x50, 0x8A, 0xBE), (0x70, 0xA0, 0xD0))  # #3b75af at 75% opacity over white


def browser() -> list[str]:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return [path] if name == "chromium-headless-shell" else [path, "--headless"]
    if os.environ.get("CI") == "true" or os.environ.get("REQUIRE_BROWSER") == "1":
        pytest.fail("no headless browser (chromium-headless-shell); run .ci/provision-browser.sh (make browser)")
    pytest.skip("no headless browser; make browser installs Debian's chromium-headless-shell")


def run_browser(*args: str, home: Path) -> subprocess.CompletedProcess:
    command = [*browser(), "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
               "--enable-logging=stderr", "--v=0", f"--user-data-dir={home / 'profile'}",
               "--proxy-server=127.0.0.1:9", "--window-size=1100,1700", *args]  # no network: a proxy that refuses
    return subprocess.run(command, capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(home)},
                          check=False)


class Elements(HTMLParser):
    """Counts of the elements of interest in the DOM the browser built."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.counts: dict[str, int] = {}

    def handle_starttag(self, tag: str, attrs: list) -> None:
        attributes = dict(attrs)
        if tag in ("svg", "table"):
            self.stack.append(attributes.get("id") or "")
        scope = "/".join(filter(None, self.stack))
        self.counts[f"{scope}:{tag}"] = self.counts.get(f"{scope}:{tag}", 0) + 1
        classes = attributes.get("class", "")
        for css in classes.split():
            self.counts[f"{scope}:.{css}"] = self.counts.get(f"{scope}:.{css}", 0) + 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("svg", "table") and self.stack:
            self.stack.pop()


def assert_offline(page: Path) -> list[str]:
    """Nothing to fetch, here or elsewhere: no `src`, and every link a relative one to a file beside the page (the
    other boards, the teams' reports). Returns the links."""
    html = page.read_text()
    assert not re.search(r"\bsrc\s*=", html)
    links = re.findall(r'\bhref\s*=\s*"([^"]*)"', html)
    assert len(links) == len(re.findall(r"\bhref\s*=", html))
    for link in links:
        assert not re.match(r"[A-Za-z][A-Za-z0-9+.-]*:|/", link) and ".." not in link.split("/"), link
        assert (page.parent / link).is_file(), link
    return links


def test_leaderboard_page_renders_offline_without_errors(tmp_path):
    browser()
    ground_truth, submissions = caption_teams(tmp_path, 5)
    output = tmp_path / "out"
    assert cli_main(["leaderboard", "--challenge", "imageclef-caption", "--ground-truth", str(ground_truth),
                     "--submissions", str(submissions), "--output", str(output), "--bootstrap", "200",
                     "--no-progress"]) == 0
    page = output / "leaderboard.html"
    board = json.loads((output / "leaderboard.json").read_text())
    html = page.read_text()
    assert_offline(page)

    dom = run_browser("--dump-dom", page.as_uri(), home=tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    problems = [line for line in dom.stderr.splitlines() if "CONSOLE" in line or "Failed to load" in line]
    assert not problems, problems
    elements = Elements()
    elements.feed(dom.stdout)
    counts = elements.counts
    n = len(board["teams"])
    assert counts["leaderboard:tr"] == n + 1  # header and one row per team
    assert counts["blob-plot:.median"] == n
    assert counts["blob-plot:.blob"] == sum(np.count_nonzero(t["rank_distribution"]) for t in board["teams"])
    assert counts["significance-map:rect"] == n * n
    significant = sum(map(sum, board["significance"]["significant"]))
    assert significant and counts["significance-map:.significant"] == significant

    shot = run_browser(f"--screenshot={tmp_path / 'page.png'}", page.as_uri(), home=tmp_path)
    assert shot.returncode == 0, shot.stderr[-2000:]
    pixels = np.asarray(Image.open(tmp_path / "page.png").convert("RGB")).reshape(-1, 3)
    assert (pixels == SIGNIFICANT_RGB).all(axis=1).any()  # the significance map is drawn
    low, high = (np.array(bound) for bound in BLOB_RGB_RANGE)
    assert ((pixels >= low) & (pixels <= high)).all(axis=1).sum() > 200  # and the blobs
    assert (pixels < 64).all(axis=1).sum() > 1000  # and text


def test_a_phase_board_shows_failed_jobs_warnings_reports_and_the_teams_not_ranked_with_why(tmp_path):
    """What a phase passes (TeamNotes): each ranked team's failed jobs, warnings and report link; a refused team and
    one whose every job failed listed as not ranked with why, in the page (Chromium), the JSON and the CSV; one
    board per official ranking metric (caption: concept_f1 and bleu), each linking to the other."""
    import csv

    from medchallenge.leaderboard.table import TeamNotes, build_leaderboard_parser, write_boards

    browser()
    ground_truth, submissions = caption_teams(tmp_path, 4)
    output = tmp_path / "out"
    for team in ("team-A", "team-B", "team-C", "team-D"):
        (output / "submissions" / team).mkdir(parents=True)
        (output / "submissions" / team / "report.html").write_text("<!DOCTYPE html><title>report</title>")
    notes = {"team-A": TeamNotes(30, 0, (), "submissions/team-A/report.html"),
             "team-B": TeamNotes(30, 3, ("convention check: x and y swapped: 0.1 -> 0.8",),
                                 "submissions/team-B/report.html"),
             "team-C": TeamNotes(30, 0, (), "submissions/team-C/report.html"),
             "team-D": TeamNotes(30, 30, (), "submissions/team-D/report.html",
                                 not_ranked="every job failed (30 of 30)"),
             "team-E": TeamNotes(0, 0, not_ranked="refused before any job: image archive e.tar: no manifest.json")}
    args = build_leaderboard_parser().parse_args([
        "--challenge", "imageclef-caption", "--ground-truth", str(ground_truth), "--submissions", str(submissions),
        "--output", str(output), "--bootstrap", "100", "--no-progress"])
    boards = write_boards(args, [], notes)
    assert [b["metric"] for b in boards] == ["concept_f1", "bleu"]
    for board, stem in zip(boards, ("leaderboard", "leaderboard-bleu")):
        page = output / f"{stem}.html"
        assert json.loads((output / f"{stem}.json").read_text()) == board
        assert sorted(row["team"] for row in board["teams"]) == ["team-A", "team-B", "team-C"]  # D: all failed
        links = assert_offline(page)
        assert sorted(set(links)) == sorted({*(f"submissions/team-{t}/report.html" for t in "ABCD"),
                                             "leaderboard-bleu.html" if stem == "leaderboard" else "leaderboard.html"})
        dom = run_browser("--dump-dom", page.as_uri(), home=tmp_path)
        assert dom.returncode == 0, dom.stderr[-2000:]
        elements = Elements()
        elements.feed(dom.stdout)
        assert elements.counts["leaderboard:tr"] == 3 + 1
        assert elements.counts["not-ranked:tr"] == 2 + 1
        assert elements.counts["leaderboard:.failed-jobs"] == 1  # team-B's 3 / 30
        assert elements.counts["leaderboard:.warnings"] == 1
        text = re.sub(r"<[^>]+>", " ", dom.stdout)
        assert "every job failed (30 of 30)" in text and "refused before any job: image archive e.tar" in text
        assert "convention check: x and y swapped: 0.1 -&gt; 0.8" in dom.stdout
        rows = {row["team"]: row for row in csv.DictReader((output / f"{stem}.csv").open())}
        assert list(rows) == [*(row["team"] for row in board["teams"]), "team-D", "team-E"]
        assert (rows["team-B"]["jobs_failed"], rows["team-B"]["jobs"]) == ("3", "30")
        assert rows["team-B"]["warnings"] == "convention check: x and y swapped: 0.1 -> 0.8"
        assert (rows["team-E"]["rank"], rows["team-E"]["not_ranked"]) == \
            ("", "refused before any job: image archive e.tar: no manifest.json")
        assert rows["team-D"]["not_ranked"] == "every job failed (30 of 30)"
