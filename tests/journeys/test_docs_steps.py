"""The docs' command blocks that the other journeys do not run, in one fresh clone (`make test-journeys`):
shrinking and growing the grid (docs/how-to/grid.md), then the own-corpus tutorial's file route
(docs/tutorials/own-corpus.md): a JSONL corpus, queries, a small grid built, the judging debt
exported to a pool file, graded as a user fills a spreadsheet, imported, scored and compared.

The corpus is text nobody here wrote: the pydoc pages of 30 standard-library modules of the running
Python, one JSONL line each. The user's answer key grades the module that does what the query asks
3, a module that helps 1, everything else 0; the grades go into the exported pool file, which shows
no system, score or rank, so neither does the grading. The grid is WordLlama (a static model:
no transformer pass), BM25 and their fusion, so the journey's encoding costs seconds.
"""

from __future__ import annotations

import csv
import importlib
import json
import pydoc
import re
import subprocess

import pytest
import yaml

from support.journey import Shell, fresh_clone, newcomer_environment

MODULES = (
    "argparse", "json", "csv", "logging", "pathlib", "datetime", "collections", "itertools", "functools",
    "subprocess", "shutil", "tempfile", "hashlib", "sqlite3", "unittest", "heapq", "bisect", "textwrap",
    "difflib", "zipfile", "gzip", "statistics", "random", "decimal", "re", "struct", "pickle", "copy",
    "pprint", "uuid",
)  # fmt: skip
PAGE_CHARS = 3000

# query -> (text, {module: grade}): what the user knows answers it (3) or helps (1); every other page is 0.
QUERIES = {
    "q01": ("parse command line options and arguments", {"argparse": 3}),
    "q02": ("read and write comma separated files", {"csv": 3}),
    "q03": ("run an external program and capture its output", {"subprocess": 3, "shutil": 1}),
    "q04": ("compute a sha256 digest of some bytes", {"hashlib": 3}),
    "q05": ("a priority queue with push and pop", {"heapq": 3, "bisect": 1}),
    "q06": ("compare two sequences of lines and show the differences", {"difflib": 3}),
    "q07": ("serialize python objects to a byte stream", {"pickle": 3, "struct": 1, "json": 1}),
    "q08": ("match text against a regular expression pattern", {"re": 3}),
    "q09": ("mean median and standard deviation of numbers", {"statistics": 3}),
}
MUST_NEVER_BREAK = {"q03"}
HOLDOUT = {"q09"}


