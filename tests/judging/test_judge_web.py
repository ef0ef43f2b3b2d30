"""`releval judge`: the judging page in a real browser, its session store, double judging, blindness."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import queue
import re
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import polars as pl
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from releval.commands import judge as judge_command
from releval.errors import InputError
from releval.judging import web
from releval.judging import judge_page
from releval.judging.judgments import Manifest, doc_lengths, doc_texts, load_version, validate_version
from releval.measurement.evidence import resolve_spans
from releval.retrieval import runs
from support.browser import CHROMIUM, CHROMIUM_FLAGS
from support.browser import needs_chromium as needs_chromium_for

needs_chromium = needs_chromium_for("the judging page's test drives a browser")

QUERIES = {
    "q1": "how do I sort a list in place",
    "q2": "read a file line by line",
    "q3": "parse command line arguments",
}
DOCS = {
    "argparse": ("argparse", "Parse command line arguments with ArgumentParser and add_argument."),
    "files": ("Reading files", "Open a file and iterate over it to read it line by line."),
    "getopt": ("getopt", "A C-style parser for command line options."),
    "heapq": ("heapq", "The heap queue algorithm, also known as the priority queue algorithm."),
    "io": ("io", "Text streams; readline reads one line from the stream."),
    "list": ("Lists", "list.sort sorts the list in place; sorted returns a new list."),
    "optparse": ("optparse", "The deprecated optparse module: optparse.OptionParser reads options."),
    "sorting": ("Sorting HOW TO", "sorted and list.sort, key functions, stability."),
    # Evidence spans: characters outside the BMP before the passages (a JavaScript string counts them
    # twice), HTML that must stay text, a repeated passage (an anchor with an occurrence), lines.
    "views": (
        "Dict <views> & \U0001d53c",
        "Intro \U0001f40d to dict views.\nTo sort a dict by value: sorted(d.items(), key=lambda kv: kv[1]).\n"
        "<b>&amp;</b> stays text, never HTML.\nsorted(d.items(), key=lambda kv: kv[1]) works on any mapping.\n",
    ),
}
RUBRIC = "Grade 0 to 3: what the user can do with the document.\n"
CONFIG_IDS = ("bm25/c1", "m1/c1")
# The judging debt at depth 2 (v1 judged (q1, list)): the union of both configurations' top 2, less it.
DEBT = [
    ("q1", "heapq"),
    ("q1", "sorting"),
    ("q2", "files"),
    ("q2", "io"),
    ("q3", "argparse"),
    ("q3", "getopt"),
    ("q3", "heapq"),
]


def chunk_run(rows: list[tuple[str, str, float]]) -> pl.DataFrame:
    frame = pl.DataFrame(rows, schema={"query_id": pl.Utf8, "chunk_id": pl.Utf8, "score": pl.Float64}, orient="row")
    return frame.with_columns(
        pl.col("chunk_id").str.split("#").list.first().alias("doc_id"),
        pl.int_range(1, pl.len() + 1).over("query_id").cast(pl.Int64).alias("rank"),
    ).select("query_id", "chunk_id", "doc_id", "score", "rank")


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """A project as `dvc repro` leaves it, by hand: params (grid bm25 + m1 on c1, judged@2), the query
    and document tables, two runs, and judgment version v1 (carol judged (q1, list))."""
    root = tmp_path / "project"
    params = {
        "dataset": {
            "name": "small",
            "corpus": {"path": "data/work/docs.parquet", "format": "parquet"},
            "queries": {"path": "data/work/queries.parquet", "format": "parquet"},
            "subset": {"docs": None, "queries": None},
        },
        "judgments": {"version": "v1", "path": "data/judgments/v1", "format": "releval"},
        "metric": {"metrics": ["ndcg@2", "judged@2"], "primary": "ndcg@2", "ties": "docid-asc"},
        "grid": {"chunkings": ["c1"], "models": ["m1"], "fusions": []},
    }
    work = root / "data" / "work"
    work.mkdir(parents=True)
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    pl.DataFrame({"query_id": list(QUERIES), "text": list(QUERIES.values()), "split": ["dev"] * 3}).write_parquet(
        work / "queries.parquet"
    )
    pl.DataFrame(
        {"doc_id": list(DOCS), "title": [t for t, _ in DOCS.values()], "text": [x for _, x in DOCS.values()]}
    ).write_parquet(work / "docs.parquet")
    bm25 = [("q1", "list#0", 3.0), ("q1", "heapq#0", 2.0), ("q2", "files#0", 2.0), ("q2", "io#0", 1.0)]
    bm25 += [("q3", "argparse#0", 2.0), ("q3", "getopt#0", 1.0), ("q3", "optparse#0", 0.5)]
    dense = [("q1", "sorting#0", 0.9), ("q1", "list#0", 0.8), ("q2", "io#0", 0.9), ("q2", "files#0", 0.8)]
    dense += [("q3", "getopt#0", 0.9), ("q3", "heapq#0", 0.8)]
    runs.write_run(work / "runs" / "bm25" / "c1", chunk_run(bm25), {"config_id": CONFIG_IDS[0]})
    runs.write_run(work / "runs" / "model" / "m1" / "c1", chunk_run(dense), {"config_id": CONFIG_IDS[1]})
    data = (json.dumps({"query_id": "q1", "doc_id": "list", "grade": 3, "annotator": "carol"}) + "\n").encode()
    set_dir = root / "data" / "judgments" / "v1"
    set_dir.mkdir(parents=True)
    (set_dir / "judgments.jsonl").write_bytes(data)
    (set_dir / "RUBRIC.md").write_text(RUBRIC)
    scale = {0: "nothing", 1: "pointer", 2: "substantial", 3: "answers"}
    manifest = Manifest("v1", None, "2026-11-30", scale, "RUBRIC.md", ("carol",), hashlib.sha256(data).hexdigest())
    (set_dir / "manifest.yaml").write_text(manifest.to_yaml())
    monkeypatch.chdir(root)
    return root


def serve(desk: web.Desk):
    server = web.make_server(desk, 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def call(url: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path.lstrip("/"), data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def alice_rows(set_dir: str) -> dict[tuple[str, str], tuple[int, str | None]]:
    frame = load_version(set_dir).judgments.filter(pl.col("annotator") == "alice")
    return {(r["query_id"], r["doc_id"]): (r["grade"], r["notes"]) for r in frame.iter_rows(named=True)}


# --------------------------------------------------------------------------- the page in a browser


@needs_chromium
def test_grading_in_a_browser_resumes_adds_from_search_and_finishes_into_a_valid_version(project):
    from playwright.sync_api import sync_playwright

    desk = web.open_desk("data/judgments/v2", "alice")  # the judging debt; parent: params' active v1
    assert desk.pairs == DEBT
    server, url = serve(desk)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page()
            page.set_default_timeout(10_000)

            def open_page(address: str) -> None:
                page.goto(address)
                page.wait_for_selector("body[data-ready]")

            def on_screen(query_id: str, doc_id: str) -> None:
                page.wait_for_function("p => document.body.dataset.pair === p", arg=f"{query_id}\t{doc_id}")

            open_page(url)
            on_screen("q1", "heapq")
            assert page.inner_text("#query") == QUERIES["q1"] and page.inner_text("#doc-text") == DOCS["heapq"][1]
            assert "what the user can do" in page.inner_text("#rubric")
            page.keyboard.press("0")
            on_screen("q1", "sorting")
            page.keyboard.press("3")
            on_screen("q2", "files")
            assert page.inner_text("#progress-query") == "query 2 of 3: 0 / 2 graded"
            page.fill("#notes", "reads lines")
            page.keyboard.press("Escape")
            page.keyboard.press("2")
            on_screen("q2", "io")
            assert page.inner_text("#progress-all") == "overall 3 / 7 graded"

            page.reload()  # a closed tab: the page comes back where it was
            page.wait_for_selector("body[data-ready]")
            on_screen("q2", "io")
            server.shutdown()  # a killed command, started again: a new desk reads the session
            server, url = serve(web.open_desk("data/judgments/v2", "alice"))
            open_page(url)
            on_screen("q2", "io")
            assert page.inner_text("#progress-all") == "overall 3 / 7 graded"

            page.keyboard.press("ArrowRight")  # skip
            on_screen("q3", "argparse")
            page.keyboard.press("ArrowLeft")  # back
            on_screen("q2", "io")
            page.keyboard.press("ArrowLeft")
            on_screen("q2", "files")
            assert page.input_value("#notes") == "reads lines"
            assert page.inner_text(".grades button.chosen").startswith("2:")
            page.keyboard.press("ArrowRight")
            on_screen("q2", "io")
            page.keyboard.press("1")
            on_screen("q3", "argparse")

            page.keyboard.press("/")
            page.keyboard.type("optparse options")
            page.keyboard.press("Enter")
            page.click("#results li[data-doc-id=optparse] button.add")
            on_screen("q3", "optparse")
            page.keyboard.press("2")
            on_screen("q3", "argparse")  # after the last pair: the first ungraded one
            for key, following in (("3", "getopt"), ("0", "heapq")):
                page.keyboard.press(key)
                on_screen("q3", following)
            page.keyboard.press("0")
            page.wait_for_selector("#done", state="visible")
            assert page.inner_text("#progress-all") == "overall 8 / 8 graded"

            page.click("#finish")
            page.wait_for_selector("body[data-finished=v2]")
            assert "8 judgments of alice written to v2" in page.inner_text("#status")
        finally:
            browser.close()
            server.shutdown()

    docs = pl.read_parquet("data/work/docs.parquet")
    written, problems = validate_version("data/judgments/v2", query_ids=list(QUERIES), doc_lengths=doc_lengths(docs))
    assert problems == [] and written.manifest.parent == "v1" and written.manifest.annotators == ("carol", "alice")
    assert alice_rows("data/judgments/v2") == {
        ("q1", "heapq"): (0, None),
        ("q1", "sorting"): (3, None),
        ("q2", "files"): (2, "reads lines"),
        ("q2", "io"): (1, None),
        ("q3", "argparse"): (3, None),
        ("q3", "getopt"): (0, None),
        ("q3", "heapq"): (0, None),
        ("q3", "optparse"): (2, None),
    }
    assert written.judgments.filter(pl.col("annotator") == "carol").height == 1


# --------------------------------------------------------------------------- the session store


def test_every_grade_is_saved_at_once_and_a_new_desk_resumes_it(project):
    desk = web.open_desk("data/judgments/v2", "alice")
    desk.grade("q1", "heapq", 1, " maybe ")
    session = json.loads(web.session_file("data/judgments/v2", "alice").read_text())
    assert session["grades"] == [{"query_id": "q1", "doc_id": "heapq", "grade": 1, "notes": "maybe"}]
    assert session["cursor"] == ["q1", "sorting"]
    desk.move("skip")
    again = web.open_desk("data/judgments/v2", "alice")
    assert again.session.grades == {("q1", "heapq"): {"grade": 1, "notes": "maybe"}}
    assert again.state()["pair"]["doc_id"] == "files" and again.state()["graded"] == 1
    with pytest.raises(InputError, match="scale's grades"):
        again.grade("q1", "sorting", 4)
    with pytest.raises(InputError, match="not a pair of this session"):
        again.grade("q1", "argparse", 2)
    listed = sorted(p.name for p in web.session_dir("data/judgments/v2").iterdir())
    assert listed == [".set.lock", "alice.json", "assignment.json"]  # the first start wrote the assignment locked


def test_a_save_killed_before_its_rename_leaves_the_previous_session_whole(project):
    web.open_desk("data/judgments/v2", "alice").grade("q1", "heapq", 0)
    script = "from releval.judging import web; web.open_desk('data/judgments/v2', 'alice').grade('q1', 'sorting', 3)"
    killed = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "RELEVAL_FAULT": "before-rename@v2.session/alice.json"},
        capture_output=True,
        text=True,
    )
    assert killed.returncode == -9, killed.stderr
    resumed = web.open_desk("data/judgments/v2", "alice")
    assert resumed.session.grades == {("q1", "heapq"): {"grade": 0, "notes": ""}}


def test_double_judging_is_a_seeded_recorded_choice_and_each_sees_only_his_own(project):
    assert web.choose_double_queries(["q3", "q1", "q2", "q4"], 0.5, 7) == web.choose_double_queries(
        ["q1", "q2", "q3", "q4"], 0.5, 7
    )
    draws = {web.choose_double_queries([f"q{i}" for i in range(20)], 0.25, seed) for seed in range(5)}
    assert len(draws) > 1 and all(len(d) == 5 for d in draws)
    assert web.choose_double_queries(["q1"], 0.1, 0) == ("q1",) and web.choose_double_queries(["q1"], 0, 0) == ()

    alice = web.open_desk("data/judgments/v2", "alice", second="bob", double_share=0.34, seed=3)
    recorded = json.loads((web.session_dir("data/judgments/v2") / "assignment.json").read_text())
    chosen = recorded["double_queries"]
    assert recorded["second"] == "bob" and recorded["seed"] == 3 and recorded["double_share"] == 0.34
    assert chosen == list(web.choose_double_queries(QUERIES, 0.34, 3)) and len(chosen) == 1
    bob = web.open_desk("data/judgments/v2", "bob")  # the record names him; no option repeated
    assert bob.pairs == [pair for pair in DEBT if pair[0] in chosen] and alice.pairs == DEBT
    with pytest.raises(InputError, match="not 'carl'"):
        web.open_desk("data/judgments/v2", "carl")
    with pytest.raises(InputError, match="recorded double-judged share is 0.34"):
        web.open_desk("data/judgments/v2", "alice", second="bob", double_share=0.5)

    first = bob.pairs[0]
    alice.grade(*first, 3, "alice's note")
    assert bob.state()["pair"]["grade"] is None and bob.state()["graded"] == 0
    bob.grade(*first, 1)
    assert alice.state()["graded"] == 1 and alice.session.grades[first]["grade"] == 3
    alice.finish()  # creates v2 from v1
    bob.finish()  # appends to it
    both = load_version("data/judgments/v2").judgments.filter(
        (pl.col("query_id") == first[0]) & (pl.col("doc_id") == first[1])
    )
    assert sorted(zip(both["annotator"], both["grade"])) == [("alice", 3), ("bob", 1)]
    with pytest.raises(InputError, match="all were written already"):
        bob.finish()


def test_a_pool_file_names_the_pairs_and_bad_ids_are_named_by_line(project):
    (project / "pool.csv").write_text("query_id,doc_id,grade\nq2,io,\nq1,list,2\n")
    desk = web.open_desk("data/judgments/v2", "alice", pool="pool.csv", parent="data/judgments/v1")
    assert desk.pairs == [("q1", "list"), ("q2", "io")]
    (project / "bad.csv").write_text("query_id,doc_id,grade\nq2,io,\nq9,nope,\n")
    with pytest.raises(InputError) as caught:
        web.open_desk("data/judgments/v3", "alice", pool="bad.csv")
    assert "bad.csv:3: field 'query_id'" in str(caught.value) and "bad.csv:3: field 'doc_id'" in str(caught.value)
    with pytest.raises(InputError, match="the second annotator must be another person"):
        web.open_desk("data/judgments/v3", "alice", second="alice")
    with pytest.raises(InputError, match="letters, digits"):
        web.open_desk("data/judgments/v3", "../alice")


# --------------------------------------------------------------------------- blind, local, and the command


def test_the_page_and_its_api_show_no_system_score_or_rank(project):
    desk = web.open_desk("data/judgments/v2", "alice")
    server, url = serve(desk)
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            html = response.read().decode()
        answers = [call(url, "api/setup")[1], call(url, "api/state")[1], call(url, "api/search?q=priority%20queue")[1]]
        answers.append(call(url, "api/grade", {"query_id": "q1", "doc_id": "heapq", "grade": 2})[1])
        status, added = call(url, "api/add", {"query_id": "q1", "doc_id": "list"})
        assert status == 400 and "already judged" in added["error"]
        request = urllib.request.Request(url + "api/state", headers={"Host": "evil.example:80"})
        with pytest.raises(urllib.error.HTTPError, match="403"):
            urllib.request.urlopen(request, timeout=10)
    finally:
        server.shutdown()
    assert server.server_address[0] == "127.0.0.1"
    assert "<script src" not in html and "<link" not in html and "http" not in html.replace("http-equiv", "")

    def keys(node) -> set[str]:
        if isinstance(node, dict):
            return set(node) | {k for value in node.values() for k in keys(value)}
        return {k for value in node for k in keys(value)} if isinstance(node, list) else set()

    text = json.dumps(answers) + html
    assert not any(word in text.lower() for word in ("score", "rank", "bm25/", "m1/c1", "run.parquet", "dense"))
    assert not {k for k in keys(answers) if any(w in k for w in ("score", "rank", "run", "config", "system"))}
    hits = [hit["doc_id"] for hit in answers[2]["results"]]
    assert hits == ["heapq"] and answers[2]["results"][0]["status"] == "queued" and answers[2]["query_id"] == "q1"


def test_the_command_finishes_from_the_session_and_shares_options_with_the_model_judge(project, capsys):
    parser = argparse.ArgumentParser()
    judge_command.configure(parser)
    options = {a.dest for a in parser._actions}
    assert {"model", "pool", "annotator", "set_dir", "double_share", "second_annotator"} <= options
    web.open_desk("data/judgments/v2", "alice").grade("q2", "io", 2, "readline")
    args = parser.parse_args(["data/judgments/v2", "--annotator", "alice", "--finish"])
    assert judge_command.run(args) == 0
    assert "1 judgments of alice written to v2" in capsys.readouterr().out
    assert alice_rows("data/judgments/v2") == {("q2", "io"): (2, "readline")}
    with pytest.raises(InputError, match="--annotator"):
        judge_command.run(parser.parse_args(["data/judgments/v2"]))


# --------------------------------------------------------------------------- one writer per session (issue 27, seam 8)


def releval(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """The real command, in the project (the fixture's working directory)."""
    return subprocess.run(
        [sys.executable, "-m", "releval.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )


def start_judge(*args: str) -> tuple[subprocess.Popen, str]:
    """A real `releval judge ... --no-browser` process, once it prints its address."""
    process = subprocess.Popen(
        [sys.executable, "-m", "releval.cli", "judge", *args, "--no-browser"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    process.lines = lines  # what it prints after its address, for a test to read
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout], daemon=True).start()
    while True:
        try:
            line = lines.get(timeout=120)
        except queue.Empty:
            process.kill()
            raise AssertionError("the judging server printed no address in 120 s") from None
        if found := re.search(r"open (http://127\.0\.0\.1:\d+/)", line):
            return process, found.group(1)


def stop(*processes: subprocess.Popen) -> None:
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=60)


@pytest.mark.slow
def test_one_server_per_set_and_annotator_and_a_killed_servers_lock_blocks_nothing(project):
    v2 = "data/judgments/v2"
    alice, url = start_judge(v2, "--annotator", "alice", "--second-annotator", "bob", "--double-share", "0.5")
    started = [alice]
    try:
        for extra in ((), ("--finish",)):  # a second server, or a finish beside the page, would overwrite its session
            second = releval("judge", v2, "--annotator", "alice", "--no-browser", *extra, timeout=120)
            assert second.returncode == 2, second.stdout + second.stderr
            said = second.stderr.strip().splitlines()
            assert len(said) == 1 and f"pid {alice.pid}" in said[0] and url in said[0], said
            assert "one server per set and annotator" in said[0]
        bob, bob_url = start_judge(v2, "--annotator", "bob")  # double judging: another annotator beside her
        started.append(bob)
        assert call(url, "api/grade", {"query_id": "q1", "doc_id": "heapq", "grade": 1})[0] == 200
        assert call(bob_url, "api/state")[0] == 200 and call(url, "api/state")[1]["graded"] == 1
        alice.kill()
        alice.wait(timeout=60)
        again, again_url = start_judge(v2, "--annotator", "alice")  # the kernel dropped the killed one's lock
        started.append(again)
        assert call(again_url, "api/state")[1]["graded"] == 1
    finally:
        stop(*started)


@pytest.mark.slow
def test_the_command_stops_by_itself_once_the_page_finished_every_pair(project):
    """A finish that leaves pairs ungraded keeps the page up; one that writes every pair ends the command
    (exit 0, the finish said), so a user or a script need not press Ctrl-C after it."""
    judge, url = start_judge("data/judgments/v2", "--annotator", "alice")
    try:
        first, *rest = DEBT  # the pairs a desk on v2 judges (the fixture's judging debt)
        assert call(url, "api/grade", {"query_id": first[0], "doc_id": first[1], "grade": 1})[0] == 200
        assert call(url, "api/finish", {})[0] == 200
        assert judge.poll() is None  # pairs left: still serving
        for query_id, doc_id in rest:
            assert call(url, "api/grade", {"query_id": query_id, "doc_id": doc_id, "grade": 0})[0] == 200
        code, result = call(url, "api/finish", {})
        assert code == 200 and result["ungraded"] == 0
        assert judge.wait(timeout=60) == 0
        out = ""
        while "every pair graded: done" not in out:  # the reader thread may still be passing the last lines on
            out += judge.lines.get(timeout=30)
        assert "judgments of alice written to v2 (data/judgments/v2)" in out and "every pair graded: done" in out
    finally:
        stop(judge)


def grade_all(desk: web.Desk) -> dict[tuple[str, str], tuple[int, str | None]]:
    """Grade every pair of the desk (notes on some; an evidence span, the text's first word, on the
    grades >= 1); the rows the set should then hold."""
    expected = {}
    for i, (query_id, doc_id) in enumerate(desk.pairs):
        notes = f"note {i}" if i % 2 else ""
        spans = [first_word(doc_id)] if i % 4 else []
        desk.grade(query_id, doc_id, i % 4, notes, evidence=spans)
        expected[(query_id, doc_id)] = (i % 4, notes or None)
    return expected


def first_word(doc_id: str) -> dict[str, int]:
    return {"start": 0, "end": DOCS[doc_id][1].index(" ")}


def alice_evidence(set_dir: str) -> dict[tuple[str, str], list[str]]:
    """Alice's judgments' evidence, each span resolved against the corpus to the characters it covers."""
    frame = load_version(set_dir).judgments.filter(pl.col("annotator") == "alice")
    found = {}
    for row in frame.iter_rows(named=True):
        text = DOCS[row["doc_id"]][1]
        found[(row["query_id"], row["doc_id"])] = [text[s:e] for s, e in resolve_spans(text, row["evidence"] or [])]
    return found


# Every write a finish makes, killed: the graded pool half written and before its rename, the version
# before its rename, and the version written but the session not told (what wedged the session before).
FINISH_KILLS = {
    "pool-half-written": "mid-write@v2.session/alice.graded.jsonl",
    "pool-before-rename": "before-rename@v2.session/alice.graded.jsonl",
    "version-before-rename": "before-rename@judgments/v2",
    "version-written-session-not": "before-rename@v2.session/alice.json",
}


@pytest.mark.slow
@pytest.mark.parametrize("appends", [False, True], ids=["new-version", "append"])
@pytest.mark.parametrize("fault", list(FINISH_KILLS.values()), ids=list(FINISH_KILLS))
def test_a_finish_killed_anywhere_is_completed_by_the_next_with_no_grade_lost_or_doubled(project, fault, appends):
    v2 = "data/judgments/v2"
    desk = web.open_desk(v2, "alice")
    expected = grade_all(desk)
    if appends:  # v2 exists: the killed finish appends to it
        desk.finish()
        desk.add("q2", "argparse")  # one more pair, from the search box
        desk.grade("q2", "argparse", 1, "added", evidence=[first_word("argparse")])
        expected[("q2", "argparse")] = (1, "added")
    killed = releval("judge", v2, "--annotator", "alice", "--finish", env={"RELEVAL_FAULT": fault})
    assert killed.returncode == -9, killed.stdout + killed.stderr
    finished = releval("judge", v2, "--annotator", "alice", "--finish")
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert "judge: " in finished.stdout and "problems" not in finished.stderr
    queries = "".join(json.dumps({"query_id": q, "text": t, "split": "dev"}) + "\n" for q, t in QUERIES.items())
    Path("queries.jsonl").write_text(queries)
    valid = releval("validate", v2, "--queries", "queries.jsonl", "--corpus", "data/work/docs.parquet")
    assert valid.returncode == 0, valid.stdout + valid.stderr
    assert alice_rows(v2) == expected
    words = {pair: [DOCS[pair[1]][1].split(" ")[0]] if grade else [] for pair, (grade, _) in expected.items()}
    assert alice_evidence(v2) == words  # every span once, on the grades >= 1, after the kill as before
    judged = load_version(v2).judgments
    assert judged.height == 1 + len(expected) == judged.unique(["query_id", "doc_id", "annotator"]).height
    again = releval("judge", v2, "--annotator", "alice", "--finish")
    assert again.returncode == 2 and "all were written already" in again.stderr
    assert list(web.session_dir(v2).glob(".releval-tmp-*")) == []


def test_a_version_killed_between_its_two_renames_is_put_back_before_anything_is_written(project):
    v2 = Path("data/judgments/v2")
    desk = web.open_desk(v2, "alice")
    desk.grade("q1", "heapq", 2)
    desk.finish()
    desk.grade("q1", "sorting", 3)
    # What io.atomic_path leaves when killed after moving the old version aside, before moving the new one in.
    aside = v2.with_name(".releval-old-v2.4242")
    os.replace(v2, aside)
    resumed = web.open_desk(v2, "alice")  # without the old v2 it would make v2 again from v1, and lose q1/heapq
    assert v2.is_dir() and not aside.exists()
    resumed.finish()
    assert alice_rows(str(v2)) == {("q1", "heapq"): (2, None), ("q1", "sorting"): (3, None)}


@pytest.mark.slow
def test_a_start_removes_the_temporary_files_of_its_annotators_killed_saves_and_a_normal_run_leaves_none(
    project, capsys
):
    v2 = "data/judgments/v2"
    web.open_desk(v2, "alice").grade("q1", "heapq", 0)
    script = "from releval.judging import web; web.open_desk('data/judgments/v2', 'alice').grade('q1', 'sorting', 3)"
    killed = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "RELEVAL_FAULT": "before-rename@v2.session/alice.json"},
        capture_output=True,
        text=True,
    )
    assert killed.returncode == -9, killed.stderr
    folder = web.session_dir(v2)
    assert [p.name.split(".")[1] for p in folder.glob(".releval-tmp-*")] == ["releval-tmp-alice"]
    others = [folder / ".releval-tmp-bob.json.abcdefgh.json", folder / "notes.releval-tmp-alice.json.txt"]
    for path in others:  # bob's (his server may be writing it), and a file not of the writer's pattern
        path.write_text("{}")
    parser = argparse.ArgumentParser()
    judge_command.configure(parser)
    assert judge_command.run(parser.parse_args([v2, "--annotator", "alice", "--finish"])) == 0
    assert "1 judgments of alice written" in capsys.readouterr().out
    assert sorted(folder.glob("*releval-tmp-*")) == sorted(others)
    for path in others:
        path.unlink()
    desk = web.open_desk(v2, "alice")
    desk.grade("q2", "io", 1, "readline")
    desk.finish()
    assert [p for p in Path("data/judgments").rglob("*") if p.name.startswith(".releval-")] == []


