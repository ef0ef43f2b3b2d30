"""Sampled judging end to end on a constructed collection whose every top-10 pair has a known grade:
`releval pool --sample` (reproducible from its seed, the design's inclusion probabilities recorded),
`releval pool --import` (completeness ``sampled``, the design inside the version), the score stage's
inferred figures (equal to measurement.inferred's own computation) and `releval compare` / `releval gate`
(a verdict on the inferred primary, with the sample's caveat; sampled against pooled refused)."""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml

from releval.cli import main
from releval.judging import sample as sampling
from releval.judging.judgments import Manifest, load_version, set_provenance
from releval.measurement import inferred, scoring
from releval.measurement.metrics import Contract, contract_from_params
from releval.measurement.pair import NotComparable, compare_sides, config_side
from releval.retrieval import runs
from support.projects import declare_dataset

N_QUERIES, N_DOCS, DEPTH = 40, 120, 10
CONFIGS = {"bm25/c256": ("bm25", "c256"), "good/c256": ("model/good", "c256"), "poor/c256": ("model/poor", "c256")}
SKILL = {"bm25/c256": 1.0, "good/c256": 2.5, "poor/c256": 0.3}  # how strongly a run's scores follow the grades
METRIC = {
    "metrics": ["ndcg@10", "map", "recall@20", "judged@10", "bpref"],
    "primary": "ndcg@10",
    "gain": "exponential",
    "ties": "docid-asc",
    "rel_threshold": 1,
    "no_relevant": "exclude",
    "collapse": "first",
    "coverage": {"min_judged": 0.9, "max_judged_gap": 0.05},
}
GRID = {"models": ["good", "poor"], "chunkings": ["c256"], "fusions": [], "baseline": "bm25/c256"}


def truth() -> dict[tuple[str, str], int]:
    """Every (query, document) grade: a few relevant documents per query, the rest 0."""
    rng = np.random.default_rng(11)
    grades = {}
    for q in range(N_QUERIES):
        relevant = rng.choice(N_DOCS, size=6, replace=False)
        for i, d in enumerate(relevant):
            grades[(f"q{q:02d}", f"d{d:03d}")] = [3, 2, 2, 1, 1, 1][i]
    return grades


def write_collection(root: Path) -> dict[tuple[str, str], int]:
    grades = truth()
    declare_dataset(root, "sampled", "data/corpus.jsonl.gz", "data/queries.jsonl")
    data = root / "data"
    (data / "judgments" / "v1").mkdir(parents=True)
    queries = [{"query_id": f"q{q:02d}", "text": f"question {q}", "split": "dev"} for q in range(N_QUERIES)]
    (data / "queries.jsonl").write_text("".join(json.dumps(row) + "\n" for row in queries))
    pl.DataFrame(queries).write_parquet(data / "queries.parquet")
    docs = [{"_id": f"d{d:03d}", "title": f"Doc {d}", "text": f"text of document {d}"} for d in range(N_DOCS)]
    corpus = "".join(json.dumps(row) + "\n" for row in docs)
    (data / "corpus.jsonl.gz").write_bytes(gzip.compress(corpus.encode(), mtime=0))
    pl.DataFrame({"doc_id": [d["_id"] for d in docs], "title": [d["title"] for d in docs]}).with_columns(
        text=pl.col("title")
    ).write_parquet(data / "docs.parquet")
    (data / "judgments" / "RUBRIC.md").write_text("rubric\n")
    (data / "judgments" / "v1" / "judgments.jsonl").write_bytes(b"")
    manifest = Manifest(
        "v1",
        None,
        "2026-12-01",
        {0: "no", 1: "partly", 2: "mostly", 3: "yes"},
        "../RUBRIC.md",
        ("ann",),
        hashlib.sha256(b"").hexdigest(),
        dataset="sampled",
    )
    (data / "judgments" / "v1" / "manifest.yaml").write_text(manifest.to_yaml())
    rng = np.random.default_rng(5)
    for config_id, (folder, chunking) in CONFIGS.items():
        rows = []
        for q in range(N_QUERIES):
            qid = f"q{q:02d}"
            score = np.array([SKILL[config_id] * grades.get((qid, f"d{d:03d}"), 0) for d in range(N_DOCS)])
            score = score + rng.normal(0, 1.5, N_DOCS)
            top = np.argsort(-score, kind="stable")[:20]
            for rank, d in enumerate(top, start=1):
                rows.append((qid, f"d{d:03d}#0", f"d{d:03d}", float(score[d]), rank))
        run = pl.DataFrame(rows, schema=["query_id", "chunk_id", "doc_id", "score", "rank"], orient="row")
        runs.write_run(
            data / "work" / "runs" / folder / chunking,
            run,
            {"config_id": config_id, "ops": {}, "models": {}, "inputs": {}},
        )
    return grades


@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> tuple[Path, dict[tuple[str, str], int]]:
    monkeypatch.chdir(tmp_path)
    return tmp_path, write_collection(tmp_path)


