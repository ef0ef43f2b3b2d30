"""J2 (your own corpus from nothing) and J4 (an external run beside the grid), in one fresh clone, each
step the docs' block its id names (`make test-journeys`).

The corpus is text nobody here wrote: the descriptions of the Python packages installed beside
releval (their PyPI pages, from each distribution's metadata), one Markdown file per package in
``../mydocs``. The queries are a user's, with the user's own answer key: the packages that do what
the query asks. The user grades in the judging page, in a real headless Chromium, from that key
alone: the page shows no system, score or rank, so neither does the grading.
"""

from __future__ import annotations

import json
import re
from importlib import metadata
from pathlib import Path

import pytest
import yaml

from support.browser import CHROMIUM, CHROMIUM_FLAGS
from support.doc_blocks import step
from support.journey import Shell, fresh_clone, newcomer_environment

DESCRIPTION_CHARS = 4000  # each package page cut at a paragraph before this many characters

# query -> {package: grade}: what the user knows answers it (2) or helps (1); every other page is 0.
QUERIES = {
    "q01": ("retry failed HTTP requests in an async client", {"aiohttp-retry": 2, "aiohttp": 1}),
    "q02": ("draw a progress bar for a long loop", {"tqdm": 2, "rich": 1}),
    "q03": ("pretty-print a table of rows in the terminal", {"tabulate": 2, "rich": 1}),
    "q04": ("validate a dictionary against a JSON schema", {"jsonschema": 2, "voluptuous": 1, "pydantic": 1}),
    "q05": ("read a YAML file and keep its comments when writing it back", {"ruamel.yaml": 2}),
    "q06": ("version large data files alongside git", {"dvc": 2, "dvc-data": 1}),
    "q07": ("send tasks to background workers through a message broker", {"celery": 2, "kombu": 1}),
    "q08": ("approximate nearest neighbour vector search", {"usearch": 2}),
    "q09": ("detect the encoding of a text file", {"charset-normalizer": 2}),
    "q10": ("lint and format python code quickly", {"ruff": 2}),
    "q11": ("load environment variables from a .env file", {"python-dotenv": 2}),
    "q12": ("parse a date string and add months to it", {"python-dateutil": 2}),
    "q13": ("a list that stays sorted when items are inserted", {"sortedcontainers": 2}),
    "q14": ("tab completion for an argparse command line tool", {"shtab": 2}),
    "q15": ("colored terminal text that also works on windows", {"colorama": 2, "rich": 1}),
    "q16": ("see cpu and memory use of running processes", {"psutil": 2}),
}
MUST_NEVER_BREAK = {"q08"}
HOLDOUT = {"q16"}


def package_pages() -> dict[str, str]:
    """doc_id (the distribution's name) -> a Markdown page: its summary as title, then its description."""
    pages = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        body = dist.metadata.get_payload() or dist.metadata.get("Description") or ""
        if not name or name == "releval" or len(body) < 1500:
            continue
        cut = body[:DESCRIPTION_CHARS]
        cut = cut[: cut.rfind("\n\n")] if "\n\n" in cut[1000:] else cut
        summary = " ".join((dist.metadata.get("Summary") or name).split())
        pages[name] = f"# {name}: {summary}\n\n{cut.strip()}\n"
    return dict(sorted(pages.items()))


def write_corpus(folder: Path) -> dict[str, str]:
    pages = package_pages()
    needed = {package for _, key in QUERIES.values() for package in key}
    assert needed <= set(pages), sorted(needed - set(pages))
    folder.mkdir()
    for name, text in pages.items():
        (folder / f"{name}.md").write_text(text, encoding="utf-8")
    return pages


def write_queries_and_rubric(project: Path) -> None:
    rows = []
    for query_id, (text, _) in QUERIES.items():
        row = {"query_id": query_id, "text": text, "split": "holdout" if query_id in HOLDOUT else "dev"}
        if query_id in MUST_NEVER_BREAK:
            row["must_never_break"] = True
        rows.append(json.dumps(row))
    (project / "data" / "mydocs" / "queries.jsonl").write_text("\n".join(rows) + "\n")
    (project / "data" / "mydocs" / "judgments" / "RUBRIC.md").write_text(
        "# Rubric\n\nGrade what a developer looking for a library can do with the page.\n\n"
        "- **2**: the package does what the query asks.\n- **1**: it helps with part of it.\n"
        "- **0**: it does not help.\n"
    )


@pytest.fixture(scope="module")
def shell(tmp_path_factory) -> Shell:
    root = tmp_path_factory.mktemp("j2")
    clone = fresh_clone(root / "releval")
    write_corpus(root / "mydocs")
    return Shell(clone, root / "logs", newcomer_environment())


def test_start_a_dataset_on_a_folder_outside_the_project(shell):
    ran = shell.run("own-corpus/start", timeout=3600)
    assert re.search(r"corpus \.\./mydocs: \d+ documents", ran.output), ran.tail()
    assert (shell.cwd / "conf" / "dataset" / "mydocs.yaml").is_file()
    write_queries_and_rubric(shell.cwd)