# --------------------------------------------------------------------------- requests the server refuses (seam 12)


def exchange(url: str, data: bytes, timeout: float = 120) -> bytes:
    """Send raw bytes to the server and read until it closes the connection."""
    with socket.create_connection(("127.0.0.1", urlsplit(url).port), timeout=timeout) as sock:
        sock.sendall(data)
        received = b""
        while chunk := sock.recv(1 << 16):
            received += chunk
    return received


def answer(raw: bytes) -> tuple[int, dict]:
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def post(path: str, body: bytes, *headers: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def test_bodies_are_bounded_and_need_a_content_length_and_nothing_is_written(project):
    desk = web.open_desk("data/judgments/v2", "alice")
    server, url = serve(desk)
    session = web.session_file("data/judgments/v2", "alice")
    grade = json.dumps({"query_id": "q1", "doc_id": "heapq", "grade": 1, "notes": "x" * (1 << 20)}).encode()
    try:
        cases = {
            "400 MB announced": (post("/api/grade", b"", "Content-Length: 400000000"), 413),
            "1 MiB + notes, sent": (post("/api/grade", grade, f"Content-Length: {len(grade)}"), 413),
            "no Content-Length": (post("/api/finish", b"{}"), 400),
            "Content-Length -1": (post("/api/grade", b"{}", "Content-Length: -1"), 400),
            "Content-Length abc": (post("/api/grade", b"{}", "Content-Length: abc"), 400),
            "two Content-Lengths": (post("/api/grade", b"{}", "Content-Length: 2", "Content-Length: 3"), 400),
        }
        for name, (request, status) in cases.items():
            got, said = answer(exchange(url, request))
            assert (got, "\n" in said["error"]) == (status, False), (name, got, said)
            assert call(url, "api/state")[0] == 200, name  # still serving
        assert not session.exists()  # nothing graded, nothing written
    finally:
        server.shutdown()


def test_a_client_that_stalls_is_let_go_and_the_server_serves_others_meanwhile(project):
    server, url = serve(web.open_desk("data/judgments/v2", "alice"))
    try:
        port = urlsplit(url).port
        stalled = []
        for request in (post("/api/grade", b'{"query_id"', "Content-Length: 60"), b"GET /api/state HTTP/1.1\r\n"):
            sock = socket.create_connection(("127.0.0.1", port), timeout=120)
            sock.sendall(request)  # headers, then part of the body; or half the headers; then silence
            stalled.append(sock)
        assert call(url, "api/state")[0] == 200
        for sock in stalled:
            with sock:
                received = b""
                while chunk := sock.recv(1 << 16):  # the server closes it: no socket.timeout here
                    received += chunk
            assert received == b"" or answer(received)[0] == 408
    finally:
        server.shutdown()


def test_bad_json_shapes_get_a_400_in_one_line_and_the_server_goes_on(project):
    desk = web.open_desk("data/judgments/v2", "alice")
    server, url = serve(desk)
    cases = {
        "list query_id": ("/api/grade", {"query_id": ["q1"], "doc_id": "heapq", "grade": 1}),
        "object doc_id": ("/api/grade", {"query_id": "q1", "doc_id": {"a": 1}, "grade": 1}),
        "text grade": ("/api/grade", {"query_id": "q1", "doc_id": "heapq", "grade": "1"}),
        "number notes": ("/api/grade", {"query_id": "q1", "doc_id": "heapq", "grade": 1, "notes": 5}),
        "lone surrogate": ("/api/grade", {"query_id": "q1", "doc_id": "heapq", "grade": 1, "notes": "\ud800"}),
        "text advance": ("/api/grade", {"query_id": "q1", "doc_id": "heapq", "grade": 1, "advance": "no"}),
        "list add": ("/api/add", {"query_id": ["q1"], "doc_id": "list"}),
        "list move": ("/api/move", {"to": ["back"]}),
    }
    try:
        requests = {name: (path, json.dumps(body).encode()) for name, (path, body) in cases.items()}
        requests["100,000 nested lists"] = ("/api/grade", b"[" * 100_000 + b"]" * 100_000)
        requests["not JSON"] = ("/api/grade", b"{'query_id': 'q1'}")
        for name, (path, body) in requests.items():
            got, said = answer(exchange(url, post(path, body, f"Content-Length: {len(body)}")))
            assert (got, "\n" in said["error"]) == (400, False), (name, got, said)
            assert call(url, "api/state")[1]["graded"] == 0, name
        assert not web.session_file("data/judgments/v2", "alice").exists()
    finally:
        server.shutdown()


# --------------------------------------------------------------------------- sessions are not committed (seam 12)


def test_judging_sessions_are_git_ignored_in_this_project_and_in_a_dataset_init_dataset_makes():
    from releval.judging.scaffold import DatasetFiles

    root = Path(__file__).resolve().parents[2]
    sessions = [
        Path("data/judgments/v3.session/alice.json"),
        Path("data/judgments/v3.session/alice.lock"),
        web.session_file(DatasetFiles.of("mine").first_set, "alice"),
    ]
    for path in sessions:
        checked = subprocess.run(
            ["git", "check-ignore", "--no-index", "-v", path.as_posix()], cwd=root, capture_output=True, text=True
        )
        assert checked.returncode == 0 and "*.session/" in checked.stdout, (path, checked.stdout, checked.stderr)


# --------------------------------------------------------------------------- the rubric, rendered safely (issue 29)

HOSTILE_RUBRIC = """# Grading <em>rubric</em>

Grade **what the user can do** with the *document*; see `notes`.

<script>window.pwned = "script"</script>

<img src=x onerror="window.pwned = 'img'">

| Grade | Name <b onmouseover="window.pwned = 'cell'">x</b> |
|---|---|
| **3** | answers |

- **Judge the text as shown.** Grade only the text
  you can read.
- A `<script>` in code stays text: [link](javascript:window.pwned='link')
"""


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, list]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))


