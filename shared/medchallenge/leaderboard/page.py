"""The leaderboard's HTML page: one self-contained file (inline CSS and SVG, no script, font or image from
elsewhere), so that it opens offline; its only links are relative ones to the phase's other boards and the teams'
reports beside it. The table with intervals (and, from a phase, each team's failed jobs, warnings and report), the
teams not ranked and why, the rank-stability blob plot and the pairwise significance map, drawn from
leaderboard.json's content."""

from __future__ import annotations

import unicodedata
from html import escape
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

CELL = 34  # px per team in the plots
# Unicode's bidirectional formatting characters: a U+202E in a team name reverses the text after it on the page
BIDI_CONTROLS = dict.fromkeys(map(ord, "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"))


def team_label(name: str) -> str:
    """A team name as shown to people (page, CSV, log): bidirectional formatting and control characters written as
    visible `<U+202E>` marks, so that no name can reorder the text around it or break a line."""
    return "".join(f"<U+{ord(c):04X}>" if ord(c) in BIDI_CONTROLS or unicodedata.category(c) == "Cc" else c
                   for c in name)


def _team(name: str) -> str:
    return escape(team_label(name))
MARGIN_LEFT, MARGIN_TOP, MARGIN_BOTTOM = 150, 20, 120


def _number(value: float | None, digits: int = 4) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _x_labels(names: list[str], x0: float, y: float) -> str:
    return "".join(f'<text x="{x0 + (k + 0.5) * CELL:.1f}" y="{y:.1f}" text-anchor="end" '
                   f'transform="rotate(-45 {x0 + (k + 0.5) * CELL:.1f} {y:.1f})">{_team(name)}</text>'
                   for k, name in enumerate(names))


def blob_plot(board: dict[str, Any]) -> str:
    """challengeR's blob plot: per team (x, in leaderboard order) a disc at each rank (y) it takes in the
    bootstrap, area proportional to how often; the median rank (black dot) and the rank interval (line)."""
    teams = board["teams"]
    n = len(teams)
    width, height = MARGIN_LEFT + n * CELL + 20, MARGIN_TOP + n * CELL + MARGIN_BOTTOM
    resamples = board["bootstrap"]["n"]
    parts = [f'<svg id="blob-plot" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="rank distribution per team">']
    x0, y0 = MARGIN_LEFT, MARGIN_TOP

    def y_of(rank: float) -> float:
        return y0 + (rank - 0.5) * CELL

    for rank in range(1, n + 1):
        parts.append(f'<line x1="{x0}" x2="{x0 + n * CELL}" y1="{y_of(rank):.1f}" y2="{y_of(rank):.1f}" '
                     'class="grid"/>')
        parts.append(f'<text x="{x0 - 8}" y="{y_of(rank) + 4:.1f}" text-anchor="end">{rank}</text>')
    for k, row in enumerate(teams):
        x = x0 + (k + 0.5) * CELL
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y_of(row["rank_low"]):.1f}" '
                     f'y2="{y_of(row["rank_high"]):.1f}" class="interval"/>')
        for rank, count in enumerate(row["rank_distribution"], start=1):
            if count:
                radius = 0.48 * CELL * (count / resamples) ** 0.5
                parts.append(f'<circle cx="{x:.1f}" cy="{y_of(rank):.1f}" r="{radius:.2f}" class="blob">'
                             f'<title>{_team(row["team"])}: rank {rank} in {count} of {resamples} resamples'
                             '</title></circle>')
        parts.append(f'<circle cx="{x:.1f}" cy="{y_of(row["median_rank"]):.1f}" r="3" class="median"/>')
    parts.append(_x_labels([row["team"] for row in teams], x0, y0 + n * CELL + 12))
    parts.append(f'<text x="16" y="{y0 + n * CELL / 2:.1f}" transform="rotate(-90 16 {y0 + n * CELL / 2:.1f})" '
                 'text-anchor="middle">rank in the bootstrap</text>')
    parts.append("</svg>")
    return "".join(parts)


