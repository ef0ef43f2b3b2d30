"""The judging page (:mod:`releval.judging.web`) as one string: HTML, CSS and JavaScript inline, no
external asset, so it works offline and the package needs no package data.

It shows what the JSON API gives: the query, the document, the annotator's own grade and notes,
progress, the rubric and the scale. Keys: a grade's digit grades the pair and moves to the next
ungraded one; Left/Right go back/skip; "/" focuses the search box; Escape leaves a text field.
"""

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
  #rubric { white-space: pre-wrap; max-height: 45vh; overflow: auto; font-size: 13px; }
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
const $ = (id) => document.getElementById(id);

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
  $("doc-text").textContent = pair.text;
  $("doc-text").scrollTop = 0;
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
  } catch (error) {
    say(error.message, true);
  }
}

function grade(value, advance) {
  if (!view || !view.pair) { return; }
  return act("/api/grade", { query_id: view.pair.query_id, doc_id: view.pair.doc_id, grade: value,
                             notes: $("notes").value, advance: advance !== false });
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
  }
});

$("notes").addEventListener("change", () => {
  if (view && view.pair && view.pair.grade !== null) { grade(view.pair.grade, false); }
});
$("back").onclick = () => act("/api/move", { to: "back" });
$("skip").onclick = () => act("/api/move", { to: "skip" });
$("finish").onclick = finish;
$("search-form").onsubmit = (event) => { event.preventDefault(); search($("search").value); };

(async () => {
  try {
    const setup = await call("/api/setup");
    scale = setup.scale;
    $("who").textContent = `${setup.annotator} judging ${setup.set}`;
    $("rubric").textContent = setup.rubric;
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