def tags_of(html: str) -> list[tuple[str, list]]:
    parser = _Tags()
    parser.feed(html)
    return parser.tags


def test_the_rubric_markdown_is_rendered_with_fixed_tags_and_its_html_only_as_text():
    html = judge_page.render_markdown(HOSTILE_RUBRIC)
    tags = tags_of(html)
    assert {tag for tag, _ in tags} == {
        "h1",
        "p",
        "strong",
        "em",
        "code",
        "table",
        "thead",
        "tbody",
        "tr",
        "th",
        "td",
    } | {
        "ul",
        "li",
    }
    assert all(attrs == [] for _, attrs in tags)
    assert "&lt;script&gt;window.pwned" in html and "&lt;img src=x onerror=" in html
    shipped = judge_page.render_markdown((Path(__file__).resolve().parents[2] / "data/judgments/RUBRIC.md").read_text())
    assert shipped.count("<h2>") == 2 and shipped.count("<tr>") == 5 and "<code>secrets</code>" in shipped


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("<>&\"'`*_#|-+>=/ \n\tab1.:")) | st.characters(), max_size=300))
def test_whatever_the_rubric_holds_only_fixed_tags_without_attributes_come_out(text):
    tags = tags_of(judge_page.render_markdown(text))
    assert all(tag in judge_page.RUBRIC_TAGS and attrs == [] for tag, attrs in tags), tags