def significance_map(board: dict[str, Any]) -> str:
    """challengeR's significance map: cell (row, column) filled where the row's team is significantly better
    than the column's (one-sided test, Holm-adjusted p below alpha); teams in leaderboard order."""
    sig = board["significance"]
    names = sig["teams"]
    n = len(names)
    width, height = MARGIN_LEFT + n * CELL + 20, MARGIN_TOP + n * CELL + MARGIN_BOTTOM
    parts = [f'<svg id="significance-map" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="pairwise significance">']
    x0, y0 = MARGIN_LEFT, MARGIN_TOP
    for i, row_name in enumerate(names):
        parts.append(f'<text x="{x0 - 8}" y="{y0 + (i + 0.5) * CELL + 4:.1f}" text-anchor="end">'
                     f'{_team(row_name)}</text>')
        for j, column_name in enumerate(names):
            if i == j:
                css, tip = "diagonal", _team(row_name)
            else:
                css = "significant" if sig["significant"][i][j] else "not-significant"
                tip = (f"{_team(row_name)} better than {_team(column_name)}: p = {_number(sig['p'][i][j])}, "
                       f"Holm-adjusted p = {_number(sig['p_holm'][i][j])}")
            parts.append(f'<rect x="{x0 + j * CELL}" y="{y0 + i * CELL}" width="{CELL}" height="{CELL}" '
                         f'class="{css}"><title>{tip}</title></rect>')
    parts.append(_x_labels(names, x0, y0 + n * CELL + 12))
    parts.append("</svg>")
    return "".join(parts)


def ci_bar(row: dict[str, Any], lowest: float, highest: float) -> str:
    """A small interval bar for the table: the interval and the observed value on a shared scale."""
    span = (highest - lowest) or 1.0

    def x(value: float) -> float:
        return 4 + 152 * (value - lowest) / span

    if row["low"] is None:
        return ""
    return (f'<svg class="ci" width="160" height="14" viewBox="0 0 160 14"><line x1="{x(row["low"]):.1f}" '
            f'x2="{x(row["high"]):.1f}" y1="7" y2="7"/><circle cx="{x(row["value"]):.1f}" cy="7" r="3"/></svg>')


STYLE = """
body { font-family: "DejaVu Sans", Arial, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border-bottom: 1px solid #ccc; padding: 4px 10px; text-align: right; }
td { white-space: nowrap; }
th:nth-child(2), td:nth-child(2) { text-align: left; }
svg text { font-size: 12px; fill: #222; }
.grid { stroke: #eee; }
.interval { stroke: #555; stroke-width: 1.5; }
.blob { fill: #3b75af; fill-opacity: 0.75; }
.median { fill: #000; }
.significant { fill: #f2c12e; stroke: #fff; }
.not-significant { fill: #2c4d7a; stroke: #fff; }
.diagonal { fill: #fff; stroke: #ccc; }
.ci line { stroke: #3b75af; stroke-width: 3; }
.ci circle { fill: #000; }
.legend span { display: inline-block; width: 1em; height: 1em; vertical-align: middle; margin: 0 0.3em 0 1em; }
.notes { color: #555; max-width: 60em; }
.failed-jobs { color: #b00020; font-weight: bold; }
#not-ranked th:first-child, #not-ranked td:first-child { text-align: left; }
#not-ranked td.reason { white-space: normal; max-width: 40em; }
ul.warnings { margin: 0; padding-left: 1.2em; text-align: left; white-space: normal; max-width: 40em; color: #8a5a00; }
"""


def _link(path: str | None, text: str) -> str:
    """A relative link to a file beside the page (a report, another board), or a dash."""
    return f'<a href="{escape(quote(path))}">{escape(text)}</a>' if path else "–"


def _jobs(row: dict[str, Any]) -> str:
    """`failed / all` of a team's jobs, marked where any failed."""
    if not row.get("jobs"):  # not a phase's board, or refused before any job
        return "–"
    text = f"{row['jobs_failed']} / {row['jobs']}"
    return f'<span class="failed-jobs">{text}</span>' if row["jobs_failed"] else text


def _warnings(row: dict[str, Any]) -> str:
    warnings = row.get("warnings") or []
    return f'<ul class="warnings">{"".join(f"<li>{escape(team_label(w))}</li>" for w in warnings)}</ul>' \
        if warnings else "–"


