"""`releval explain`'s text: two configurations' top-k lists side by side, query by query, from an
:class:`~releval.measurement.explain.Explanation` computed before (and its JSON form).

Pure: data in, text out.
"""

from __future__ import annotations

import textwrap
from dataclasses import asdict
from typing import Any

from releval.measurement.explain import Explanation, QueryContrast, ShownDocument
from releval.reporting.text import signed

WIDTH = 120  # characters a line takes at most
PASSAGE_LINES = 2  # lines of each document's passage


def render_explanation(explanation: Explanation, width: int = WIDTH, passage_lines: int = PASSAGE_LINES) -> str:
    """The head (what is compared, the per-query record) and one block per query shown."""
    e = explanation
    picked = (
        f"query {e.asked}"
        if e.asked is not None
        else "the query where they differ most"
        if len(e.contrasts) == 1
        else f"the {len(e.contrasts)} queries where they differ most (largest |Δ| first)"
        if e.contrasts
        else "no query where they differ"
    )
    lines = [
        f"explain: B {e.b} against A {e.a} on {e.metric}, {e.queries} scored queries",
        f"  mean {e.mean_a:.4f} → {e.mean_b:.4f}; B higher on {e.wins}, lower on {e.losses}, equal on {e.ties}",
        f"  {picked}; top {e.depth} of each",
        f"  [g] a judged document's grade, [?] unjudged (counts as 0); =N its rank in the other list, "
        f"only: not in its top {e.depth}",
    ]
    for contrast in e.contrasts:
        lines += ["", *_contrast(contrast, e, width, passage_lines)]
    return "\n".join(lines)


def _contrast(contrast: QueryContrast, e: Explanation, width: int, passage_lines: int) -> list[str]:
    column = (width - 7) // 2  # rank (3), two gaps (2 each), two columns
    lines = [
        f"{contrast.query_id}  {e.metric} {contrast.a:.4f} → {contrast.b:.4f}  Δ {signed(contrast.difference)}  "
        f"({contrast.relevant} relevant judged)",
        *textwrap.wrap(" ".join(contrast.text.split()), width - 2, initial_indent="  ", subsequent_indent="  "),
        "",
        f"{'':>3}  {_fit('A ' + e.a, column):<{column}}  {_fit('B ' + e.b, column)}",
    ]
    for i in range(max(len(contrast.top_a), len(contrast.top_b))):
        left = _document(contrast.top_a[i], column, passage_lines) if i < len(contrast.top_a) else []
        right = _document(contrast.top_b[i], column, passage_lines) if i < len(contrast.top_b) else []
        for j in range(max(len(left), len(right))):
            a = left[j] if j < len(left) else ""
            b = right[j] if j < len(right) else ""
            lines.append(f"{str(i + 1) if j == 0 else '':>3}  {a:<{column}}  {b}".rstrip())
    return lines


def _document(document: ShownDocument, column: int, passage_lines: int) -> list[str]:
    grade = "?" if document.grade is None else str(document.grade)
    there = "only" if document.other_rank is None else f"={document.other_rank}"
    label = document.title or document.doc_id
    head = f"[{grade}] {_fit(label, column - 5 - len(there))} "
    head = f"{head:<{column - len(there)}}{there}"
    passage = textwrap.wrap(document.passage, column - 4) or [""]
    shown = passage[:passage_lines]
    if len(passage) > passage_lines:
        shown[-1] = _fit(shown[-1] + " …", column - 4)
    return [head, *(f"    {line}" for line in shown)]


def _fit(text: str, width: int) -> str:
    """``text`` on one line of at most ``width`` characters (… marks a cut)."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def explanation_to_dict(explanation: Explanation) -> dict[str, Any]:
    """The explanation as JSON-safe data (every field; each query's difference added)."""
    out = asdict(explanation)
    for contrast, record in zip(explanation.contrasts, out["contrasts"]):
        record["difference"] = contrast.difference
    return out