@needs_chromium
@pytest.mark.slow
def test_the_page_shows_the_rubric_rendered_and_its_html_as_text_never_run(project):
    from playwright.sync_api import sync_playwright

    (project / "data/judgments/v1/RUBRIC.md").write_text(HOSTILE_RUBRIC)
    server, url = serve(web.open_desk("data/judgments/v2", "alice"))
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page()
            page.set_default_timeout(30_000)
            page.goto(url)
            page.wait_for_selector("body[data-ready]")
            assert page.inner_text("#rubric h1") == "Grading <em>rubric</em>"
            assert page.inner_text("#rubric p strong") == "what the user can do"
            assert page.locator("#rubric table th").count() == 2 and page.locator("#rubric li").count() == 2
            shown = page.inner_text("#rubric")
            assert '<script>window.pwned = "script"</script>' in shown and "<img src=x onerror=" in shown
            assert page.locator("#rubric script, #rubric img, #rubric b, #rubric a").count() == 0
            assert page.evaluate("typeof window.pwned") == "undefined"
        finally:
            browser.close()
            server.shutdown()


def test_an_annotator_cannot_be_named_after_the_assignment_record():
    """`assignment` would have its session saved over SET_DIR.session/assignment.json, the record of the pairs."""
    with pytest.raises(InputError, match="names the session's assignment record"):
        web.checked_name("assignment", "annotator")
    assert web.checked_name("assignments", "annotator") == "assignments"