PHASE_HEADS = "<th>jobs failed</th><th>warnings</th><th>report</th>"


def _phase_cells(row: dict[str, Any]) -> str:
    return f"<td>{_jobs(row)}</td><td>{_warnings(row)}</td><td>{_link(row.get('report'), 'report')}</td>"


def boards_line(board: dict[str, Any]) -> str:
    """Links to the other boards of the same run (one per official ranking metric), this one in bold."""
    boards = board.get("boards") or []
    if len(boards) < 2:
        return ""
    items = [f"<b>{escape(b['metric'])}</b>" if b["metric"] == board["metric"] else _link(b["file"], b["metric"])
             for b in boards]
    return f'<p id="boards">Boards of this run, one per official ranking metric: {" · ".join(items)}</p>'


def not_ranked_section(board: dict[str, Any], phase: bool) -> str:
    """The teams not ranked, with why (refused, every job failed, not scored) and what the phase knows of them."""
    rows = board.get("not_ranked") or []
    if not rows:
        return ""
    head = "<th>team</th><th>why</th>" + (PHASE_HEADS if phase else "")
    body = "".join(f"<tr><td>{_team(row['team'])}</td><td class=\"reason\">{escape(team_label(row['reason']))}</td>"
                   + (_phase_cells(row) if phase else "") + "</tr>" for row in rows)
    return f'<h2>Not ranked</h2><table id="not-ranked"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def page_top(board: dict[str, Any]) -> str:
    """The page's head and title, up to its first paragraph."""
    title = " ".join(filter(None, [board["challenge"], board["edition"]]))
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Leaderboard: {escape(title)}</title>
<style>{STYLE}</style>
</head>
<body>
<h1>Leaderboard: {escape(title)}</h1>
"""


def render_unranked(board: dict[str, Any]) -> str:
    """The page of a board on which no team could be ranked (each refused, every job failed or not scored)."""
    phase = any(row.get("jobs") is not None for row in board["not_ranked"])
    return f"""{page_top(board)}<p>No team could be ranked by <b>{escape(board['metric'])}</b>: each one below was
refused, had every job fail or could not be scored.</p>
{not_ranked_section(board, phase)}
<p class="notes">Made by medchallenge leaderboard.</p>
</body>
</html>
"""


def _rank_cell(row: dict[str, Any]) -> str:
    """A team's bootstrap rank, `median [low, high]`, or a dash where the ranking has no resamples."""
    if row.get("median_rank") is None:
        return "–"
    return f"{row['median_rank']:g} [{row['rank_low']:g}, {row['rank_high']:g}]"


def ranking_table(board: dict[str, Any], phase: bool, digits: int = 4, extra_heads: str = "",
                  extra_cells: Callable[[dict[str, Any]], str] = lambda row: "") -> str:
    """The ranking with each team's value, interval and bootstrap rank (and, from a phase, its jobs, warnings and
    report); `extra_heads` and `extra_cells` add columns after P(rank 1), `digits` the value's decimal places."""
    teams = board["teams"]
    level = f"{100 * board['bootstrap']['level']:g}%"
    bounds = [v for row in teams for v in (row["low"], row["high"], row["value"]) if v is not None]
    lowest, highest = min(bounds, default=0.0), max(bounds, default=1.0)
    rows = "".join(
        f"<tr><td>{row['rank']}</td><td>{_team(row['team'])}</td><td>{_number(row['value'], digits)}</td>"
        f"<td>[{_number(row['low'], digits)}, {_number(row['high'], digits)}]</td>"
        f"<td>{ci_bar(row, lowest, highest)}</td><td>{_rank_cell(row)}</td>"
        f"<td>{_number(row['p_first'], 3)}</td>{extra_cells(row)}{_phase_cells(row) if phase else ''}</tr>"
        for row in teams)
    return f"""<h2>Ranking with {level} intervals</h2>
<table id="leaderboard">
<thead><tr><th>rank</th><th>team</th><th>{escape(board['metric'])}</th><th>{level} interval</th><th></th>
<th>bootstrap rank<br>median [{level}]</th><th>P(rank 1)</th>{extra_heads}{PHASE_HEADS if phase else ''}</tr></thead>
<tbody>{rows}</tbody>
</table>
"""


