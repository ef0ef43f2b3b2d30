"""The judging page (:mod:`releval.judging.web`) as one string: HTML, CSS and JavaScript inline, no
external asset, so it works offline and the package needs no package data.

It shows what the JSON API gives: the query, the document, the annotator's own grade, notes and
evidence spans, progress, the rubric and the scale. Keys: a grade's digit grades the pair and moves
to the next ungraded one; Left/Right go back/skip; "/" focuses the search box; Escape leaves a text
field; "e" adds the text selected in the document's text as an evidence span (a mouse selection,
or one made with Shift and the arrows under the browser's caret browsing, F7), "x" removes the last
span (each listed span also has a remove button).

Evidence spans are shown as ``<mark>`` elements around text nodes: the document pane holds nothing
but the document's text, set as text (never HTML), so its ``textContent`` is the text exactly and an
offset computed from the DOM selection (a Range from the pane's start to the selection's boundary:
its ``toString()`` length) is an offset into the raw text, never into rendered or escaped HTML. The
server counts characters as Python does (code points); the page converts to and from JavaScript's
UTF-16 indices, so a character outside the Basic Multilingual Plane counts one. A selection is cut
to the document's text (a drag from the title starts at the text's first character) and trimmed of
blanks at both ends. Spans marked before the pair is graded are sent with its grade (as notes are);
on a graded pair each change is saved at once; a grade below the span grade sends none (the
server drops them).

The rubric is Markdown, shown rendered by :func:`render_markdown`: every character of the file is
HTML-escaped first, then a small subset of Markdown becomes a fixed set of tags without attributes,
so no HTML of the file (a ``<script>``, an ``<img onerror>``) ever reaches the page as HTML.
"""

from __future__ import annotations

import html
import re

# The only tags render_markdown writes, never with an attribute.
RUBRIC_TAGS = frozenset(
    {"h1", "h2", "h3", "h4", "h5", "h6", "p", "ul", "ol", "li", "strong", "em", "code", "pre", "hr", "blockquote"}
    | {"table", "thead", "tbody", "tr", "th", "td"}
)