# --------------------------------------------------------------------------- evidence spans (issue 31, item 3)

VIEWS = DOCS["views"][1]
SORTED = "sorted(d.items(), key=lambda kv: kv[1])"
SECOND_SORTED = VIEWS.index(SORTED + " works")  # the second place the anchor occurs
HTML_LINE = "<b>&amp;</b> stays text, never HTML."


def views_desk(project: Path) -> web.Desk:
    """Alice's desk on the pairs (q1, views), (q2, views), (q3, views): a new v2 of v1."""
    (project / "views.csv").write_text("query_id,doc_id\nq1,views\nq2,views\nq3,views\n")
    return web.open_desk("data/judgments/v2", "alice", pool="views.csv", parent="data/judgments/v1")


def span_at(quote: str, start: int | None = None) -> dict[str, int]:
    start = VIEWS.index(quote) if start is None else start
    return {"start": start, "end": start + len(quote)}


def test_spans_are_checked_saved_with_the_grade_kept_on_a_regrade_and_dropped_by_grade_0(project):
    desk = views_desk(project)
    pair = ("q1", "views")
    two = [span_at(SORTED, SECOND_SORTED), span_at(HTML_LINE)]
    state = desk.grade(*pair, 2, "two places", advance=False, evidence=two)
    assert state["pair"]["evidence"] == two
    saved = json.loads(web.session_file("data/judgments/v2", "alice").read_text())["grades"][0]
    assert saved["evidence"] == [{**span, "quote": VIEWS[span["start"] : span["end"]]} for span in two]
    assert web.open_desk("data/judgments/v2", "alice").state()["pair"]["evidence"] == two  # a new desk reads them
    assert desk.grade(*pair, 3, "two places", advance=False)["pair"]["evidence"] == two  # regraded: kept
    assert desk.grade(*pair, 0, advance=False)["pair"]["evidence"] == []  # grade 0: dropped
    assert "evidence" not in desk.session.grades[pair]
    assert desk.grade(*pair, 1, advance=False)["pair"]["evidence"] == []  # and not back
    # Grade 1 takes spans (the rubric: a grade-1 pair where one passage points the way).
    assert desk.grade(*pair, 1, advance=False, evidence=[span_at("dict views")])["pair"]["evidence"]

    length = len(VIEWS)
    refused = {
        "a span on grade 0": (0, [span_at("dict views")], "grades of 1 or more, not 0"),
        "four spans": (2, [span_at(w) for w in ("Intro", "dict", "value", "never")], "at most 3"),
        "past the end": (2, [{"start": 3, "end": length + 1}], f"<= {length}"),
        "empty": (2, [{"start": 3, "end": 3}], "start < end"),
        "negative": (2, [{"start": -1, "end": 3}], "0 <= start"),
        "blanks": (2, [{"start": VIEWS.index("\n"), "end": VIEWS.index("\n") + 1}], "only blanks"),
        "overlapping": (2, [span_at("dict views"), span_at("views")], "overlaps evidence[0]"),
        "a boolean": (2, [{"start": True, "end": 3}], "evidence[0].start"),
        "a quote": (2, [{"quote": "dict views"}], 'expected {"start": S, "end": E}'),
        "not a list": (2, {"start": 0, "end": 3}, "expected a list of spans"),
    }
    before = web.session_file("data/judgments/v2", "alice").read_bytes()
    for name, (grade, evidence, message) in refused.items():
        with pytest.raises(InputError, match=re.escape(message)):
            desk.grade(*pair, grade, evidence=evidence)
        assert web.session_file("data/judgments/v2", "alice").read_bytes() == before, name  # nothing saved