def stability_section(board: dict[str, Any]) -> str:
    """The blob plot of the teams' bootstrap ranks and the mean Kendall's tau."""
    level = f"{100 * board['bootstrap']['level']:g}%"
    return f"""<h2>Ranking stability</h2>
<p class="notes">Blob plot: each team's ranks over the bootstrap resamples; disc area is the share of resamples with
that rank, the black dot the median rank, the line the {level} rank interval. Mean Kendall's tau between the
observed ranking and the resamples' rankings: {_number(board['mean_kendall_tau'], 3)}.</p>
{blob_plot(board)}
"""


def significance_section(board: dict[str, Any], tested: str = "the aggregate") -> str:
    """The pairwise tests' significance map, with the test named (the paired bootstrap's of `tested`)."""
    sig = board["significance"]
    test_name = ("one-sided Wilcoxon signed-rank test over per-case scores" if sig["test"] == "wilcoxon"
                 else f"one-sided paired bootstrap test of {tested}")
    among = (f" of the first {len(sig['teams'])} of the {sig['teams_ranked']} ranked teams (the tests and this map "
             "grow with the square of the teams)" if "teams_ranked" in sig else "")
    return f"""<h2>Pairwise significance</h2>
<p class="notes">{escape(test_name)} for every ordered pair{among} (row better than column), Holm-adjusted over all
{len(sig['teams']) * (len(sig['teams']) - 1)} pairs, alpha = {sig['alpha']:g}.</p>
<p class="legend"><span class="key" style="background:#f2c12e"></span>row significantly better than column
<span class="key" style="background:#2c4d7a"></span>not significantly better</p>
{significance_map(board)}
"""


def aggregates_section(board: dict[str, Any], digits: Callable[[str], int] = lambda key: 4) -> str:
    """Every aggregate of every team with its interval (`digits`: the decimal places of an aggregate)."""
    level = f"{100 * board['bootstrap']['level']:g}%"
    aggregate_rows = "".join(
        f"<tr><td>{_team(row['team'])}</td><td>{escape(key)}</td><td>{_number(value, digits(key))}</td>"
        f"<td>[{_number(row['intervals'].get(key, {}).get('low'), digits(key))}, "
        f"{_number(row['intervals'].get(key, {}).get('high'), digits(key))}]</td></tr>"
        for row in board["teams"] for key, value in row["aggregates"].items())
    return f"""<h2>Every aggregate</h2>
<details><summary>all aggregates with their {level} intervals</summary>
<table id="aggregates"><thead><tr><th>team</th><th>aggregate</th><th>value</th><th>{level} interval</th></tr></thead>
<tbody>{aggregate_rows}</tbody></table></details>
"""


PAGE_END = ('<p class="notes">Made by medchallenge leaderboard. Method after challengeR (Wiesenfarth et al., '
            "Scientific Reports\n2021): bootstrap ranking stability, blob plots, significance maps.</p>\n</body>\n"
            "</html>\n")


def is_phase_board(board: dict[str, Any]) -> bool:
    """Whether a phase made the board (its teams have jobs): the table then shows jobs, warnings and reports."""
    return any(row.get("jobs") is not None for row in [*board["teams"], *board.get("not_ranked", [])])


def render(board: dict[str, Any]) -> str:
    """The whole page (`render_unranked` where no team is ranked)."""
    if not board["teams"]:
        return render_unranked(board)
    metric, boot = board["metric"], board["bootstrap"]
    level = f"{100 * boot['level']:g}%"
    phase = is_phase_board(board)
    return f"""{page_top(board)}<p>Ranked by <b>{escape(metric)}</b>, higher is better ({escape(board['ties'])}), over
{board['num_units']} {escape(board['unit'])}. Intervals: {level} percentile bootstrap, {boot['n']} resamples of the
cases (seed {boot['seed']}), the same resamples for every team.</p>
{boards_line(board)}
{ranking_table(board, phase)}{not_ranked_section(board, phase)}
{stability_section(board)}{significance_section(board)}{aggregates_section(board)}{PAGE_END}"""