def write_corpus(path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        for name in MODULES:
            text = pydoc.plain(pydoc.render_doc(importlib.import_module(name), renderer=pydoc.plaintext))
            fh.write(json.dumps({"_id": name, "title": f"{name} module", "text": text[:PAGE_CHARS]}) + "\n")
    return len(MODULES)


def write_queries_and_rubric(project) -> None:
    rows = []
    for query_id, (text, _) in QUERIES.items():
        row = {"query_id": query_id, "text": text, "split": "holdout" if query_id in HOLDOUT else "dev"}
        if query_id in MUST_NEVER_BREAK:
            row["must_never_break"] = True
        rows.append(json.dumps(row))
    (project / "data" / "helpdesk" / "queries.jsonl").write_text("\n".join(rows) + "\n")
    (project / "data" / "helpdesk" / "judgments" / "RUBRIC.md").write_text(
        "# Rubric\n\nGrade what a developer can do with the module's page for the query.\n\n"
        "- **3**: the module does what the query asks.\n- **1**: it helps with part of it.\n"
        "- **0**: it does not help.\n"
    )


def grade_pool(path) -> int:
    """Fill the pool file's grade column from the answer key, as a user does in a spreadsheet."""
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    for row in rows:
        row["grade"] = str(QUERIES[row["query_id"]][1].get(row["doc_id"], 0))
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return len(rows)


def params(shell: Shell) -> dict:
    return yaml.safe_load((shell.cwd / "params.yaml").read_text())


@pytest.fixture(scope="module")
def shell(tmp_path_factory) -> Shell:
    root = tmp_path_factory.mktemp("docs-steps")
    clone = fresh_clone(root / "releval")
    user = Shell(clone, root / "logs", newcomer_environment())
    user.run_text("setup", "make setup && source .venv/bin/activate", timeout=3600)  # the README's install
    return user


# --------------------------------------------------------------------------- docs/how-to/grid.md


def test_shrink_the_grid(shell):
    ran = shell.run("grid/shrink")
    assert "dropped grid.fused.splade_minilm" in ran.output, ran.tail()
    grid = params(shell)["grid"]
    assert (grid["models"], grid["chunkings"], grid["fused"], grid["reranked"]) == (
        ["minilm", "wordllama"],
        ["c256"],
        {},
        {},
    )


def test_grow_the_grid(shell):
    ran = shell.run("grid/grow")
    assert "wrote params.yaml from conf/\n" in ran.output, ran.tail()  # the reset: conf/ alone
    composed = params(shell)
    grid = composed["grid"]
    assert grid["fusions"] == ["rrf", "wrrf"] and "wrrf" in composed["fusions"]
    assert grid["chunkings"] == ["c256", "c512", "c1024"]
    assert grid["models"] == ["minilm", "e5small", "splade", "wordllama", "minilm_l3"]  # the reset brought them back
    assert list(grid["fused"]) == ["splade_minilm"] and list(grid["reranked"]) == ["minilm-c256-e5"]
    shell.run_text("reset after the grid how-to", "releval params --reset")  # the tutorial starts from conf/


# --------------------------------------------------------------------------- docs/tutorials/own-corpus.md


def test_start_a_dataset_from_a_jsonl_corpus(shell):
    documents = write_corpus(shell.cwd / "data" / "helpdesk" / "corpus.jsonl")
    ran = shell.run("tutorial/init")
    assert f"corpus data/helpdesk/corpus.jsonl: {documents} documents" in ran.output, ran.tail()
    assert (shell.cwd / "conf" / "dataset" / "helpdesk.yaml").is_file()
    assert (shell.cwd / "data" / "helpdesk" / "judgments" / "v1" / "manifest.yaml").is_file()
    write_queries_and_rubric(shell.cwd)


def test_validate_the_queries_and_rubric(shell):
    ran = shell.run("tutorial/validate")
    assert re.search(r"ok: dataset helpdesk .*9 queries \(8 dev, 1 holdout\)", ran.output), ran.tail()


def test_build_every_run_of_a_small_grid(shell):
    ran = shell.run("tutorial/runs", expect=None, timeout=3600)
    assert ran.code != 0 and "there are no judgments" in ran.output, ran.tail()
    assert "dropped grid.fused.splade_minilm" in ran.output and "dropped grid.reranked.minilm-c256-e5" in ran.output
    grid = params(shell)["grid"]
    assert (grid["models"], grid["chunkings"], grid["baseline"]) == (["wordllama"], ["c256"], "bm25/c256")
    for run in ("model/wordllama/c256", "bm25/c256", "fused/rrf/wordllama/c256"):
        assert (shell.cwd / "data" / "work" / "runs" / run / "run.parquet").is_file(), run


def test_export_grade_and_import_the_judging_debt(shell):
    ran = shell.run("tutorial/pool")
    debt = re.search(r"total: (\d+) distinct pairs", ran.output)
    assert debt and int(debt[1]) > 0, ran.tail()
    graded = grade_pool(shell.cwd / "pool.csv")
    assert graded == int(debt[1])
    ran = shell.run("tutorial/import")
    assert f"import: {graded} judgments added to v1" in ran.output, ran.tail()
    rows = (shell.cwd / "data" / "helpdesk" / "judgments" / "v1" / "judgments.jsonl").read_text().splitlines()
    assert len(rows) == graded and all(json.loads(row)["annotator"] == "you" for row in rows)


def test_score_and_compare(shell):
    ran = shell.run("tutorial/score", timeout=3600)
    assert "total: 0 distinct pairs" in ran.output, ran.tail()  # the debt is paid
    assert "vs baseline bm25/c256" in ran.output and "coverage-confounded" not in ran.output.lower()
    metrics = json.loads((shell.cwd / "reports" / "helpdesk" / "metrics.json").read_text())
    assert set(metrics["configs"]) == {"bm25/c256", "wordllama/c256", "rrf(wordllama,bm25)/c256"}
    assert (shell.cwd / "reports" / "helpdesk" / "report.md").is_file()
    untouched = subprocess.run(["git", "diff", "--quiet", "--", "reports/metrics.json"], cwd=shell.cwd)
    assert untouched.returncode == 0  # the default dataset's committed reports are not written over