def test_the_server_refuses_bad_spans_in_one_line_and_the_finish_writes_anchors_that_resolve_exactly(project):
    desk = views_desk(project)
    server, url = serve(desk)
    try:
        status, said = call(
            url, "api/grade", {"query_id": "q1", "doc_id": "views", "grade": 0, "evidence": [span_at("dict")]}
        )
        assert status == 400 and "\n" not in said["error"] and "grades of 1 or more" in said["error"]
        spans = [span_at(SORTED, SECOND_SORTED), span_at(HTML_LINE), span_at("dict views")]
        assert call(url, "api/grade", {"query_id": "q1", "doc_id": "views", "grade": 2, "evidence": spans})[0] == 200
        assert (
            call(url, "api/grade", {"query_id": "q2", "doc_id": "views", "grade": 1, "evidence": spans[:1]})[0] == 200
        )
        assert call(url, "api/grade", {"query_id": "q3", "doc_id": "views", "grade": 0})[0] == 200
        assert call(url, "api/finish", {})[0] == 200
    finally:
        server.shutdown()
    lines = [json.loads(line) for line in Path("data/judgments/v2/judgments.jsonl").read_text().splitlines()]
    evidence = {(r["query_id"], r["doc_id"]): r.get("evidence") for r in lines if r["annotator"] == "alice"}
    assert evidence == {
        ("q1", "views"): [{"quote": SORTED, "occurrence": 2}, {"quote": HTML_LINE}, {"quote": "dict views"}],
        ("q2", "views"): [{"quote": SORTED, "occurrence": 2}],
        ("q3", "views"): None,
    }
    docs = pl.read_parquet("data/work/docs.parquet")
    written, problems = validate_version("data/judgments/v2", doc_lengths=doc_lengths(docs), doc_texts=doc_texts(docs))
    assert problems == []
    row = written.judgments.filter((pl.col("annotator") == "alice") & (pl.col("query_id") == "q1")).row(0, named=True)
    assert resolve_spans(VIEWS, row["evidence"]) == [(s["start"], s["end"]) for s in spans]
    # A grade with other spans is another judgment: not "written already", but a second judgment of the pair.
    desk.grade("q2", "views", 1, evidence=[span_at("dict views")])
    with pytest.raises(InputError, match="q2"):
        desk.finish()