def test_shrink_the_grid_and_build_every_run(shell):
    ran = shell.run("own-corpus/runs", expect=None, timeout=3600)
    assert ran.code != 0 and "there are no judgments" in ran.output, ran.tail()
    assert "wrote params.yaml" in ran.output and "ok: dataset mydocs" in ran.output
    grid = yaml.safe_load((shell.cwd / "params.yaml").read_text())["grid"]
    assert (grid["models"], grid["chunkings"], grid["fused"], grid["reranked"]) == (["minilm"], ["c256"], {}, {})
    for run in ("model/minilm/c256", "bm25/c256", "fused/rrf/minilm/c256"):
        assert (shell.cwd / "data" / "work" / "runs" / run / "run.parquet").is_file(), run


NEXT_PAIR_OR_DONE = "p => document.body.dataset.pair !== p || document.querySelector('#done').offsetParent !== null"


def grade_every_pair_in_the_browser(url: str) -> int:
    """Grade every pair on the page from the answer key alone, then press finish; the number graded."""
    from playwright.sync_api import sync_playwright

    key = {query_id: grades for query_id, (_, grades) in QUERIES.items()}
    graded: set[str] = set()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page()
            page.set_default_timeout(30_000)
            page.goto(url)
            page.wait_for_selector("body[data-ready]")
            while not page.is_visible("#done"):
                pair = page.evaluate("document.body.dataset.pair")
                assert pair not in graded, f"{pair!r} came back after it was graded: a key press landed on another pair"
                query_id, doc_id = pair.split("\t")
                page.keyboard.press(str(key[query_id].get(doc_id, 0)))
                graded.add(pair)
                page.wait_for_function(NEXT_PAIR_OR_DONE, arg=pair)
            page.click("#finish")
            page.wait_for_selector("body[data-finished]")
            status = page.inner_text("#status")
            assert "written to v1" in status, status
        finally:
            browser.close()
    return len(graded)


def test_judge_the_debt_in_the_browser(shell):
    server = shell.start("own-corpus/judge")
    try:
        debt = server.wait_for(r"total: (\d+) distinct pairs")
        url = server.wait_for(r"open (http://127\.0\.0\.1:\d+/)")[1]
        graded = grade_every_pair_in_the_browser(url)
        assert graded == int(debt[1])
        assert server.wait(120) == 0  # the finish wrote every grade: the command ended by itself
        assert "every pair graded: done" in server.output()
    finally:
        server.stop()
    judgments = (shell.cwd / "data" / "mydocs" / "judgments" / "v1" / "judgments.jsonl").read_text().splitlines()
    assert len(judgments) == graded


def test_score_compare_and_gate(shell):
    ran = shell.run("own-corpus/score", timeout=3600)
    assert "coverage-confounded" not in ran.output.lower()
    assert "gate: PASS" in ran.output
    assert (shell.cwd / "reports" / "mydocs" / "report.md").is_file()


def test_an_external_run_is_scored_compared_and_gated_beside_the_grid(shell):
    shell.run("external/file")
    (shell.cwd / "conf" / "external" / "prod.yaml").write_text(step("external/conf").text)
    ran = shell.run("external/score", timeout=3600)
    assert "1. candidate rrf(minilm,bm25)/c256 vs baseline external/prod" in ran.output
    assert "gate: " in ran.output
    metrics = json.loads((shell.cwd / "reports" / "mydocs" / "metrics.json").read_text())
    assert metrics["configs"]["external/prod"]["ndcg@10"] == metrics["configs"]["bm25/c256"]["ndcg@10"]


# --------------------------------------------------------------------------- J3: labels you already have


def write_beir_folder(folder: Path) -> None:
    """The same pages as a BEIR folder, with the user's answer key as positives-only qrels."""
    pages = package_pages()
    (folder / "qrels").mkdir(parents=True)
    with open(folder / "corpus.jsonl", "w") as fh:
        for name, text in pages.items():
            title, _, body = text.partition("\n\n")
            fh.write(json.dumps({"_id": name, "title": title.removeprefix("# "), "text": body}) + "\n")
    with open(folder / "queries.jsonl", "w") as fh:
        for query_id, (text, _) in QUERIES.items():
            fh.write(json.dumps({"_id": query_id, "text": text}) + "\n")
    rows = [f"{q}\t{d}\t{g}" for q, (_, key) in QUERIES.items() for d, g in key.items()]
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(rows) + "\n")


def test_labels_you_already_have_give_verdicts_under_their_declaration(shell):
    write_beir_folder(shell.cwd.parent / "mybeir")
    ran = shell.run("labels/beir", timeout=3600)
    assert "declared positives-only" in ran.output
    assert "COVERAGE-CONFOUNDED" not in ran.output and "gate: " in ran.output
    assert "not a question here: positives-only judgments" in ran.output  # the caveat, once per comparison
    metrics = json.loads((shell.cwd / "reports" / "mybeir" / "metrics.json").read_text())
    assert metrics["contract"]["completeness"] == "positives-only"
    assert not any(m.startswith(("judged@", "bpref")) for m in metrics["contract"]["metrics"])
    assert all(not c["condensed"] for c in metrics["configs"].values())