DISPLAY = {"all": "every result", "rec": "each team's most recent result", "bst": "each team's best result"}
PAIRING = {"row index": "paired by their row index in case.<metric> (evalutils' layout without a case_id column)",
           "position": "paired by their position in results (grand-challenge-forge's layout without case_id: the "
                       "order of predictions.json)"}


def _better(column: dict[str, Any]) -> str:
    return f"{escape(column['title'])} ({'lower' if column['order'] == 'asc' else 'higher'} is better)"


def scoring_line(board: dict[str, Any]) -> str:
    """How the definition ranks: the score column alone, or the mean or median of the ranked columns' ranks."""
    ranked = [c for c in board["columns"] if c["ranked"]]
    if board["scoring_method_choice"] == "abs":
        required = ", ".join(escape(c["title"]) for c in ranked[1:])
        return f"the rank in {_better(ranked[0])}" + (f" (a result without {required} is not ranked)"
                                                       if required else "")
    summary = "mean" if board["scoring_method_choice"] == "avg" else "median"
    return f"the {summary} of the ranks in {', '.join(_better(c) for c in ranked)}"


def _column_cell(row: dict[str, Any], column: dict[str, Any]) -> str:
    """A definition column's value for a team in its decimal places, with its error (grand-challenge's
    `value ± error` of an error_path) and its interval where it has them."""
    digits = column["decimal_places"]
    text = _number(row["aggregates"].get(column["title"]), digits)
    error = row.get("errors", {}).get(column["title"])
    if error is not None:
        text += f" ± {_number(error, digits)}"
    interval = row["intervals"].get(column["title"])
    if interval:
        text += f" [{_number(interval['low'], digits)}, {_number(interval['high'], digits)}]"
    return f"<td>{text}</td>"


def no_intervals_list(board: dict[str, Any]) -> str:
    """Each column without intervals and why (not a per-case summary, per-case values missing or inconsistent),
    and how the cases of the others are paired where they have no case ids."""
    items = "".join(f"<li><b>{escape(column['title'])}</b>: no intervals: {escape(team_label(column['no_intervals']))}"
                    "</li>" if column["no_intervals"] else
                    f"<li><b>{escape(column['title'])}</b>: cases {escape(PAIRING[column['paired_by']])}</li>"
                    for column in board["columns"] if column["no_intervals"] or column["paired_by"] in PAIRING)
    return f'<ul id="no-intervals" class="notes">{items}</ul>' if items else ""


def render_definition(board: dict[str, Any]) -> str:
    """The page of a challenge definition's board (definition_board.py): the built-ins' page with every column
    of the definition beside the ranking, in its decimal places, and, where the ranking or a column has no
    intervals, why not."""
    if not board["teams"]:
        return render_unranked(board)
    boot, columns = board["bootstrap"], board["columns"]
    level = f"{100 * boot['level']:g}%"
    phase = is_phase_board(board)
    if board["resampled"]:
        intervals = (f"Intervals: {level} percentile bootstrap, {boot['n']} resamples of the {board['num_units']} "
                     f"cases (seed {boot['seed']}), the same resamples for every team; a column without per-case "
                     "values is held at its value in every resample.")
    else:
        intervals = (f"No intervals, rank distributions or pairwise tests for the ranking: "
                     f"{escape(team_label(board['no_intervals']))}.")
    digits = board["columns"][0]["decimal_places"] if board["scoring_method_choice"] == "abs" else 2
    heads = "".join(f"<th>{escape(c['title'])}</th>" for c in columns)
    places = {c["title"]: c["decimal_places"] for c in columns}
    tested = "the score" if board["scoring_method_choice"] == "abs" else "the position"
    return f"""{page_top(board)}<p>Ranked by <b>{escape(board['metric'])}</b>, {'higher' if board['higher_is_better']
    else 'lower'} is better ({escape(board['ties'])}): {scoring_line(board)};
results shown: {DISPLAY[board['result_display_choice']]}. {intervals}</p>
{no_intervals_list(board)}
{ranking_table(board, phase, digits, heads, lambda row: "".join(_column_cell(row, c) for c in columns))}
{not_ranked_section(board, phase)}
{stability_section(board) + significance_section(board, tested) if board['resampled'] else ''}
{aggregates_section(board, lambda key: places.get(key, 4))}{PAGE_END}"""