def select_in_text(page, start: int, end: int, mouse: bool) -> None:
    """Select the document text's characters [start, end) (code points): by dragging the mouse from the
    first character's left edge to the last one's right edge, or by setting a DOM Range."""
    page.evaluate(
        """([start, end, mouse]) => {
            const pane = document.getElementById("doc-text");
            const text = pane.textContent;
            const units = (points) => { let i = 0; for (let n = 0; n < points; n++) {
                i += text.codePointAt(i) > 0xFFFF ? 2 : 1; } return i; };
            const place = (unit) => {  // (text node, offset) of a UTF-16 offset into the pane's text
                const walker = document.createTreeWalker(pane, NodeFilter.SHOW_TEXT);
                let node, at = 0;
                while ((node = walker.nextNode())) {
                    if (unit <= at + node.length) { return [node, unit - at]; }
                    at += node.length;
                }
            };
            const range = document.createRange();
            range.setStart(...place(units(start)));
            range.setEnd(...place(units(end)));
            if (!mouse) { getSelection().removeAllRanges(); getSelection().addRange(range); return; }
            const rects = range.getClientRects();
            window.__drag = [rects[0].left + 1, (rects[0].top + rects[0].bottom) / 2,
                             rects[rects.length - 1].right - 1,
                             (rects[rects.length - 1].top + rects[rects.length - 1].bottom) / 2];
        }""",
        [start, end, mouse],
    )
    if mouse:
        x0, y0, x1, y1 = page.evaluate("window.__drag")
        page.mouse.click(x0 - 40, y0 - 40)  # nothing selected before the drag
        page.mouse.move(x0, y0)
        page.mouse.down()
        page.mouse.move((x0 + x1) / 2, (y0 + y1) / 2, steps=4)
        page.mouse.move(x1, y1, steps=4)
        page.mouse.up()


