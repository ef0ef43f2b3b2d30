"""The report as a structured document, rendered two ways: report.md (:func:`markdown`) and
report.html (:func:`releval.reporting.report_html.render_html`).

A :class:`ReportDocument` is a title and :class:`Section` s; a section is an optional heading and
blocks: :class:`Paragraph`, :class:`Bullets`, :class:`Table`, :class:`Preformatted`,
:class:`Figure`, :class:`Details` (blocks a page folds away) and :class:`Rankings` (two ranked
lists side by side). One builder (:func:`releval.reporting.report_md.report_document`) makes the
document from the figures computed before; both renderers only write it down, so a section added
there appears in both outputs.

Inline text is a ``str`` in the two bits of Markdown both renderers know, ``code`` in backticks
and ``**bold**``; :class:`Plain` holds text from corpora and queries, written as it is in Markdown
and escaped, never interpreted, in HTML; :class:`Badge` is a word the page colours (a verdict).

Every block and section has a ``media``: ``both`` (the default), ``html`` (the page only: figures,
the per-query view, the verdict table the Markdown already has as text) or ``markdown``.

Pure: data in, text out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Literal, Union

Media = Literal["both", "html", "markdown"]
BOTH: Media = "both"
HTML: Media = "html"
MARKDOWN: Media = "markdown"


@dataclass(frozen=True)
class Plain:
    """Text taken as it is (a query, a title, a passage): never read as markup."""

    text: str


@dataclass(frozen=True)
class Badge:
    """A word the page shows as a coloured label (``kind``: e.g. a verdict); Markdown writes the word."""

    text: str
    kind: str


Inline = Union[str, Plain, Badge]


@dataclass(frozen=True)
class Paragraph:
    text: Inline
    media: Media = BOTH


@dataclass(frozen=True)
class Bullets:
    items: tuple[Inline, ...]
    media: Media = BOTH


@dataclass(frozen=True)
class Table:
    """A table; ``align`` per column, ``left`` or ``right`` (numbers)."""

    header: tuple[Inline, ...]
    rows: tuple[tuple[Inline, ...], ...]
    align: tuple[str, ...]
    media: Media = BOTH


@dataclass(frozen=True)
class Preformatted:
    """Fixed-width text (a command's output): a fenced block in Markdown, ``<pre>`` on the page."""

    text: str
    media: Media = BOTH


@dataclass(frozen=True)
class Figure:
    """A plot: its PNG, embedded in the page; ``path`` is where the stage writes it (beside the report)."""

    name: str
    title: str
    caption: Inline
    png: bytes
    path: str
    aside: bool = False  # the page sets it beside the section's text, not below it
    media: Media = HTML


@dataclass(frozen=True)
class Details:
    """Blocks the page folds under ``summary`` (open when ``open``); Markdown writes the blocks as they are."""

    summary: Inline
    blocks: tuple[Block, ...]
    open: bool = False
    media: Media = BOTH


@dataclass(frozen=True)
class Ranked:
    """One entry of a ranked list: a document at its rank, its grade (None: unjudged), title and text."""

    rank: int
    label: Plain  # the document's title or id
    doc_id: str
    grade: int | None
    text: Plain  # the passage that ranked it (its best chunk), cut
    note: str = ""  # e.g. where the other list ranks it


@dataclass(frozen=True)
class Rankings:
    """Two ranked lists side by side (the top k of two configurations for one query): ``heading``
    (the query and its scores), ``text`` (the query's text), ``labels`` (the two lists')."""

    heading: Inline
    text: Plain
    labels: tuple[Inline, Inline]
    left: tuple[Ranked, ...]
    right: tuple[Ranked, ...]
    media: Media = HTML


Block = Union[Paragraph, Bullets, Table, Preformatted, Figure, Details, Rankings]


@dataclass(frozen=True)
class Section:
    """A heading (None: the opening, under the title) and its blocks; ``anchor`` names it on the page."""

    heading: Inline | None
    blocks: tuple[Block, ...]
    anchor: str = ""
    nav: str = ""  # the page's short link to it; empty: the heading's text
    media: Media = BOTH


@dataclass(frozen=True)
class ReportDocument:
    title: str
    sections: tuple[Section, ...] = field(default_factory=tuple)


def shown(items: Iterable, medium: Media) -> Iterator:
    """The sections or blocks of ``items`` written in ``medium``."""
    return (item for item in items if item.media in (BOTH, medium))


def text_of(value: Inline) -> str:
    """Inline text as Markdown writes it."""
    return value.text if isinstance(value, (Plain, Badge)) else value


def plain_text(value: Inline) -> str:
    """Inline text without its markup (``code`` and ``**bold**`` marks dropped): a link's words."""
    if isinstance(value, (Plain, Badge)):
        return value.text
    return re.sub(r"\*\*(.+?)\*\*", r"\1", re.sub(r"`([^`]+)`", r"\1", value))


# --------------------------------------------------------------------------- Markdown


def markdown(document: ReportDocument) -> str:
    """The document as Markdown: the title, then each section's heading and blocks, one blank line apart."""
    parts = [f"# {document.title}"]
    for section in shown(document.sections, MARKDOWN):
        if section.heading is not None:
            parts.append(f"## {text_of(section.heading)}")
        parts += [_markdown_block(block) for block in _flat(section.blocks)]
    return "\n\n".join(parts) + "\n"


def _flat(blocks: Iterable[Block]) -> Iterator[Block]:
    """The blocks Markdown writes: a fold's blocks in its place."""
    for block in shown(blocks, MARKDOWN):
        if isinstance(block, Details):
            yield from _flat(block.blocks)
        else:
            yield block


def _markdown_block(block: Block) -> str:
    if isinstance(block, Paragraph):
        return text_of(block.text)
    if isinstance(block, Bullets):
        return "\n".join(f"- {text_of(item)}" for item in block.items)
    if isinstance(block, Table):
        lines = [
            "| " + " | ".join(text_of(cell) for cell in block.header) + " |",
            "|" + "|".join("---:" if a == "right" else "---" for a in block.align) + "|",
        ]
        lines += ["| " + " | ".join(text_of(cell) for cell in row) + " |" for row in block.rows]
        return "\n".join(lines)
    if isinstance(block, Preformatted):
        return f"```\n{block.text}\n```"
    if isinstance(block, Rankings):
        lines = [
            f"**{text_of(block.heading)}** {block.text.text}",
            "",
            f"| rank | {text_of(block.labels[0])} | {text_of(block.labels[1])} |",
            "|---:|---|---|",
        ]
        for i in range(max(len(block.left), len(block.right))):
            cells = [_ranked_cell(side[i]) if i < len(side) else "" for side in (block.left, block.right)]
            lines.append(f"| {i + 1} | {cells[0]} | {cells[1]} |")
        return "\n".join(lines)
    if isinstance(block, Figure):
        return f"![{block.title}]({block.path})"
    raise TypeError(f"not a block: {block!r}")


def _ranked_cell(entry: Ranked) -> str:
    grade = "unjudged" if entry.grade is None else f"grade {entry.grade}"
    return f"{entry.label.text.replace('|', '/')} ({grade})"
