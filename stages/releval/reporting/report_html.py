"""report.html: the report document (:mod:`releval.reporting.document`) as one self-contained page.

The page opens offline: no script, no stylesheet, font or image from elsewhere; its style is inline
and its plots are the stage's PNGs, embedded as ``data:`` URIs. Every text is escaped; text from
corpora and queries (:class:`~releval.reporting.document.Plain`) is never read as markup, and inline
text reads only ``code`` and ``**bold**``. Folds (:class:`~releval.reporting.document.Details`) are
HTML's own ``<details>``, so the page needs no script to open them.

Pure: a document in, text out.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Iterable

from releval.reporting.document import (
    HTML,
    Badge,
    Block,
    Bullets,
    Details,
    Figure,
    Inline,
    Paragraph,
    Plain,
    Preformatted,
    Ranked,
    Rankings,
    ReportDocument,
    Section,
    Table,
    plain_text,
    shown,
)
from releval.reporting.plots import VERDICT_COLOURS

_STYLE = """
:root { --ink: #1f2328; --muted: #59636e; --rule: #d1d9e0; --soft: #f6f8fa; --accent: #0b5cad; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--ink); background: #fff; line-height: 1.45;
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
header { position: sticky; top: 0; z-index: 2; background: #fff; border-bottom: 1px solid var(--rule);
         padding: 10px 24px 8px; }
header h1 { font-size: 20px; margin: 0 0 4px; }
nav a { color: var(--accent); text-decoration: none; margin-right: 14px; font-size: 13px; }
nav a:hover { text-decoration: underline; }
main { max-width: 1280px; padding: 8px 24px 48px; }
section { margin-top: 18px; scroll-margin-top: 70px; }
h2 { font-size: 17px; border-bottom: 1px solid var(--rule); padding-bottom: 4px; margin: 22px 0 10px; }
p, ul { margin: 8px 0; max-width: 110ch; }
li { margin: 3px 0; }
code { font: 12.5px ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace;
       background: var(--soft); padding: 0 3px; border-radius: 3px; }
pre { font: 12px/1.35 ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace;
      background: var(--soft); border: 1px solid var(--rule); padding: 10px; overflow-x: auto; }
.lead { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 620px); gap: 24px; align-items: start; }
.lead .aside figure { margin: 0; }
@media (max-width: 1100px) { .lead { grid-template-columns: 1fr; } }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; margin: 8px 0; font-size: 13px; }
th, td { border-bottom: 1px solid var(--rule); padding: 3px 8px; vertical-align: top; }
th { text-align: left; background: var(--soft); position: sticky; top: 0; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tbody tr:hover { background: #f0f6ff; }
.badge { display: inline-block; padding: 0 7px; border-radius: 9px; font-size: 12px; color: #fff;
         background: var(--muted); white-space: nowrap; }
.badge.best { background: #fff; color: var(--ink); border: 1px solid var(--muted); }
figure { margin: 12px 0 20px; }
figure img { max-width: 100%; height: auto; border: 1px solid var(--rule); }
figcaption { color: var(--muted); font-size: 13px; max-width: 100ch; margin-top: 4px; }
figcaption strong { color: var(--ink); }
details { margin: 8px 0; }
details > summary { cursor: pointer; color: var(--accent); }
details[open] > summary { margin-bottom: 6px; }
details details { margin-left: 14px; }
.contrast { margin: 14px 0 22px; }
.contrast h3 { font-size: 14px; margin: 0 0 2px; }
.contrast .query { margin: 0 0 6px; font-style: italic; }
table.rankings { table-layout: fixed; width: 100%; }
table.rankings col.rank { width: 34px; }
table.rankings td { padding: 5px 8px; }
table.rankings td .t { font-weight: 600; }
table.rankings td small { color: var(--muted); margin-left: 4px; }
table.rankings td i { color: var(--muted); font-size: 11.5px; float: right; margin-left: 6px; font-style: normal; }
table.rankings td p { color: #3d444d; font-size: 12.5px; margin: 2px 0 0; }
table.rankings td b { display: inline-block; min-width: 20px; text-align: center; border-radius: 4px;
                     font-size: 12px; margin-right: 4px; color: #fff; }
table.rankings td b.g0 { background: #8c959f; }
table.rankings td b.g1 { background: #7fb3d5; }
table.rankings td b.g2 { background: #2e86c1; }
table.rankings td b.g3 { background: #1a5276; }
table.rankings td b.unjudged { background: #fff; color: #b35900; outline: 1px dashed #b35900; }
"""


def _badge_css() -> str:
    return "\n".join(f".badge.{_kind(kind)} {{ background: {colour}; }}" for kind, colour in VERDICT_COLOURS.items())


def _kind(word: str) -> str:
    """A CSS class or id from a word: letters, digits, underscores and dashes."""
    return re.sub(r"[^a-z0-9_]+", "-", word.lower()).strip("-") or "none"


def render_html(document: ReportDocument) -> str:
    """The document as one offline page: a heading with a link to each section, then the sections."""
    sections = list(shown(document.sections, HTML))
    links = "".join(
        f'<a href="#{_anchor(section)}">{html.escape(section.nav or plain_text(section.heading))}</a>'
        for section in sections
        if section.heading is not None or section.nav
    )
    body = "\n".join(_section(section) for section in sections)
    title = html.escape(document.title)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{title}</title>\n<style>{_STYLE}{_badge_css()}\n</style>\n</head>\n<body>\n"
        f"<header><h1>{title}</h1><nav>{links}</nav></header>\n<main>\n{body}\n</main>\n</body>\n</html>\n"
    )


def _anchor(section: Section) -> str:
    return _kind(section.anchor or plain_text(section.heading or "section"))


def _section(section: Section) -> str:
    heading = "" if section.heading is None else f"<h2>{inline(section.heading)}</h2>\n"
    blocks = list(shown(section.blocks, HTML))
    aside = [b for b in blocks if isinstance(b, Figure) and b.aside]
    main = [b for b in blocks if not (isinstance(b, Figure) and b.aside)]
    if aside:
        content = (
            f'<div class="lead"><div class="main">{_blocks(main)}</div><div class="aside">{_blocks(aside)}</div></div>'
        )
    else:
        content = _blocks(main)
    return f'<section id="{_anchor(section)}">\n{heading}{content}\n</section>'


def _blocks(blocks: Iterable[Block]) -> str:
    return "\n".join(_block(block) for block in shown(blocks, HTML))


def inline(value: Inline) -> str:
    """Inline text as HTML: escaped; in a ``str``, ``code`` and ``**bold**`` become elements."""
    if isinstance(value, Plain):
        return html.escape(value.text)
    if isinstance(value, Badge):
        return f'<span class="badge {_kind(value.kind)}">{html.escape(value.text)}</span>'
    escaped = html.escape(value)
    escaped = re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)
    return re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", escaped)


def _block(block: Block) -> str:
    if isinstance(block, Paragraph):
        return f"<p>{inline(block.text)}</p>"
    if isinstance(block, Bullets):
        return "<ul>" + "".join(f"<li>{inline(item)}</li>" for item in block.items) + "</ul>"
    if isinstance(block, Table):
        return _table(block)
    if isinstance(block, Preformatted):
        return f"<pre>{html.escape(block.text)}</pre>"
    if isinstance(block, Figure):
        data = base64.b64encode(block.png).decode("ascii")
        return (
            f'<figure id="figure-{_kind(block.name)}">'
            f'<img alt="{html.escape(block.title)}" src="data:image/png;base64,{data}">'
            f"<figcaption><strong>{html.escape(block.title)}.</strong> {inline(block.caption)} "
            f'<a href="{html.escape(block.path)}">PNG</a></figcaption></figure>'
        )
    if isinstance(block, Details):
        opened = " open" if block.open else ""
        return f"<details{opened}><summary>{inline(block.summary)}</summary>\n{_blocks(block.blocks)}\n</details>"
    if isinstance(block, Rankings):
        return _rankings(block)
    raise TypeError(f"not a block: {block!r}")


def _table(block: Table) -> str:
    def cells(values, tag: str) -> str:
        return "".join(
            f'<{tag}{" class=num" if align == "right" else ""}>{inline(value)}</{tag}>'
            for value, align in zip(values, block.align)
        )

    rows = "".join(f"<tr>{cells(row, 'td')}</tr>" for row in block.rows)
    head = f"<thead><tr>{cells(block.header, 'th')}</tr></thead>"
    return f'<div class="scroll"><table>{head}<tbody>{rows}</tbody></table></div>'


def _rankings(block: Rankings) -> str:
    rows = []
    for i in range(max(len(block.left), len(block.right))):
        left = _ranked(block.left[i]) if i < len(block.left) else ""
        right = _ranked(block.right[i]) if i < len(block.right) else ""
        rows.append(f"<tr><td class=num>{i + 1}</td><td>{left}</td><td>{right}</td></tr>")
    return (
        f'<div class="contrast"><h3>{inline(block.heading)}</h3><p class="query">{inline(block.text)}</p>'
        '<table class="rankings"><colgroup><col class="rank"><col><col></colgroup>'
        f"<thead><tr><th>#</th><th>{inline(block.labels[0])}</th><th>{inline(block.labels[1])}</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def _ranked(entry: Ranked) -> str:
    """One document of a ranked list, in few bytes (the page holds hundreds): its note (where the
    other list ranks it), grade (? : unjudged), title, id and passage."""
    grade = (
        '<b class="unjudged">?</b>'
        if entry.grade is None
        else f'<b class="g{min(max(entry.grade, 0), 3)}">{entry.grade}</b>'
    )
    doc_id = "" if entry.label.text == entry.doc_id else f"<small>{html.escape(entry.doc_id)}</small>"
    note = f"<i>{html.escape(entry.note)}</i>" if entry.note else ""
    return f'{note}{grade}<span class="t">{inline(entry.label)}</span>{doc_id}<p>{inline(entry.text)}</p>'