@needs_chromium
@pytest.mark.slow
def test_spans_marked_in_a_browser_with_the_mouse_and_the_keyboard_resolve_to_the_selected_characters(project):
    from playwright.sync_api import sync_playwright

    server, url = serve(views_desk(project))
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page()
            page.set_default_timeout(10_000)
            page.goto(url)
            page.wait_for_selector("body[data-ready]")

            def on_screen(query_id: str) -> None:
                page.wait_for_function("p => document.body.dataset.pair === p", arg=f"{query_id}\tviews")

            def spans_shown(expected: list[tuple[int, int]]) -> None:
                page.wait_for_function(
                    "s => document.body.dataset.spans === s", arg=",".join(f"{s}-{e}" for s, e in expected)
                )

            on_screen("q1")
            # The pane holds the text exactly: its textContent, HTML and astral characters included.
            assert page.evaluate("document.getElementById('doc-text').textContent") == VIEWS
            assert page.locator("#doc-text *").count() == 0 and page.inner_text("#doc-title") == DOCS["views"][0]
            # The mouse: the second occurrence of the anchor (after a character JavaScript counts twice).
            first = (SECOND_SORTED, SECOND_SORTED + len(SORTED))
            select_in_text(page, *first, mouse=True)
            assert page.evaluate("getSelection().toString()") == SORTED
            page.keyboard.press("e")
            spans_shown([first])
            assert page.inner_text("#doc-text mark") == SORTED
            assert page.evaluate("document.getElementById('doc-text').textContent") == VIEWS  # still exactly
            second = (VIEWS.index(HTML_LINE), VIEWS.index(HTML_LINE) + len(HTML_LINE))
            select_in_text(page, second[0] - 1, second[1] + 1, mouse=True)  # with the blanks either side
            page.click("#add-span")  # the button, this time
            spans_shown([first, second])
            assert page.locator("#doc-text mark").all_inner_texts() == [HTML_LINE, SORTED]  # in the text's order
            page.keyboard.press("2")
            on_screen("q2")
            spans_shown([])

            # The keyboard: a selection, e adds it, x removes it, e again, then the grade.
            word = (VIEWS.index("dict views"), VIEWS.index("dict views") + len("dict views"))
            select_in_text(page, *word, mouse=False)
            page.keyboard.press("e")
            spans_shown([word])
            page.keyboard.press("x")
            spans_shown([])
            page.keyboard.press("e")  # nothing selected any more: said, nothing added
            page.wait_for_selector("#status.error")
            select_in_text(page, *word, mouse=False)
            page.keyboard.press("e")
            select_in_text(page, word[0] + 5, word[1], mouse=False)  # "views": inside the first span
            page.keyboard.press("e")
            page.wait_for_function("document.getElementById('status').textContent.includes('overlaps span 1')")
            page.keyboard.press("3")
            on_screen("q3")

            # A grade-1 pair's span, then the grade changed to 0: its span goes.
            select_in_text(page, 0, len("Intro"), mouse=False)
            page.keyboard.press("e")
            page.keyboard.press("1")
            page.wait_for_selector("#done", state="visible")
            spans_shown([(0, 5)])
            page.keyboard.press("0")
            spans_shown([])
            page.wait_for_function("document.getElementById('status').textContent.includes('span(s) dropped')")
            assert page.locator("#doc-text mark").count() == 0

            page.keyboard.press("ArrowLeft")  # back to q2: its span is the server's
            on_screen("q2")
            spans_shown([word])
            assert page.inner_text("#spans").startswith("\u201cdict views\u201d")
            page.click("#finish")
            page.wait_for_selector("body[data-finished=v2]")
        finally:
            browser.close()
            server.shutdown()

    assert alice_rows("data/judgments/v2") == {
        ("q1", "views"): (2, None),
        ("q2", "views"): (3, None),
        ("q3", "views"): (0, None),
    }
    assert alice_evidence("data/judgments/v2") == {
        ("q1", "views"): [SORTED, HTML_LINE],
        ("q2", "views"): ["dict views"],
        ("q3", "views"): [],
    }
    judged = load_version("data/judgments/v2").judgments
    row = judged.filter((pl.col("query_id") == "q1") & (pl.col("doc_id") == "views")).row(0, named=True)
    assert resolve_spans(VIEWS, row["evidence"]) == [first, second]  # exactly the selected characters
    assert row["evidence"][0]["occurrence"] == 2


@needs_chromium
@pytest.mark.slow
def test_the_time_a_span_adds_per_judged_pair_on_the_page(project, capsys):
    """Issue 31's acceptance asks what a span costs per judged pair. Headless Chromium grades N pairs
    with a key press alone and N pairs (interleaved) by dragging the mouse over the text's first words,
    pressing e, then the key: the time from the pair on screen to the next pair on screen. This is the
    page's own cost (the drag, the highlight, the save), not a judge's reading: printed, never asserted."""
    import statistics
    import time

    from playwright.sync_api import sync_playwright

    pairs = [(q, d) for q in QUERIES for d in DOCS if (q, d) != ("q1", "list")]
    (project / "all.csv").write_text("query_id,doc_id\n" + "".join(f"{q},{d}\n" for q, d in pairs))
    desk = web.open_desk("data/judgments/v2", "alice", pool="all.csv", parent="data/judgments/v1")
    server, url = serve(desk)
    timed: dict[bool, list[float]] = {False: [], True: []}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page()
            page.set_default_timeout(10_000)
            page.goto(url)
            page.wait_for_selector("body[data-ready]")
            for i, (query_id, doc_id) in enumerate(desk.pairs):
                page.wait_for_function("p => document.body.dataset.pair === p", arg=f"{query_id}\t{doc_id}")
                with_span = i % 2 == 1
                began = time.perf_counter()
                if with_span:
                    text = DOCS[doc_id][1]
                    select_in_text(page, 0, text.index(" ", 12), mouse=True)
                    page.keyboard.press("e")
                    page.wait_for_function("document.body.dataset.spans !== ''")
                page.keyboard.press("2")
                following = desk.pairs[i + 1] if i + 1 < len(desk.pairs) else None
                if following:
                    page.wait_for_function("p => document.body.dataset.pair === p", arg="\t".join(following))
                else:
                    page.wait_for_selector("#done", state="visible")
                if i >= 2:  # the first two warm the page up
                    timed[with_span].append(time.perf_counter() - began)
        finally:
            browser.close()
            server.shutdown()
    marked = [pair for i, pair in enumerate(desk.pairs) if i % 2 == 1]
    assert all(desk.session.grades[pair].get("evidence") for pair in marked)
    plain, span = (statistics.median(timed[key]) * 1000 for key in (False, True))
    with capsys.disabled():
        print(
            f"\nspan timing: {len(timed[False])} pairs graded by key alone, median {plain:.0f} ms; "
            f"{len(timed[True])} with a span marked by mouse drag + e, median {span:.0f} ms: "
            f"+{span - plain:.0f} ms per pair, x{span / plain:.2f} (the page's cost, not a judge's reading)"
        )
