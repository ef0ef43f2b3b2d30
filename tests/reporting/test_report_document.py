"""The report document and its two renderers: Markdown (report.md) and one offline HTML page
(report.html). A section is written once and both show it; the page escapes every text and loads
nothing from anywhere."""

from __future__ import annotations

import re

from releval.reporting.document import (
    HTML,
    MARKDOWN,
    Badge,
    Bullets,
    Details,
    Figure,
    Paragraph,
    Plain,
    Preformatted,
    Ranked,
    Rankings,
    ReportDocument,
    Section,
    Table,
    markdown,
)
from releval.reporting.report_html import inline, render_html

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


def document() -> ReportDocument:
    return ReportDocument(
        "releval report: <toy>",
        (
            Section(None, (Paragraph("**Conclusion** (ndcg@10): best `a/c1`."), Bullets(("one", "two `x`")))),
            Section(
                "Grid",
                (
                    Table(
                        ("configuration", "ndcg@10"), (("`a/c1`", "0.5000"), ("`b/c1`", "0.4000")), ("left", "right")
                    ),
                    Paragraph("a note"),
                ),
            ),
            Section(
                "Against the baseline `b/c1`",
                (
                    Table(
                        ("configuration", "verdict"),
                        (("`a/c1`", Badge("improvement", "improvement")),),
                        ("left", "left"),
                        media=HTML,
                    ),
                    Details("the grid as text", (Preformatted("grid: <text> & more"),)),
                    Details("each pair", (Details("`a/c1`", (Preformatted("1. candidate a/c1"),)),)),
                    Figure(
                        "difference_ci", "a difference", "right is better", PNG, "plots/difference_ci.png", aside=True
                    ),
                ),
            ),
            Section("Only in Markdown", (Paragraph("md"),), media=MARKDOWN),
            Section(
                "Per query",
                (
                    Rankings(
                        "`q1` 1.0 → 0.5",
                        Plain("a <b>query</b> with **stars** and `ticks`"),
                        ("`a/c1`", "`b/c1`"),
                        (
                            Ranked(
                                1, Plain("Title <i>"), "d1", 3, Plain("text & <script>alert(1)</script>"), "#2 there"
                            ),
                        ),
                        (
                            Ranked(1, Plain("d0"), "d0", None, Plain("unjudged"), "only here"),
                            Ranked(2, Plain("Title <i>"), "d1", 3, Plain("text"), "#1 there"),
                        ),
                    ),
                ),
                media=HTML,
            ),
            Section(
                "Worst queries", (Table(("query", "text"), ((Plain("q1"), Plain("a | b <c>")),), ("left", "left")),)
            ),
        ),
    )


def test_markdown_writes_each_block_as_report_md_always_has():
    text = markdown(document())
    assert text == (
        "# releval report: <toy>\n\n"
        "**Conclusion** (ndcg@10): best `a/c1`.\n\n- one\n- two `x`\n\n"
        "## Grid\n\n| configuration | ndcg@10 |\n|---|---:|\n| `a/c1` | 0.5000 |\n| `b/c1` | 0.4000 |\n\na note\n\n"
        "## Against the baseline `b/c1`\n\n```\ngrid: <text> & more\n```\n\n```\n1. candidate a/c1\n```\n\n"
        "## Only in Markdown\n\nmd\n\n"
        "## Worst queries\n\n| query | text |\n|---|---|\n| q1 | a | b <c> |\n"
    )  # the page's own blocks (verdict table, figure, per-query view) are not in it; folds are unfolded


def test_the_page_shows_every_section_but_the_markdown_only_one():
    page = render_html(document())
    headings = re.findall(r"<h2>(.*?)</h2>", page)
    assert headings == ["Grid", "Against the baseline <code>b/c1</code>", "Per query", "Worst queries"]
    nav = re.search(r"<nav>(.*?)</nav>", page).group(1)
    assert re.findall(r'href="#([^"]+)"', nav) == ["grid", "against-the-baseline-b-c1", "per-query", "worst-queries"]
    assert '<span class="badge improvement">improvement</span>' in page
    assert "<details><summary>the grid as text</summary>" in page and "<pre>grid: &lt;text&gt; &amp; more</pre>" in page
    assert page.count("<details>") == 3  # nested folds stay folds
    assert '<div class="lead">' in page and 'id="figure-difference_ci"' in page
    assert "data:image/png;base64,iVBORw0KGgo" in page and 'href="plots/difference_ci.png"' in page


def test_the_page_escapes_every_text_and_reads_markup_only_in_the_reports_own_strings():
    page = render_html(document())
    body = page.split("<body>", 1)[1]
    assert "<script" not in page and "Title <i>" not in body and "<b>query" not in body
    assert "text &amp; &lt;script&gt;alert(1)&lt;/script&gt;" in body
    assert "a &lt;b&gt;query&lt;/b&gt; with **stars** and `ticks`" in body  # Plain: never read as markup
    assert "<title>releval report: &lt;toy&gt;</title>" in page and "a | b &lt;c&gt;" in body
    assert inline("**Conclusion** on `a<b>`") == "<strong>Conclusion</strong> on <code>a&lt;b&gt;</code>"
    assert inline(Badge("coverage-confounded", "coverage-confounded")).startswith(
        '<span class="badge coverage-confounded">'
    )


def test_the_page_loads_nothing_from_anywhere():
    page = render_html(document())
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page)
    assert not re.search(r"@import|url\(", page)
    assert re.findall(r'src="([^"]+)"', page) == [re.search(r'src="(data:image/png;base64,[^"]+)"', page).group(1)]


def test_the_rankings_mark_unjudged_documents_and_where_the_other_list_has_each():
    page = render_html(document())
    table = page[page.index('<table class="rankings">') :]
    first_row = re.search(r"<tr><td class=num>1</td>(.*?)</tr>", table).group(1)
    assert '<b class="g3">3</b>' in first_row and '<b class="unjudged">?</b>' in first_row
    assert "<i>#2 there</i>" in first_row and "<i>only here</i>" in first_row
    assert "<small>d1</small>" in first_row  # the id beside a title; not repeated where it is the label
    assert "<small>d0</small>" not in first_row
    second_row = re.search(r"<tr><td class=num>2</td><td></td><td>(.*?)</td></tr>", table)
    assert second_row is not None  # the shorter list leaves its cell empty
