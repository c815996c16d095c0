"""The review as HTML: the convention check's lines and the case figures' thumbnails as PNG data URIs (no script,
nothing fetched: the page stays one offline file), each a link to its figure at full resolution in the folder beside
the page, for preflight.html, a phase's report.html and the evaluator's review.html. Every text is escaped (case
names, captions, notes: anyone's text)."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

BASE_STYLE = """
body { font-family: sans-serif; margin: 24px; color: #1b1b1b; max-width: 1200px; }
table { border-collapse: collapse; margin: 8px 0 20px; }
th, td { border: 1px solid #c8c8c8; padding: 4px 8px; text-align: left; vertical-align: top; font-size: 14px; }
th { background: #eef1f5; }
td.number { text-align: right; font-variant-numeric: tabular-nums; }
"""
STYLE = """
figure { display: inline-block; margin: 4px 8px 8px 0; vertical-align: top; }
figcaption { font-size: 13px; max-width: 440px; overflow-wrap: anywhere; }
.convention { background: #fff4d6; padding: 6px 10px; }
"""


def review_section(review: Mapping[str, Any] | None, figures: Mapping[str, bytes]) -> str:
    """The review (its JSON: `Review.to_json`, with its heading where it has one) with its figures (`figures`:
    their bytes by file name)."""
    if not review:
        return ""
    findings = "".join(f'<p class="convention">{escape(line)}</p>' for line in review["conventions"])
    tried = ", ".join(escape(t) for t in review["transforms_tried"])
    checked = (f"<p>Convention check: no simple transform ({tried}) scores far better.</p>" if tried and not findings
               else "")
    shown = "".join(f'<figure><a href="{escape(entry["full_file"])}" title="full resolution">'
                    f'<img alt="{escape(entry["case"])}" src="data:image/png;base64,'
                    f'{base64.b64encode(figures[entry["file"]]).decode()}"></a><figcaption>{escape(entry["case"])}: '
                    f'{escape(entry["caption"])}</figcaption></figure>'
                    for entry in review["figures"] if entry["file"] in figures)
    notes = "".join(f"<li>{escape(n)}</li>" for n in review["notes"])
    heading = review.get("heading", "What the algorithm did (worst-scoring cases first; green: ground truth, red: "
                                    "predictions)")
    return (f"<h2>{escape(heading)}</h2>{findings}{checked}"
            + ("<p>Click a figure to open it at the image's full resolution.</p>" if shown else "")
            + f"<div>{shown}</div>" + (f"<ul>{notes}</ul>" if notes else ""))


def review_page(title: str, aggregates: Mapping[str, float], notes: Sequence[str], review: Mapping[str, Any],
                figures: Mapping[str, bytes]) -> str:
    """A page of its own (the evaluator's review.html): the title, the aggregates, the evaluator's notes and the
    review."""
    rows = "".join(f'<tr><td>{escape(key)}</td><td class="number">{value:.4f}</td></tr>'
                   for key, value in aggregates.items())
    listed = "".join(f"<li>{escape(note)}</li>" for note in notes)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{escape(title)}</title>
<style>{BASE_STYLE}{STYLE}</style>
</head>
<body>
<h1>{escape(title)}</h1>
<table id="scores"><tr><th>aggregate</th><th>value</th></tr>{rows}</table>
{f'<ul>{listed}</ul>' if listed else ''}
{review_section(review, figures)}
</body>
</html>
"""