_FENCE = re.compile(r"\s{0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"\s{0,3}(#{1,6})(?:\s+(.*?))?(?:\s+#+)?\s*")
_RULE = re.compile(r"\s{0,3}(?:(?:\*\s*){3,}|(?:-\s*){3,}|(?:_\s*){3,})")
_ITEM = re.compile(r"(\s*)([-*+]|[0-9]{1,9}[.)])\s+(.*)")
_QUOTE = re.compile(r"\s{0,3}>\s?(.*)")
_TABLE_RULE = re.compile(r"\s*\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)*\|?\s*")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
_STRONG = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|(?<![A-Za-z0-9])__(?=\S)(.+?)(?<=\S)__(?![A-Za-z0-9])", re.S)
_EM = re.compile(r"\*(?=\S)(.+?)(?<=\S)\*|(?<![A-Za-z0-9])_(?=\S)(.+?)(?<=\S)_(?![A-Za-z0-9])", re.S)


def render_markdown(text: str) -> str:
    """A rubric's Markdown as HTML, safely: headings, paragraphs, lists (an item's indented lines
    continue it; nested items are shown flat), block quotes (one paragraph), fenced code, rules,
    simple pipe tables, and inline bold, italic and code. Links, images and raw HTML stay text.
    Only :data:`RUBRIC_TAGS` are written, with no attribute, around text :func:`html.escape` escaped."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
        elif fence := _FENCE.match(line):
            close = fence.group(1)[0] * len(fence.group(1))
            body, i = [], i + 1
            while i < len(lines) and not lines[i].strip().startswith(close):
                body.append(lines[i])
                i += 1
            out.append(f"<pre><code>{html.escape(chr(10).join(body))}</code></pre>")
            i += 1
        elif heading := _HEADING.fullmatch(line):
            level = len(heading.group(1))
            out.append(f"<h{level}>{_inline(heading.group(2) or '')}</h{level}>")
            i += 1
        elif _RULE.fullmatch(line):
            out.append("<hr>")
            i += 1
        elif "|" in line and i + 1 < len(lines) and "-" in lines[i + 1] and _TABLE_RULE.fullmatch(lines[i + 1]):
            rows, i = [_cells(line)], i + 2
            while i < len(lines) and lines[i].strip() and "|" in lines[i]:
                rows.append(_cells(lines[i]))
                i += 1
            out.append(_table(rows))
        elif _ITEM.fullmatch(line):
            i = _list(lines, i, out)
        elif _QUOTE.match(line):
            quoted = []
            while i < len(lines) and (found := _QUOTE.match(lines[i])):
                quoted.append(found.group(1))
                i += 1
            out.append(f"<blockquote><p>{_inline(' '.join(q.strip() for q in quoted))}</p></blockquote>")
        else:
            paragraph, i = [line.strip()], i + 1
            while i < len(lines) and lines[i].strip() and not _starts_block(lines, i):
                paragraph.append(lines[i].strip())
                i += 1
            out.append(f"<p>{_inline(' '.join(paragraph))}</p>")
    return "\n".join(out)


def _starts_block(lines: list[str], i: int) -> bool:
    line = lines[i]
    return bool(
        _FENCE.match(line)
        or _HEADING.fullmatch(line)
        or _RULE.fullmatch(line)
        or _ITEM.fullmatch(line)
        or _QUOTE.match(line)
        or ("|" in line and i + 1 < len(lines) and _TABLE_RULE.fullmatch(lines[i + 1]) and "-" in lines[i + 1])
    )


def _list(lines: list[str], i: int, out: list[str]) -> int:
    """One list (ordered or not, as its first item): items and their continuation lines, flat."""
    first = _ITEM.fullmatch(lines[i])
    assert first is not None
    tag = "ol" if first.group(2)[0].isdigit() else "ul"
    items: list[list[str]] = []
    while i < len(lines):
        line = lines[i]
        item = _ITEM.fullmatch(line)
        if item:
            items.append([item.group(3).strip()])
        elif line.strip() and line[:1] in (" ", "\t") and items:
            items[-1].append(line.strip())  # an indented line continues the item
        elif not line.strip() and i + 1 < len(lines) and _ITEM.fullmatch(lines[i + 1]):
            pass  # a blank line between items
        else:
            break
        i += 1
    body = "".join(f"<li>{_inline(' '.join(parts))}</li>" for parts in items)
    out.append(f"<{tag}>{body}</{tag}>")
    return i


def _cells(line: str) -> list[str]:
    line = line.strip()
    line = line[1:] if line.startswith("|") else line
    line = line[:-1] if line.endswith("|") and not line.endswith("\\|") else line
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line)]


def _table(rows: list[list[str]]) -> str:
    width = len(rows[0])
    head = "".join(f"<th>{_inline(cell)}</th>" for cell in rows[0])
    body = "".join(
        "<tr>" + "".join(f"<td>{_inline(cell)}</td>" for cell in (row + [""] * width)[:width]) + "</tr>"
        for row in rows[1:]
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _inline(text: str) -> str:
    """Escaped text with code spans, bold and italic; what a code span holds is left as it is."""
    out, last = [], 0
    for span in _CODE_SPAN.finditer(text):
        out.append(_emphasis(html.escape(text[last : span.start()])))
        out.append(f"<code>{html.escape(span.group(2).strip())}</code>")
        last = span.end()
    out.append(_emphasis(html.escape(text[last:])))
    return "".join(out)


def _emphasis(escaped: str) -> str:
    escaped = _STRONG.sub(lambda m: f"<strong>{m.group(1) or m.group(2)}</strong>", escaped)
    return _EM.sub(lambda m: f"<em>{m.group(1) or m.group(2)}</em>", escaped)


PAGE_HTML = r"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>releval judge</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
  body { margin: 0; font: 15px/1.45 system-ui, sans-serif; color: #1d1d1f; background: #f4f4f6; }
  header { display: flex; gap: 1.5em; align-items: baseline; padding: .6em 1em; background: #24292f; color: #fff; }
  header b { font-size: 1.05em; }
  main { display: grid; grid-template-columns: minmax(0, 3fr) minmax(0, 2fr); gap: 1em; padding: 1em; }
  section { background: #fff; border: 1px solid #d0d7de; border-radius: 6px; padding: .8em 1em; }
  #query { font-size: 1.2em; font-weight: 600; }
  #doc-title { font-weight: 600; margin: .4em 0; }
  #doc-text { white-space: pre-wrap; max-height: 55vh; overflow: auto; border-top: 1px solid #eee; padding-top: .5em;
              font-family: ui-monospace, monospace; font-size: 13px; }
  #rubric { max-height: 45vh; overflow: auto; font-size: 13px; }
  #rubric h1, #rubric h2, #rubric h3, #rubric h4 { font-size: 1.1em; margin: .8em 0 .3em; }
  #rubric p, #rubric ul, #rubric ol { margin: .4em 0; }
  #rubric table { border-collapse: collapse; margin: .4em 0; }
  #rubric th, #rubric td { border: 1px solid #d0d7de; padding: .2em .4em; vertical-align: top; text-align: left; }
  #rubric code { font-family: ui-monospace, monospace; background: #f6f8fa; }
  #rubric pre { white-space: pre-wrap; background: #f6f8fa; padding: .4em; }
  .grades button { min-width: 3.2em; margin: .2em .2em .2em 0; padding: .4em .6em; border: 1px solid #8c959f;
                   border-radius: 4px; background: #f6f8fa; cursor: pointer; }
  .grades button.chosen { background: #0969da; color: #fff; border-color: #0969da; }
  textarea { width: 100%; box-sizing: border-box; min-height: 3.5em; }
  #status { min-height: 1.4em; color: #57606a; }
  #status.error { color: #cf222e; white-space: pre-wrap; }
  #results li { margin: .35em 0; }
  #results .snippet { color: #57606a; font-size: 13px; }
  .muted { color: #57606a; }
  #done { display: none; color: #1a7f37; font-weight: 600; }
  #doc-text mark { background: #fff1a8; color: inherit; box-shadow: 0 0 0 1px #d4a72c; }
  #spans { margin: .3em 0; padding-left: 1.6em; font-size: 13px; }
  #spans li { margin: .2em 0; }
  #spans button { margin-left: .4em; }
</style>
</head>
<body>
<header>
  <b>releval judge</b>
  <span id="who"></span>
  <span id="progress-query"></span>
  <span id="progress-all"></span>
</header>
<main>
  <div>
    <section>
      <div class="muted">query <span id="query-id"></span></div>
      <div id="query"></div>
    </section>
    <section style="margin-top: 1em">
      <div class="muted">document <span id="doc-id"></span></div>
      <div id="doc-title"></div>
      <div id="doc-text"></div>
    </section>
  </div>
  <div>
    <section>
      <div class="grades" id="grades"></div>
      <label class="muted" for="notes">notes (saved with the grade)</label>
      <textarea id="notes"></textarea>
      <div>
        <button id="back" title="Left arrow">&larr; back</button>
        <button id="skip" title="Right arrow">skip &rarr;</button>
        <button id="finish">finish: write the version</button>
      </div>
      <div id="evidence">
        <span class="muted">evidence: select the passage in the document's text, then</span>
        <button id="add-span" title="e">add the selection (e)</button>
        <span class="muted" id="span-rule"></span>
        <ol id="spans"></ol>
      </div>
      <div id="done">every pair is graded: finish writes the judgment version</div>
      <div id="status"></div>
    </section>
    <section style="margin-top: 1em">
      <form id="search-form"><input id="search" type="search" placeholder="search the corpus (/)" size="32">
        <button type="submit">search</button></form>
      <div class="muted">add a relevant document the pool missed, for the query on screen</div>
      <ol id="results"></ol>
    </section>
    <section style="margin-top: 1em">
      <div class="muted">rubric</div>
      <div id="rubric"></div>
    </section>
  </div>
</main>
<script>
"use strict";
let view = null;
let scale = [];
let spanRule = { max: 3, min_grade: 1 };
let spans = [];  // the evidence of the pair on screen: [start, end] character offsets, as the server counts them
const $ = (id) => document.getElementById(id);

// The server counts characters as Python does (code points); a JavaScript string counts UTF-16 units.
const high = (code) => code >= 0xD800 && code <= 0xDBFF;
const low = (code) => code >= 0xDC00 && code <= 0xDFFF;

function toUnits(text, points) {
  let i = 0;
  for (let n = 0; n < points && i < text.length; n++) {
    i += high(text.charCodeAt(i)) && low(text.charCodeAt(i + 1)) ? 2 : 1;
  }
  return i;
}

function toPoints(text, units) {
  return Array.from(text.slice(0, units)).length;
}

// The document pane: the text as text nodes, each span's characters in a <mark>; nothing else.
function paint() {
  const pane = $("doc-text");
  const text = view && view.pair ? view.pair.text : "";
  pane.textContent = "";
  const placed = spans.map(([s, e], i) => [toUnits(text, s), toUnits(text, e), i]).sort((a, b) => a[0] - b[0]);
  let at = 0;
  for (const [start, end, i] of placed) {
    if (start > at) { pane.append(document.createTextNode(text.slice(at, start))); }
    const mark = document.createElement("mark");
    mark.dataset.span = String(i + 1);
    mark.textContent = text.slice(Math.max(start, at), end);
    pane.append(mark);
    at = Math.max(at, end);
  }
  if (at < text.length) { pane.append(document.createTextNode(text.slice(at))); }
  const list = $("spans");
  list.textContent = "";
  spans.forEach(([s, e], i) => {
    const item = document.createElement("li");
    const shown = text.slice(toUnits(text, s), toUnits(text, e)).replace(/\s+/g, " ");
    item.append(document.createTextNode(`\u201c${shown.length > 90 ? shown.slice(0, 90) + "\u2026" : shown}\u201d`));
    const remove = document.createElement("button");
    remove.className = "remove-span";
    remove.textContent = "remove";
    remove.onclick = () => setSpans(spans.filter((_, j) => j !== i));
    item.append(remove);
    list.append(item);
  });
  document.body.dataset.spans = spans.map(([s, e]) => `${s}-${e}`).join(",");
}

// The selection inside the document's text as [start, end] code-point offsets, or null.
function selectedSpan() {
  const selection = window.getSelection();
  if (!view || !view.pair || !selection || selection.rangeCount === 0 || selection.isCollapsed) { return null; }
  const pane = $("doc-text");
  const text = view.pair.text;
  const range = selection.getRangeAt(0);
  const whole = document.createRange();
  whole.selectNodeContents(pane);
  const offset = (node, at) => {
    const where = whole.comparePoint(node, at);
    if (where !== 0) { return where < 0 ? 0 : text.length; }
    const before = document.createRange();
    before.setStart(pane, 0);
    before.setEnd(node, at);
    return before.toString().length;  // the characters of the text nodes before the point
  };
  let start = offset(range.startContainer, range.startOffset);
  let end = offset(range.endContainer, range.endOffset);
  while (start < end && /\s/.test(text[start])) { start++; }
  while (end > start && /\s/.test(text[end - 1])) { end--; }
  if (start > 0 && low(text.charCodeAt(start)) && high(text.charCodeAt(start - 1))) { start--; }
  if (end < text.length && low(text.charCodeAt(end)) && high(text.charCodeAt(end - 1))) { end++; }
  return start < end ? [toPoints(text, start), toPoints(text, end)] : null;
}

function addSpan() {
  if (!view || !view.pair) { return; }
  const found = selectedSpan();
  if (!found) {
    say("select the passage in the document's text first (mouse, or Shift+arrows with caret browsing: F7)", true);
    return;
  }
  if (view.pair.grade !== null && view.pair.grade < spanRule.min_grade) {
    say(`a pair graded ${view.pair.grade} has no evidence: grade it ${spanRule.min_grade} or more first`, true);
    return;
  }
  if (spans.length >= spanRule.max) {
    say(`at most ${spanRule.max} evidence spans per pair: remove one first (x removes the last)`, true);
    return;
  }
  const clash = spans.findIndex(([s, e]) => found[0] < e && s < found[1]);
  if (clash >= 0) {
    say(`the selection overlaps span ${clash + 1}: mark separate passages apart`, true);
    return;
  }
  window.getSelection().removeAllRanges();
  setSpans([...spans, found]);
}

function setSpans(next) {
  spans = next;
  paint();
  if (view.pair.grade !== null && view.pair.grade >= spanRule.min_grade) {
    grade(view.pair.grade, false);  // a graded pair's spans are saved at once, with its grade
  } else {
    say(spans.length ? `saved with the grade you give (${spanRule.min_grade} or more)` : "");
  }
}

function say(text, isError) {
  $("status").textContent = text || "";
  $("status").className = isError ? "error" : "";
}

async function call(path, body) {
  const options = body === undefined ? {} :
    { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) };
  const response = await fetch(path, options);
  const data = await response.json();
  if (!response.ok) { throw new Error(data.error || response.statusText); }
  return data;
}

function show(next) {
  const before = view && view.pair;
  const same = Boolean(before && next.pair && before.query_id === next.pair.query_id &&
                       before.doc_id === next.pair.doc_id);
  view = next;
  $("progress-all").textContent = `overall ${view.graded} / ${view.total} graded`;
  $("done").style.display = view.done ? "block" : "none";
  const pair = view.pair;
  if (!pair) {
    $("query").textContent = "nothing to judge";
    return;
  }
  const q = view.query_progress;
  $("progress-query").textContent = `query ${q.number} of ${q.queries}: ${q.graded} / ${q.total} graded`;
  $("query-id").textContent = pair.query_id;
  $("query").textContent = pair.query;
  $("doc-id").textContent = pair.doc_id;
  $("doc-title").textContent = pair.title;
  // Spans marked on an ungraded pair wait for its grade; otherwise the server's are the pair's.
  const keep = same && pair.grade === null;
  spans = keep ? spans : (pair.evidence || []).map((s) => [s.start, s.end]);
  const scrolled = $("doc-text").scrollTop;
  paint();
  $("doc-text").scrollTop = same ? scrolled : 0;
  $("notes").value = pair.notes || "";
  for (const button of document.querySelectorAll(".grades button")) {
    button.classList.toggle("chosen", Number(button.dataset.grade) === pair.grade);
  }
  document.body.dataset.pair = `${pair.query_id}\t${pair.doc_id}`;
}

async function act(path, body) {
  try {
    show(await call(path, body));
    say("");
    return true;
  } catch (error) {
    say(error.message, true);
    try { show(await call("/api/state")); } catch (ignored) { /* the error is on screen */ }
    return false;
  }
}

async function grade(value, advance) {
  if (!view || !view.pair) { return; }
  const given = value >= spanRule.min_grade ? spans : [];
  const dropped = spans.length - given.length;
  const done = await act("/api/grade", {
    query_id: view.pair.query_id, doc_id: view.pair.doc_id, grade: value, notes: $("notes").value,
    advance: advance !== false, evidence: given.map(([start, end]) => ({ start, end })),
  });
  if (done && dropped) { say(`grade ${value}: its ${dropped} evidence span(s) dropped`); }
  return done;
}

async function search(text) {
  try {
    const found = await call("/api/search?q=" + encodeURIComponent(text));
    const list = $("results");
    list.textContent = "";
    if (!found.results.length) { say("no document matches"); return; }
    say("");
    for (const hit of found.results) {
      const item = document.createElement("li");
      item.dataset.docId = hit.doc_id;
      const head = document.createElement("div");
      head.textContent = `${hit.title || hit.doc_id} (${hit.doc_id}) `;
      if (hit.status === "judged") {
        const note = Object.assign(document.createElement("span"), { className: "muted" });
        note.textContent = "already judged";
        head.append(note);
      } else {
        const add = document.createElement("button");
        add.className = "add";
        add.textContent = hit.status === "queued" ? "open" : "add";
        add.onclick = () => act("/api/add", { query_id: found.query_id, doc_id: hit.doc_id });
        head.append(add);
      }
      const text = Object.assign(document.createElement("div"), { className: "snippet", textContent: hit.snippet });
      item.append(head, text);
      list.append(item);
    }
  } catch (error) {
    say(error.message, true);
  }
}

async function finish() {
  try {
    const result = await call("/api/finish", {});
    say(result.message, false);
    document.body.dataset.finished = result.version;
  } catch (error) {
    say(error.message, true);
  }
}

function typing(target) {
  return target.tagName === "TEXTAREA" || target.tagName === "INPUT";
}

document.addEventListener("keydown", (event) => {
  if (event.ctrlKey || event.metaKey || event.altKey) { return; }
  if (typing(event.target)) {
    if (event.key === "Escape") { event.target.blur(); }
    return;
  }
  if (scale.some((s) => String(s.grade) === event.key)) {
    event.preventDefault();
    grade(Number(event.key));
  } else if (event.key === "ArrowLeft") {
    event.preventDefault();
    act("/api/move", { to: "back" });
  } else if (event.key === "ArrowRight") {
    event.preventDefault();
    act("/api/move", { to: "skip" });
  } else if (event.key === "/") {
    event.preventDefault();
    $("search").focus();
  } else if (event.key === "e") {
    event.preventDefault();
    addSpan();
  } else if (event.key === "x") {
    event.preventDefault();
    if (spans.length) { setSpans(spans.slice(0, -1)); }
  }
});

$("notes").addEventListener("change", () => {
  if (view && view.pair && view.pair.grade !== null) { grade(view.pair.grade, false); }
});
$("back").onclick = () => act("/api/move", { to: "back" });
$("skip").onclick = () => act("/api/move", { to: "skip" });
$("finish").onclick = finish;
$("add-span").onmousedown = (event) => event.preventDefault();  // the click keeps the selection
$("add-span").onclick = addSpan;
$("search-form").onsubmit = (event) => { event.preventDefault(); search($("search").value); };

(async () => {
  try {
    const setup = await call("/api/setup");
    scale = setup.scale;
    spanRule = setup.spans;
    $("span-rule").textContent = `(grades ${spanRule.min_grade} and up; at most ${spanRule.max}; x removes the last)`;
    $("who").textContent = `${setup.annotator} judging ${setup.set}`;
    // Rendered by the server from escaped text: render_markdown writes no tag of the file.
    $("rubric").innerHTML = setup.rubric_html;
    for (const s of scale) {
      const button = document.createElement("button");
      button.dataset.grade = s.grade;
      button.textContent = `${s.grade}: ${s.label}`;
      button.onclick = () => grade(s.grade);
      $("grades").append(button);
    }
    show(await call("/api/state"));
    document.body.dataset.ready = "1";
  } catch (error) {
    say(error.message, true);
  }
})();
</script>
</body>
</html>
"""
