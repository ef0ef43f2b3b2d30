"""Journey: your corpus is too big to pool (docs/how-to/too-big-to-pool.md), in one fresh clone.

The own-corpus tutorial's dataset and small grid first (its own blocks: tutorial/init, validate,
runs; the corpus, queries and answer key are tests/journeys/test_docs_steps.py's), then the how-to's
blocks exactly as written: a 30% stratified sample of the grid's unjudged top 10 drawn with a seed,
graded from the user's answer key as a spreadsheet is filled (the pool file shows no system, score
or rank, so neither does the grading), imported (the version declares ``sampled`` and holds the
design), scored (inferred infNDCG@10 and infAP) and compared, with the sample's caveat, which report.md
opens with too.
"""

from __future__ import annotations

import json
import re

import pytest
import yaml

from journeys.test_docs_steps import grade_pool, write_corpus, write_queries_and_rubric
from support.journey import Shell, fresh_clone, newcomer_environment


@pytest.fixture(scope="module")
def shell(tmp_path_factory) -> Shell:
    root = tmp_path_factory.mktemp("sampled")
    clone = fresh_clone(root / "releval")
    user = Shell(clone, root / "logs", newcomer_environment())
    user.run_text("setup", "make setup && source .venv/bin/activate", timeout=3600)  # the README's install
    return user


def test_a_small_grid_of_the_own_corpus_tutorial(shell):
    write_corpus(shell.cwd / "data" / "helpdesk" / "corpus.jsonl")
    shell.run("tutorial/init")
    write_queries_and_rubric(shell.cwd)
    shell.run("tutorial/validate")
    ran = shell.run("tutorial/runs", expect=None, timeout=3600)
    assert "there are no judgments" in ran.output, ran.tail()  # v1 is empty: score waits for judgments
    assert (shell.cwd / "data" / "work" / "runs" / "bm25" / "c256" / "run.parquet").is_file()


def test_sample_the_pool(shell):
    ran = shell.run("sampled/draw")
    drawn = re.search(r"sample: (\d+) of (\d+) unjudged \(query, document\) pairs", ran.output)
    assert drawn, ran.tail()
    sampled, frame = int(drawn[1]), int(drawn[2])
    assert 0 < sampled < frame
    design = json.loads((shell.cwd / "sample" / "sample.json").read_text())
    assert design["seed"] == 1 and design["k"] == 10 and design["source"]["pool_file"] == "pool.csv"
    assert sum(len(q["sampled"]) for q in design["queries"]) == sampled
    assert grade_pool(shell.cwd / "sample" / "pool.csv") == sampled


def test_import_the_graded_sample(shell):
    ran = shell.run("sampled/import")
    assert "declared sampled:" in ran.output, ran.tail()
    version = shell.cwd / "data" / "helpdesk" / "judgments" / "v1"
    manifest = yaml.safe_load((version / "manifest.yaml").read_text())
    assert manifest["completeness"]["kind"] == "sampled" and manifest["completeness"]["sample"]["seed"] == 1
    assert (version / "sample.json").read_bytes() == (shell.cwd / "sample" / "sample.json").read_bytes()


def test_score_and_read_the_inferred_intervals(shell):
    ran = shell.run("sampled/score", timeout=3600)
    assert "1. candidate wordllama/c256 vs baseline bm25/c256" in ran.output, ran.tail()
    assert re.search(r"4\. result: infndcg@10 [\d.]+ → [\d.]+, Δ [+-][\d.]+, 95% CI \[", ran.output), ran.tail()
    assert "7. sampled judgments: the figures are estimates from a sample of" in ran.output
    assert "coverage-confounded" not in ran.output.lower()
    metrics = json.loads((shell.cwd / "reports" / "helpdesk" / "metrics.json").read_text())
    contract = metrics["contract"]
    assert contract["completeness"] == "sampled" and contract["inferred"] == ["infndcg@10", "infap"]
    assert "judged@10" not in contract["metrics"]
    for figures in metrics["configs"].values():
        low, high = figures["inferred"]["infndcg@10"]["interval"]
        assert low <= high and figures["inferred"]["infndcg@10"]["mean"] == figures["infndcg@10"]
    # The report stage of the same `dvc repro`: its conclusion on infNDCG@10, opening with the sample's caveat.
    report = (shell.cwd / "reports" / "helpdesk" / "report.md").read_text()
    opening = report.split("## Grid")[0]
    assert "**Conclusion** (infndcg@10, " in opening, opening
    assert "Sampled judgments: the figures are estimates from a sample of" in opening
    assert "| configuration | infndcg@10 [95% CI] | infap |" in report