def draw(out: str, size: str = "0.2", seed: str = "7") -> int:
    return main(
        [
            "pool", "--runs", "data/work/runs", "--queries", "data/queries.jsonl", "--corpus", "data/corpus.jsonl.gz",
            "--judgments", "data/judgments/v1", "--sample", size, "--seed", seed, "--out", out,
        ]
    )  # fmt: skip


def grade(path: Path, grades: dict[tuple[str, str], int]) -> int:
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    for row in rows:
        row["grade"] = str(grades.get((row["query_id"], row["doc_id"]), 0))
        row["annotator"] = "ann"
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return len(rows)


def test_the_sample_is_reproducible_from_its_seed_and_records_the_design(project, capsys):
    root, _ = project
    assert draw("a/pool.csv") == 0
    assert "sample: " in capsys.readouterr().out
    assert draw("b/pool.csv") == 0
    assert draw("c/pool.csv", seed="8") == 0
    first, again, other = ((root / f / "pool.csv").read_bytes() for f in "abc")
    assert first == again and first != other
    record = json.loads((root / "a" / "sample.json").read_text())
    assert record == {**json.loads((root / "b" / "sample.json").read_text()), "source": record["source"]}
    assert record["seed"] == 7 and record["k"] == DEPTH and record["source"]["pool_file"] == "pool.csv"
    assert record["source"]["depth"] == DEPTH and len(record["source"]["runs"]) == 3
    design, _, _ = sampling.read_design(root / "a" / "sample.json")
    # The pool file holds exactly the sampled pairs, blind (no rank, score or run).
    with open(root / "a" / "pool.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert {(r["query_id"], r["doc_id"]) for r in rows} == {(q.query_id, d) for q in design.queries for d in q.sampled}
    assert "rank" not in rows[0] and "score" not in rows[0]
    # The recorded inclusion probabilities are the design's: the frame redrawn from the runs gives the same
    # strata, cell sizes and sample, and every pair's probability is its cell's n_h / N_h.
    frame_runs = {}
    for folder in runs.find_runs(root / "data" / "work" / "runs"):
        chunk_run, meta = runs.read_run(folder)
        frame_runs[meta["config_id"]] = scoring.document_run(chunk_run).select("query_id", "doc_id", "score")
    redrawn = inferred.draw_sample(inferred.sampling_frame(frame_runs, DEPTH), 0.2, 7)
    assert redrawn.to_dict() == {k: v for k, v in record.items() if k != "source"}
    pairs = design.pairs()
    for query in design.queries:
        expected = (
            np.array(query.size, float)[list(query.stratum)] / np.array(query.population, float)[list(query.stratum)]
        )
        got = pairs.filter(pl.col("query_id") == query.query_id)["inclusion_probability"].to_numpy()
        assert np.array_equal(got, expected)
    assert design.strata == ((1, 1), (2, 3), (4, 10)) and 0.19 < design.sample_size / design.frame_size < 0.3


def sampled_version(root: Path, grades, capsys) -> Path:
    assert draw("s/pool.csv") == 0
    grade(root / "s" / "pool.csv", grades)
    code = main(["pool", "--import", "s/pool.csv", "--into", "data/judgments/v2", "--parent", "data/judgments/v1"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "declared sampled:" in out
    return root / "data" / "judgments" / "v2"


def test_import_records_completeness_sampled_and_the_design(project, capsys):
    root, grades = project
    version = sampled_version(root, grades, capsys)
    manifest = yaml.safe_load((version / "manifest.yaml").read_text())
    design_bytes = (root / "s" / "sample.json").read_bytes()
    assert (version / "sample.json").read_bytes() == design_bytes
    design, _, _ = sampling.read_design(version / "sample.json")
    assert manifest["completeness"] == {
        "kind": "sampled",
        "depth": DEPTH,
        "systems": sorted(CONFIGS),
        "sample": {
            "file": "sample.json",
            "sha256": hashlib.sha256(design_bytes).hexdigest(),
            "pairs": design.sample_size,
            "frame": design.frame_size,
            "rate": round(design.sample_size / design.frame_size, 6),
            "seed": 7,
        },
    }
    assert load_version(version).manifest.completeness.sampled


def test_an_incompletely_graded_sample_is_refused(project, capsys):
    root, grades = project
    assert draw("s/pool.csv") == 0
    grade(root / "s" / "pool.csv", grades)
    lines = (root / "s" / "pool.csv").read_text().splitlines()
    (root / "s" / "pool.csv").write_text("\n".join(lines[:-1]) + "\n")
    code = main(["pool", "--import", "s/pool.csv", "--into", "data/judgments/v2", "--parent", "data/judgments/v1"])
    out = capsys.readouterr().out
    assert code == 1 and "1 of the" in out and "sampled pairs have no grade" in out
    assert not (root / "data" / "judgments" / "v2").exists()


def score_version(root: Path, version: Path) -> scoring.ScoredGrid:
    judgment_set = load_version(version)
    meta = {"version": judgment_set.version, **set_provenance(judgment_set)}
    (root / "judgments.json").write_text(json.dumps(meta))
    judgment_set.qrels().write_parquet(root / "qrels.parquet")
    params = {
        "metric": METRIC,
        "grid": GRID,
        "judgments": {"path": str(version), "format": "releval", "version": judgment_set.version},
        "dataset": {"name": "sampled"},
    }
    return scoring.score_grid(
        params,
        runs_root="data/work/runs",
        qrels=root / "qrels.parquet",
        judgments_meta=root / "judgments.json",
        queries="data/queries.parquet",
        docs="data/docs.parquet",
        split="dev",
        holdout_log=root / "holdout.log",
        command=["test"],
        titles=None,
    )


def sides(grid: scoring.ScoredGrid) -> dict[str, object]:
    contract = grid.document["contract"]
    return {cid: config_side(grid.per_query, cid, contract, "test") for cid in CONFIGS}


def test_scoring_infers_the_metrics_and_compare_decides_on_the_inferred_primary(project, capsys):
    root, grades = project
    version = sampled_version(root, grades, capsys)
    grid = score_version(root, version)
    contract = grid.document["contract"]
    assert contract["completeness"] == "sampled" and contract["primary"] == "ndcg@10"
    assert "judged@10" not in contract["metrics"] and "bpref" not in contract["metrics"]
    assert contract["inferred"] == ["infndcg@10", "infap"]
    assert contract["sample"]["seed"] == 7 and contract["sample"]["pairs"] > 0
    # The stored estimates are measurement.inferred's, computed directly from the design and the judgments.
    design, _, _ = sampling.read_design(version / "sample.json")
    doc_runs = {s.config_id: s.document_run for _, s in grid.runs}
    direct = inferred.infer(
        design, load_version(version).qrels(), doc_runs, ["infndcg@10", "infap"], contract_from_params(METRIC),
        baseline="bm25/c256", n_resamples=10_000, seed=0,
    )  # fmt: skip
    for c, cid in enumerate(direct.configurations):
        stored = grid.document["configs"][cid]
        assert stored["infndcg@10"] == pytest.approx(direct.mean["infndcg@10"][c], abs=1e-12)
        assert stored["inferred"]["infap"]["mean"] == pytest.approx(direct.mean["infap"][c], abs=1e-12)
        per_query = grid.per_query.filter(pl.col("config_id") == cid).sort("query_id")
        assert np.allclose(per_query["infndcg@10"].to_numpy(), direct.per_query["infndcg@10"][:, c])
    # Against the fully judged truth: the estimate is near it (a 40-query constructed case).
    full = pl.DataFrame(
        [(q, d, g) for (q, d), g in grades.items()], schema=["query_id", "doc_id", "grade"], orient="row"
    )
    for cid, run in doc_runs.items():
        truth_ndcg = scoring.score(
            run, scoring.scored_queries(pl.read_parquet("data/queries.parquet"), full), ["ndcg@10"], Contract()
        ).mean["ndcg@10"]
        assert abs(grid.document["configs"][cid]["infndcg@10"] - truth_ndcg) < 0.1
    # compare: a verdict on infndcg@10, whose paired interval is inferred's interval (b) over queries.
    both = sides(grid)
    report = compare_sides(both["bm25/c256"], both["good/c256"], contract["primary"])
    assert report.metric == "infndcg@10"  # the primary decided on its inferred form
    (expected,) = [x for x in direct.comparisons if x.candidate == "good/c256" and x.metric == "infndcg@10"]
    assert report.primary.bootstrap_ci == pytest.approx(expected.query_interval, abs=1e-12)
    assert report.primary.verdict == "improvement" and report.coverage is None
    assert report.sample_caveat is not None and f"sample of {design.sample_size} judged pairs" in report.sample_caveat
    from releval.reporting.gate_text import render_gate
    from releval.reporting.pair_text import pair_to_dict, render_pair
    from releval.measurement.gate import gate_decision

    text = render_pair(report)
    assert "→ IMPROVEMENT" in text and "7. sampled judgments: the figures are estimates from a sample of" in text
    assert pair_to_dict(report)["sample"]["seed"] == 7
    result = gate_decision(compare_sides(both["good/c256"], both["poor/c256"], contract["primary"]), [], 3)
    assert result.code == 1 and "sampled judgments: the figures are estimates" in render_gate(result)


def test_sampled_against_pooled_is_refused_naming_both(project, capsys):
    root, grades = project
    version = sampled_version(root, grades, capsys)
    sampled = sides(score_version(root, version))
    pooled_contract = {**sampled["bm25/c256"].contract, "completeness": "pooled"}
    pooled_contract.pop("sample")
    pooled = config_side(
        pl.concat([sampled["good/c256"].per_query.with_columns(config_id=pl.lit("x"))]).select(
            "config_id", pl.exclude("config_id")
        ),
        "x",
        pooled_contract,
        "pooled",
    )
    with pytest.raises(NotComparable) as refused:
        compare_sides(sampled["bm25/c256"], pooled, "infndcg@10")
    message = str(refused.value)
    assert "completeness: baseline 'sampled', candidate 'pooled'" in message
