"""The run archive (releval.provenance.archive, stages/archive.py), re-scoring (stages/rescore.py) and
`releval archive` -- pure logic, a hand-checked history/IDCG example, and one real DVC project."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml

from support import ROOT
from support.commands import ran_stages, run
from support.projects import make_project
from support.pydocs_mini import MINI_DATASET, write_pydocs_mini
from releval.provenance import archive as ar
from releval.provenance import revisions
from releval.judging import judgments as jm
from releval.retrieval import runs

INV_LOG2_3 = 0.6309297535714575  # 1 / log2(3): the discount at rank 2
INV_LOG2_4 = 0.5  # 1 / log2(4): the discount at rank 3
PYTHON = sys.executable


# --------------------------------------------------------------------------- helpers


def run_table(rows: list[tuple[str, str, float]]) -> pl.DataFrame:
    """A chunk-level run from (query_id, chunk_id, score); doc_id is the chunk id before '#'."""
    frame = pl.DataFrame([(q, c, c.split("#")[0], s, 0) for q, c, s in rows], schema=runs.RUN_SCHEMA, orient="row")
    return runs.rank_by_score(frame)


def run_files(
    tmp: Path, run_path: str, table: pl.DataFrame, meta: dict, out: revisions.StageOut | None = None
) -> ar.RunFiles:
    """The bytes runs.write_run would produce for (table, meta)."""
    folder = tmp / "written" / run_path
    runs.write_run(folder, table, meta)
    return ar.RunFiles(run_path, (folder / "run.parquet").read_bytes(), (folder / "run.json").read_bytes(), out)


def dense_meta(model="toy", chunking="c1", **extra) -> dict:
    return {
        "config_id": runs.dense_id(model, chunking),
        "kind": "dense",
        "model": model,
        "chunking": chunking,
        "inputs": [],
        "ops": {},
        "models": {model: {"revision": "r1"}},
        "queries": 2,
        **extra,
    }


def git_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for cmd in (
        ["git", "init", "-q"],
        ["git", "config", "user.email", "t@releval.local"],
        ["git", "config", "user.name", "releval tests"],
    ):
        subprocess.run(cmd, cwd=path, check=True, capture_output=True)
    return path


def commit_all(path: Path, message: str) -> str:
    subprocess.run(["git", "add", "-A"], cwd=path, check=True, capture_output=True)
    subprocess.run(["git", "commit", "-qm", message], cwd=path, check=True, capture_output=True)
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=path, check=True, capture_output=True, text=True
    ).stdout.strip()


PROVENANCE = ar.Provenance(commit="a" * 40, dirty=False, source="workspace", commit_date="2026-01-02T03:04:05+00:00")


# --------------------------------------------------------------------------- pure archive logic


def test_add_stores_files_by_content_hash_and_indexes_them(tmp_path):
    table = run_table([("q1", "d1#0-5", 0.9), ("q1", "d2#0-5", 0.5), ("q1", "d1#5-9", 0.4)])
    out = revisions.StageOut(
        "retrieve@toy-c1", "data/work/runs/model/toy/c1", "abc.dir", {"params.yaml": {"models.toy": {"batch_size": 8}}}
    )
    item = run_files(tmp_path, "data/work/runs/model/toy/c1", table, dense_meta(), out)
    store = ar.Archive(tmp_path / "archive")
    report = store.add([item], PROVENANCE, dataset="tiny", archived_at="2026-02-03T00:00:00Z")
    assert report.added == [(item.run_sha256, "toy/c1")] and report.present == []

    run_sha = hashlib.sha256(item.run_bytes).hexdigest()
    meta_sha = hashlib.sha256(item.meta_bytes).hexdigest()
    (docs_file,) = (store.root / "docs").iterdir()
    docs_sha = hashlib.sha256(docs_file.read_bytes()).hexdigest()
    assert docs_file.name == f"{docs_sha}.parquet"
    assert (store.root / "meta" / f"{meta_sha}.json").read_bytes() == item.meta_bytes
    (part,) = store.index_parts()
    assert part.name == f"{hashlib.sha256(part.read_bytes()).hexdigest()}.parquet"
    assert (store.root / "README.md").read_text() == ar.README_TEXT
    assert report.bytes_added == sum(p.stat().st_size for p in (docs_file, part, store.meta_file(meta_sha)))
    index = store.index()
    assert index.schema == ar.INDEX_SCHEMA and index.height == 1
    row = index.row(0, named=True)
    assert row == {
        "run_sha256": run_sha,
        "config_id": "toy/c1",
        "docs_sha256": docs_sha,
        "meta_sha256": meta_sha,
        "kind": "dense",
        "chunking": "c1",
        "models": ["toy"],
        "dataset": "tiny",
        "run_path": "data/work/runs/model/toy/c1",
        "rows": 3,
        "depth": None,
        "doc_rows": 2,
        "stage": "retrieve@toy-c1",
        "params_digest": hashlib.sha256(b'{"params.yaml":{"models.toy":{"batch_size":8}}}').hexdigest(),
        "params_json": '{"params.yaml":{"models.toy":{"batch_size":8}}}',
        "dvc_out_md5": "abc.dir",
        "commit": "a" * 40,
        "commit_date": "2026-01-02T03:04:05+00:00",
        "dirty": False,
        "dirty_paths": [],
        "source": "workspace",
        "archived_at": "2026-02-03T00:00:00Z",
    }
    # The run at document level: each document at its best chunk, scores as they were.
    assert store.read_documents(docs_sha).rows() == [("q1", "d1", 0.9), ("q1", "d2", 0.5)]
    assert store.read_meta(meta_sha)["config_id"] == "toy/c1"
    assert store.entry(run_sha, "toy/c1")["docs_sha256"] == docs_sha and store.entry(run_sha, "x") is None


def test_adding_again_is_a_no_op_and_nothing_is_rewritten(tmp_path):
    first = run_files(tmp_path, "data/work/runs/model/toy/c1", run_table([("q1", "d1#0-5", 0.9)]), dense_meta())
    store = ar.Archive(tmp_path / "archive")
    store.add([first], PROVENANCE, dataset="tiny", archived_at="2026-02-03T00:00:00Z")
    (part,) = store.index_parts()
    part_stat = part.stat()
    files = {p: p.read_bytes() for p in store.root.rglob("*") if p.is_file()}

    # The same run again, even with other provenance and a sidecar whose ops differ: the first record stays.
    again = run_files(
        tmp_path / "2",
        "data/work/runs/model/toy/c1",
        run_table([("q1", "d1#0-5", 0.9)]),
        dense_meta(ops={"latency_ms_p50": 3.0}),
    )
    assert again.run_sha256 == first.run_sha256 and again.meta_sha256 != first.meta_sha256
    report = store.add(
        [again],
        ar.Provenance(commit="b" * 40, dirty=True, dirty_paths=("params.yaml",)),
        dataset="tiny",
        archived_at="2027-01-01T00:00:00Z",
    )
    assert report.added == [] and report.present == [(first.run_sha256, "toy/c1")] and report.bytes_added == 0
    assert store.index_parts() == [part]
    assert part.stat().st_mtime_ns == part_stat.st_mtime_ns  # not even rewritten identically
    assert {p: p.read_bytes() for p in store.root.rglob("*") if p.is_file()} == files

    # A new run is appended; the existing row and files stay byte for byte.
    other = run_files(
        tmp_path / "3",
        "data/work/runs/bm25/c1",
        run_table([("q1", "d2#0-5", 1.0)]),
        {"config_id": "bm25/c1", "kind": "bm25", "chunking": "c1", "models": {}, "ops": {}},
    )
    store.add([other], PROVENANCE, dataset="tiny", archived_at="2027-01-01T00:00:00Z")
    index = store.index()
    assert index.height == 2 and index.row(0, named=True)["archived_at"] == "2026-02-03T00:00:00Z"
    assert len(store.index_parts()) == 2  # a new part beside the first; no file is rewritten
    assert all(p.read_bytes() == data for p, data in files.items())
    assert not list(store.root.rglob(".releval-tmp-*"))


def test_one_run_table_under_two_configurations_is_stored_once(tmp_path):
    """The same model under two names gives byte-identical runs but two sidecars: two entries, one file."""
    table = run_table([("q1", "d1#0-5", 0.9), ("q1", "d2#0-5", 0.5)])
    a = run_files(tmp_path / "a", "data/work/runs/model/toy/c1", table, dense_meta("toy"))
    b = run_files(tmp_path / "b", "data/work/runs/model/toy_b/c1", table, dense_meta("toy_b"))
    assert a.run_sha256 == b.run_sha256
    store = ar.Archive(tmp_path / "archive")
    report = store.add([a, b, a], PROVENANCE, dataset="tiny")
    assert sorted(c for _, c in report.added) == ["toy/c1", "toy_b/c1"] and len(report.present) == 1
    assert len(list((store.root / "docs").iterdir())) == 1
    assert len(list((store.root / "meta").iterdir())) == 2
    assert sorted(store.index()["config_id"].to_list()) == ["toy/c1", "toy_b/c1"]


def test_an_edited_archive_is_caught(tmp_path):
    item = run_files(tmp_path, "data/work/runs/model/toy/c1", run_table([("q1", "d1#0-5", 0.9)]), dense_meta())
    store = ar.Archive(tmp_path / "archive")
    store.add([item], PROVENANCE, dataset="tiny")
    docs_sha = store.index()["docs_sha256"][0]
    path = store.docs_file(docs_sha)
    path.write_bytes(path.read_bytes()[:-1] + b"\0")
    with pytest.raises(ar.InputError, match="does not match"):
        store.read_documents(docs_sha)
    path.unlink()
    with pytest.raises(ar.InputError, match="missing"):
        store.read_documents(docs_sha)


def test_a_run_without_config_id_is_refused(tmp_path):
    item = ar.RunFiles("data/work/runs/x", b"", b'{"kind": "dense"}')
    with pytest.raises(ar.InputError, match="config_id"):
        ar.Archive(tmp_path / "archive").add([item], PROVENANCE, dataset="tiny")
    assert not (tmp_path / "archive" / "docs").exists() and not (tmp_path / "archive" / "index").exists()


# --------------------------------------------------------------------------- the document-level form


def random_chunk_run(seed: int, queries: int = 6, docs: int = 30) -> pl.DataFrame:
    """A chunk-level run with several chunks per document and many exactly tied scores."""
    rng = np.random.default_rng(seed)
    rows = []
    for q in range(queries):
        for d in rng.choice(docs, size=docs // 2 + q, replace=False):
            for c in range(int(rng.integers(1, 4))):
                rows.append((f"q{q}", f"d{d:02d}#{c * 10}-{c * 10 + 10}", float(rng.integers(0, 12)) / 4))
    return run_table(rows)


def random_qrels(seed: int, queries: int = 6, docs: int = 30) -> pl.DataFrame:
    rng = np.random.default_rng(seed + 1000)
    rows = [
        (f"q{q}", f"d{d:02d}", int(rng.integers(0, 4)))
        for q in range(queries)
        for d in rng.choice(docs, size=8, replace=False)
    ]
    return pl.DataFrame(rows, schema={"query_id": pl.Utf8, "doc_id": pl.Utf8, "grade": pl.Int64}, orient="row")


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(
    "metrics,ties",
    [
        (["ndcg@10", "recall@100", "mrr@10", "map", "p@10", "hit@10", "judged@10", "ceiling@10"], "docid-asc"),
        (["ndcg@5", "recall@8", "p@3", "judged@5", "ceiling@5"], "docid-asc"),
        (["ndcg@5", "recall@8", "p@3", "judged@5", "ceiling@5"], "trec_eval"),
        (["rprec", "mrr", "ndcg@3"], "trec_eval"),
    ],
)
def test_a_run_rescored_from_its_document_level_form_gives_the_same_numbers(tmp_path, seed, metrics, ties):
    from releval.measurement import scoring
    from releval.measurement.metrics import contract_from_params

    contract = contract_from_params({**METRIC, "metrics": metrics, "ties": ties})
    chunk_run, qrels = random_chunk_run(seed), random_qrels(seed)
    scored = ["q0", "q1", "q2", "q4", "q5"]  # q3 left out, as a holdout query is
    store = ar.Archive(tmp_path / "archive")
    depth = ar.archive_depth(metrics)
    store.add(
        [run_files(tmp_path, "data/work/runs/model/toy/c1", chunk_run, dense_meta())],
        PROVENANCE,
        dataset="tiny",
        depth=depth,
    )
    entry = store.index().row(0, named=True)
    assert entry["depth"] == depth and entry["doc_rows"] <= scoring.document_run(chunk_run).height
    from_chunks = scoring.score_table(scoring.document_run(chunk_run, scored), qrels, metrics, contract)
    from_archive = ar.score_archive(
        store, store.index(), [ar.Judged("v", qrels)], pl.Series(scored), metrics, contract
    )[(entry["run_sha256"], "v")]
    assert from_archive["error"] is None
    assert from_archive["mean"] == from_chunks.mean  # bit for bit
    assert from_archive["counts"]["queries_evaluated"] == from_chunks.counts["queries_evaluated"]


def test_depth_follows_the_metrics_and_keeps_ties_at_the_cut(tmp_path):
    assert ar.archive_depth(["ndcg@10", "recall@100", "mrr@10"]) == 100
    assert ar.archive_depth(["ndcg@10", "map"]) is None  # map reads the whole ranking
    assert ar.archive_depth(["mrr"]) is None and ar.archive_depth(["rprec", "p@5"]) is None
    chunk_run = run_table(
        [("q1", "a#0", 0.9), ("q1", "b#0", 0.8), ("q1", "c#0", 0.5), ("q1", "d#0", 0.5), ("q1", "e#0", 0.1)]
        + [("q1", "a#1", 0.95), ("q2", "x#0", 0.3)]
    )
    kept = ar.document_table(chunk_run, 3)
    assert kept.rows() == [("q1", "a", 0.95), ("q1", "b", 0.8), ("q1", "c", 0.5), ("q1", "d", 0.5), ("q2", "x", 0.3)]
    assert ar.document_table(chunk_run).height == 6
    assert ar.too_shallow(3, ["ndcg@3"]) is None and ar.too_shallow(None, ["map"]) is None
    assert ar.too_shallow(3, ["ndcg@10"]) == "archived to depth 3 (documents per query); the metrics need the top 10"
    assert "every retrieved document" in ar.too_shallow(100, ["map"])

    # A run archived under shallower metrics is not scored under deeper ones: its history row says why.
    store = ar.Archive(tmp_path / "archive")
    store.add(
        [run_files(tmp_path, "data/work/runs/model/toy/c1", chunk_run, dense_meta())],
        PROVENANCE,
        dataset="tiny",
        depth=3,
    )
    qrels = pl.DataFrame({"query_id": ["q1"], "doc_id": ["a"], "grade": [1]})
    from releval.measurement.metrics import contract_from_params

    scores = ar.score_archive(
        store, store.index(), [ar.Judged("v", qrels)], pl.Series(["q1"]), ["map"], contract_from_params(METRIC)
    )
    (result,) = scores.values()
    assert result["mean"] == {"map": None} and "the metrics need every retrieved document" in result["error"]


def test_archives_of_two_branches_merge_by_their_files(tmp_path):
    """Each add is a new index part: two branches' archives merge as a union of files, no conflict."""
    base = ar.Archive(tmp_path / "base")
    common = run_files(
        tmp_path / "c",
        "data/work/runs/bm25/c1",
        run_table([("q1", "d1#0", 1.0)]),
        {"config_id": "bm25/c1", "kind": "bm25", "chunking": "c1", "models": {}, "ops": {}},
    )
    base.add([common], PROVENANCE, dataset="tiny", archived_at="2026-01-01T00:00:00Z")
    branches = []
    for name, score, when in (("a", 0.9, "2026-02-01T00:00:00Z"), ("b", 0.7, "2026-03-01T00:00:00Z")):
        shutil.copytree(base.root, tmp_path / name)
        store = ar.Archive(tmp_path / name)
        mine = run_files(
            tmp_path / name / "w", "data/work/runs/model/toy/c1", run_table([("q1", "d1#0", score)]), dense_meta()
        )
        both = run_files(
            tmp_path / name / "x",
            "data/work/runs/model/toy/c2",
            run_table([("q1", "d2#0", 0.5)]),
            dense_meta(chunking="c2"),
        )
        store.add([mine, both], ar.Provenance(commit=name * 40), dataset="tiny", archived_at=when)
        branches.append(store)
    merged = tmp_path / "merged"
    for store in branches:  # what `git merge` does to two sets of new files: keeps both
        shutil.copytree(store.root, merged, dirs_exist_ok=True)
    index = ar.Archive(merged).index()
    assert index.height == 4  # bm25, toy/c1 twice (two runs), toy/c2 once
    assert sorted(index["config_id"].to_list()) == ["bm25/c1", "toy/c1", "toy/c1", "toy/c2"]
    assert index.filter(pl.col("config_id") == "toy/c2")["commit"].to_list() == ["a" * 40]  # the earlier record


def test_an_archive_of_the_earlier_layout_is_converted_entry_for_entry(tmp_path):
    root = tmp_path / "archive"
    items = [
        run_files(tmp_path / "a", "data/work/runs/model/toy/c1", random_chunk_run(3), dense_meta()),
        run_files(
            tmp_path / "b",
            "data/work/runs/bm25/c1",
            random_chunk_run(4),
            {"config_id": "bm25/c1", "kind": "bm25", "chunking": "c1", "models": {}, "ops": {}},
        ),
    ]
    legacy_schema = {k: v for k, v in ar.INDEX_SCHEMA.items() if k not in ("docs_sha256", "depth", "doc_rows")}
    rows = []
    for item in items:
        (root / "runs").mkdir(parents=True, exist_ok=True)
        (root / "runs" / f"{item.run_sha256}.parquet").write_bytes(item.run_bytes)
        (root / "meta").mkdir(exist_ok=True)
        (root / "meta" / f"{item.meta_sha256}.json").write_bytes(item.meta_bytes)
        rows.append(
            {
                **dict.fromkeys(legacy_schema),
                "run_sha256": item.run_sha256,
                "config_id": item.meta()["config_id"],
                "meta_sha256": item.meta_sha256,
                "models": [],
                "dirty_paths": [],
                "commit": "c" * 40,
                "dirty": False,
                "archived_at": "2025-01-01T00:00:00Z",
                "dataset": "tiny",
            }
        )
    pl.DataFrame(rows, schema=legacy_schema, orient="row").write_parquet(root / "index.parquet")

    store = ar.Archive(root)
    assert store.migrate_legacy(None) == 2 and store.migrate_legacy(None) == 0
    assert not (root / "index.parquet").exists() and not (root / "runs").exists()
    index = store.index()
    assert (
        index.height == 2
        and set(index["commit"]) == {"c" * 40}
        and set(index["archived_at"]) == {"2025-01-01T00:00:00Z"}
    )
    for item in items:
        entry = store.entry(item.run_sha256, item.meta()["config_id"])
        assert store.read_documents(entry["docs_sha256"]).equals(ar.document_table(item.chunk_run()))
        assert store.read_meta(entry["meta_sha256"]) == item.meta()


LOCK = {
    "schema": "2.0",
    "stages": {
        "retrieve@toy-c1": {
            "cmd": "python stages/retrieve.py",
            "params": {"params.yaml": {"retriever.dense": {"top_k": 5}}},
            "outs": [{"path": "data/work/runs/model/toy/c1", "md5": "d1.dir"}],
        },
        "rerank@toy-c1-x": {
            "cmd": "python stages/rerank.py",
            "outs": [{"path": "data/work/runs/rerank/toy-c1-x", "md5": "r1.dir"}],
        },
        "score": {
            "cmd": "python stages/score.py",
            "outs": [{"path": "reports/grid.md", "md5": "g"}, {"path": "data/work/trec", "md5": "t.dir"}],
        },
    },
}


def test_lock_outputs_and_the_stage_that_made_a_run():
    outs = revisions.lock_outs(LOCK, "data/work/runs")
    assert [o.path for o in outs] == ["data/work/runs/model/toy/c1", "data/work/runs/rerank/toy-c1-x"]
    held = ar.producing_out("data/work/runs/model/toy/c1", outs)
    assert held.stage == "retrieve@toy-c1" and held.params == {"params.yaml": {"retriever.dense": {"top_k": 5}}}
    assert ar.producing_out("data/work/runs/rerank/toy-c1-x", outs).md5 == "r1.dir"
    assert ar.producing_out("data/work/runs/model/old/c1", outs) is None
    assert ar.params_digest(None) is None
    assert ar.params_digest({"b": 1, "a": [1, 2]}) == ar.params_digest({"a": [1, 2], "b": 1})


def test_workspace_provenance_is_about_the_inputs(tmp_path):
    repo = git_repo(tmp_path / "repo")
    assert ar.workspace_provenance(repo, LOCK).commit is None  # no commit yet
    (repo / "params.yaml").write_text("a: 1\n")
    (repo / "dvc.lock").write_text("x\n")
    (repo / "reports").mkdir()
    (repo / "reports" / "grid.md").write_text("g\n")
    head = commit_all(repo, "one")
    # What the pipeline writes is no input: dvc.lock, reports/, the committed archive, .gitignore files.
    (repo / "dvc.lock").write_text("y\n")
    (repo / "reports" / "grid.md").write_text("h\n")
    (repo / "data" / "archive" / "index").mkdir(parents=True)
    (repo / "data" / "archive" / "index" / "x.parquet").write_text("p\n")
    (repo / "data" / ".gitignore").write_text("/work\n")
    (repo / "README.md").write_text("notes\n")
    clean = ar.workspace_provenance(repo, LOCK)
    assert clean.commit == head and not clean.dirty and clean.dirty_paths == () and clean.commit_date
    results = commit_all(repo, "results only")
    assert ar.workspace_provenance(repo, LOCK).commit == head != results  # the inputs are still those of `head`
    (repo / "params.yaml").write_text("a: 2\n")
    (repo / "stages").mkdir()
    (repo / "stages" / "new_code.py").write_text("x = 1\n")
    (repo / "data" / "judgments").mkdir()
    (repo / "data" / "judgments" / "j.jsonl").write_text("{}\n")
    dirty = ar.workspace_provenance(repo, LOCK)
    assert dirty.commit == head and dirty.dirty
    assert dirty.dirty_paths == ("data/judgments/j.jsonl", "params.yaml", "stages/new_code.py")


def test_workspace_runs_skip_folders_no_stage_made(tmp_path):
    for rel, cid in (("model/toy/c1", "toy/c1"), ("model/old/c1", "old/c1")):
        runs.write_run(
            tmp_path / "data/work/runs" / rel, run_table([("q1", "d1#0-5", 1.0)]), dense_meta(**{"config_id": cid})
        )
    found, skipped = ar.workspace_runs(tmp_path, "data/work/runs", LOCK)
    assert [f.run_path for f in found] == ["data/work/runs/model/toy/c1"] and found[0].out.stage == "retrieve@toy-c1"
    assert skipped == ["data/work/runs/model/old/c1"]


def test_scored_queries_and_contract_match_the_score_stage():
    from releval.measurement.holdout import select_queries
    from releval.measurement.metrics import contract_from_params

    queries = pl.DataFrame({"query_id": ["q1", "q2", "q3"], "split": ["dev", "dev", "holdout"]})
    assert select_queries(queries, "dev")["query_id"].to_list() == ["q1", "q2"]
    assert select_queries(queries.drop("split"), "dev").height == 3
    contract = contract_from_params(
        {
            "gain": "linear",
            "ties": "trec_eval",
            "rel_threshold": 2,
            "no_relevant": "zero",
            "metrics": ["map"],
            "collapse": "first",
        }
    )
    assert (contract.gain, contract.ties, contract.rel_threshold, contract.no_relevant) == (
        "linear",
        "trec_eval",
        2,
        "zero",
    )
    assert ar.idcg_cutoffs(["ndcg@10", "recall@100", "ceiling@5", "map"]) == [5, 10]
    assert ar.idcg_cutoffs(["recall@100"]) == [10]


def test_list_output(tmp_path):
    store = ar.Archive(tmp_path / "archive")
    assert ar.list_markdown(store.index()) == "the archive is empty\n"
    store.add(
        [run_files(tmp_path, "data/work/runs/model/toy/c1", run_table([("q1", "d1#0-5", 1.0)]), dense_meta())],
        PROVENANCE,
        dataset="tiny",
        archived_at="2026-02-03T00:00:00Z",
    )
    text = ar.list_markdown(store.index())
    assert "toy/c1" in text and "aaaaaaaaaa" in text and "1 entries, 1 distinct runs" in text


# --------------------------------------------------------------------------- hand-checked history and IDCG report

METRIC = {
    "metrics": ["ndcg@10", "recall@100", "mrr@10"],
    "primary": "ndcg@10",
    "gain": "exponential",
    "ties": "docid-asc",
    "rel_threshold": 1,
    "no_relevant": "exclude",
    "collapse": "first",
}


def write_judgment_set(root: Path, version: str, parent: str | None, rows: list[tuple[str, str, int]]) -> Path:
    data = "".join(
        json.dumps({"query_id": q, "doc_id": d, "grade": g, "annotator": "alice"}) + "\n" for q, d, g in rows
    ).encode()
    manifest = jm.Manifest(
        version,
        parent,
        "2026-11-30",
        {0: "not", 1: "partial", 2: "relevant", 3: "highly"},
        "RUBRIC.md",
        ("alice",),
        "0" * 64,
    )
    jm.write_version(root / version, manifest, data, {"RUBRIC.md": b"# grades 0..3\n"})
    return root / version


V1 = [("q1", "d1", 2), ("q1", "d2", 1), ("q2", "d3", 1), ("q3", "d5", 1)]
# v2: q1 gains d4 (grade 3), q2's d3 is regraded 1 -> 2 and d6 is judged 0 (no IDCG effect);
# q3 is a holdout query: its regrade must not appear anywhere.
V2 = [("q1", "d1", 2), ("q1", "d2", 1), ("q1", "d4", 3), ("q2", "d3", 2), ("q2", "d6", 0), ("q3", "d5", 2)]

RUN_A = [
    ("q1", "d2#0-4", 0.9),
    ("q1", "d2#4-8", 0.8),
    ("q1", "d1#0-4", 0.7),
    ("q1", "d4#0-4", 0.6),
    ("q2", "d3#0-4", 0.9),
    ("q2", "d6#0-4", 0.5),
    ("q3", "d5#0-4", 0.9),
]
RUN_B = [
    ("q1", "d4#0-4", 0.9),
    ("q1", "d1#0-4", 0.8),
    ("q2", "d6#0-4", 0.9),
    ("q2", "d3#0-4", 0.1),
    ("q3", "d1#0-4", 0.9),
]

# nDCG@10, exponential gain (2^g - 1), discount 1/log2(rank+1); holdout q3 left out of every mean.
IDCG_V1 = {"q1": 3 + 1 * INV_LOG2_3, "q2": 1.0}
IDCG_V2 = {"q1": 7 + 3 * INV_LOG2_3 + 1 * INV_LOG2_4, "q2": 3.0}
# Run A collapses to q1: d2, d1, d4 (d2's second chunk is dropped); q2: d3, d6.
A_V1 = ((1 + 3 * INV_LOG2_3) / IDCG_V1["q1"] + 1.0) / 2
A_V2 = ((1 + 3 * INV_LOG2_3 + 7 * INV_LOG2_4) / IDCG_V2["q1"] + 3 / 3) / 2
# Run B: q1: d4, d1; q2: d6, d3.
B_V1 = ((3 * INV_LOG2_3) / IDCG_V1["q1"] + (1 * INV_LOG2_3) / 1.0) / 2
B_V2 = ((7 + 3 * INV_LOG2_3) / IDCG_V2["q1"] + (3 * INV_LOG2_3) / 3.0) / 2


def tiny_project(tmp_path: Path, active: str = "v2") -> Path:
    """A project folder as the pipeline leaves it before `rescore`: params, work files, an archive."""
    root = tmp_path / "proj"
    (root / "data" / "work").mkdir(parents=True)
    judgments_root = root / "data" / "judgments"
    write_judgment_set(judgments_root, "v1", None, V1)
    write_judgment_set(judgments_root, "v2", "v1", V2)
    params = {
        "dataset": {"name": "tiny", "subset": {}},
        "judgments": {"version": active, "path": f"data/judgments/{active}", "format": "releval"},
        "metric": METRIC,
    }
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    pl.DataFrame({"doc_id": [f"d{i}" for i in range(1, 7)], "text": ["some text"] * 6}).write_parquet(
        root / "data/work/docs.parquet"
    )
    pl.DataFrame(
        {"query_id": ["q1", "q2", "q3"], "text": ["a", "b", "c"], "split": ["dev", "dev", "holdout"]}
    ).write_parquet(root / "data/work/queries.parquet")
    subprocess.run([PYTHON, str(ROOT / "stages" / "judgments.py")], cwd=root, check=True, capture_output=True)
    store = ar.Archive(root / "data" / "archive")
    store.add(
        [
            run_files(tmp_path, "data/work/runs/model/toy/c1", run_table(RUN_A), dense_meta()),
            run_files(
                tmp_path,
                "data/work/runs/bm25/c1",
                run_table(RUN_B),
                {"config_id": "bm25/c1", "kind": "bm25", "chunking": "c1", "models": {}, "ops": {}},
            ),
        ],
        PROVENANCE,
        dataset="tiny",
        archived_at="2026-02-03T00:00:00Z",
    )
    # A run of another dataset: never scored against this dataset's judgments.
    store.add(
        [
            run_files(
                tmp_path / "o",
                "data/work/runs/bm25/c1",
                run_table([("x1", "y#0-1", 1.0)]),
                {"config_id": "bm25/c1", "kind": "bm25", "chunking": "c1", "models": {}, "ops": {}},
            )
        ],
        PROVENANCE,
        dataset="other",
    )
    return root


def rescore(root: Path) -> subprocess.CompletedProcess:
    result = subprocess.run([PYTHON, str(ROOT / "stages" / "rescore.py")], cwd=root, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result


def test_history_is_every_archived_run_under_the_active_version(tmp_path):
    root = tiny_project(tmp_path)
    rescore(root)
    history = pl.read_parquet(root / "reports" / "history.parquet")
    assert history["judgments_version"].unique().to_list() == ["v2"]
    assert history["config_id"].to_list() == ["toy/c1", "bm25/c1"]  # the other dataset's run is left out
    assert history["ndcg@10"].to_list() == pytest.approx([A_V2, B_V2], abs=1e-12)
    assert history["rank"].to_list() == [1, 2]
    assert history["queries_evaluated"].to_list() == [2, 2]  # holdout q3 sealed
    assert history["commit"].to_list() == ["a" * 40] * 2
    # mrr@10: A has a relevant doc at rank 1 for both queries; B at rank 1 (q1: d4) and 2 (q2: d3).
    assert history["mrr@10"].to_list() == pytest.approx([1.0, 0.75])
    md = (root / "reports" / "history.md").read_text()
    assert md.startswith("# Run history under judgments `v2`")
    assert "regenerated whole for the active version" in md and "never placed in this ranking" in md
    assert f"| 1 | `toy/c1` | {A_V2:.4f} |" in md
    assert "1 archived run(s) of dataset `other` left out" in md
    assert "2 queries scored, 1 holdout queries sealed" in md


def test_idcg_change_report_by_hand(tmp_path):
    root = tiny_project(tmp_path)
    rescore(root)
    changes = pl.read_parquet(root / "reports" / "idcg_changes.parquet")
    assert changes["query_id"].to_list() == ["q1", "q2"]  # q3 is holdout; its regrade is not revealed
    assert changes["k"].to_list() == [10, 10]
    assert changes["old_idcg"].to_list() == pytest.approx([IDCG_V1["q1"], IDCG_V1["q2"]], abs=1e-12)
    assert changes["new_idcg"].to_list() == pytest.approx([IDCG_V2["q1"], IDCG_V2["q2"]], abs=1e-12)
    assert changes["reason"].to_list() == ["added d4 (grade 3)", "regraded d3 1->2"]
    assert changes["docs_added"].to_list() == [["d4"], []]  # d6 is judged 0: no reason
    assert set(changes["parent_version"]) == {"v1"} and set(changes["active_version"]) == {"v2"}

    moved = pl.read_parquet(root / "reports" / "score_changes.parquet").filter(pl.col("metric") == "ndcg@10")
    assert moved["config_id"].to_list() == ["bm25/c1", "toy/c1"]  # by configuration: not a ranking
    assert moved["parent_value"].to_list() == pytest.approx([B_V1, A_V1], abs=1e-12)
    assert moved["active_value"].to_list() == pytest.approx([B_V2, A_V2], abs=1e-12)
    assert moved["change"].to_list() == pytest.approx([B_V2 - B_V1, A_V2 - A_V1], abs=1e-12)

    md = (root / "reports" / "idcg_changes.md").read_text()
    assert md.startswith("# IDCG changes: `v1` → `v2`") and "not a ranking" in md
    assert (
        f"| `q1` | 10 | {IDCG_V1['q1']:.4f} | {IDCG_V2['q1']:.4f} | {IDCG_V2['q1'] - IDCG_V1['q1']:+.4f} | "
        "added d4 (grade 3) |" in md
    )
    assert "| `toy/c1` | `" in md and f"{A_V1:.4f} | {A_V2:.4f} | {A_V2 - A_V1:+.4f} | 2 → 2 |" in md
    assert "q3" not in md


def test_without_a_parent_there_is_nothing_to_compare(tmp_path):
    root = tiny_project(tmp_path, active="v1")
    rescore(root)
    history = pl.read_parquet(root / "reports" / "history.parquet")
    assert history["judgments_version"].unique().to_list() == ["v1"]
    assert history["ndcg@10"].to_list() == pytest.approx([A_V1, B_V1], abs=1e-12)
    assert "has no parent version" in (root / "reports" / "idcg_changes.md").read_text()
    assert pl.read_parquet(root / "reports" / "idcg_changes.parquet").height == 0
    assert pl.read_parquet(root / "reports" / "score_changes.parquet").height == 0


def test_rescore_outputs_are_deterministic(tmp_path):
    root = tiny_project(tmp_path)
    rescore(root)
    first = {p.name: p.read_bytes() for p in (root / "reports").iterdir()}
    rescore(root)
    assert {p.name: p.read_bytes() for p in (root / "reports").iterdir()} == first


def test_a_missing_parent_version_is_an_error_naming_it(tmp_path):
    root = tiny_project(tmp_path)
    shutil.rmtree(root / "data" / "judgments" / "v1")
    result = subprocess.run([PYTHON, str(ROOT / "stages" / "rescore.py")], cwd=root, capture_output=True, text=True)
    assert result.returncode == 2
    assert "data/work/judgments.json" in result.stderr and "'v1' not found" in result.stderr


# --------------------------------------------------------------------------- the real pipeline


def one_model_conf(project: Path) -> None:
    """The shipped configuration cut to one dense model and one chunking (no reranker): three runs.

    conf/ itself is edited (a deletion cannot be recorded as an override), before the first commit.
    """
    path = project / "conf" / "config.yaml"
    text = path.read_text(encoding="utf-8")
    for line in (
        "  - model@models.e5small: e5small\n",
        "  - model@models.splade: splade\n",
        "  - model@models.wordllama: wordllama\n",
        "  - model@models.minilm_l3: minilm_l3\n",
        "  - reranker@rerankers.e5: e5small\n",
        "  - fused@grid.fused.splade_minilm: splade_minilm\n",
        "  - reranked@grid.reranked.minilm-c256-e5: minilm_c256_e5\n",
    ):
        assert line in text
        text = text.replace(line, "")
    for old, new in (
        ("models: [minilm, e5small, splade, wordllama, minilm_l3]", "models: [minilm]"),
        ("chunkings: [c256, c512]", "chunkings: [c256]"),
    ):
        assert old in text
        text = text.replace(old, new)
    path.write_text(text, encoding="utf-8")


class Project:
    """A git + DVC project over the small embedded pydocs data (support.pydocs_mini.write_pydocs_mini)."""

    def __init__(self, path: Path):
        self.path = path

    def compose(self, *extra: str) -> None:
        run(["releval", "params", MINI_DATASET, *extra], self.path)

    def history(self) -> pl.DataFrame:
        return pl.read_parquet(self.path / "reports" / "history.parquet")

    def repro(self, *args: str) -> set[str]:
        return ran_stages(run(["dvc", "repro", *args], self.path).stdout)

    def commit(self, message: str) -> str:
        run(["git", "add", "-A"], self.path)
        run(["git", "commit", "-qm", message], self.path)
        return run(["git", "rev-parse", "HEAD"], self.path).stdout.strip()

    def releval_archive(self, *args: str) -> str:
        return run(["releval", "archive", *args], self.path).stdout

    def index(self) -> pl.DataFrame:
        return ar.Archive(self.path / "data" / "archive").index()

    def keys_at(self, rev: str) -> set[tuple[str, str]]:
        commit = revisions.resolve_commit(self.path, rev)
        return {(f.run_sha256, f.meta()["config_id"]) for f in ar.revision_runs(self.path, commit)}


@pytest.mark.slow
@pytest.mark.heavy  # repeats part of the pipeline (30-85 s); make test-heavy
def test_archive_and_rescore_in_a_real_dvc_project(tmp_path):
    proj = Project(make_project(tmp_path / "project"))
    assert "\n  archive:" in (proj.path / "dvc.yaml").read_text()  # the real pipeline declares it
    write_pydocs_mini(proj.path)
    one_model_conf(proj.path)
    c0 = proj.commit("code")

    # 1. The first repro archives every run, recorded against HEAD (params.yaml and the recorded
    #    dataset override not committed yet: dirty).
    proj.compose()
    first = proj.repro()
    assert {"archive", "rescore", "score"} <= first
    index = proj.index()
    configs = {"minilm/c256", "bm25/c256", "rrf(minilm,bm25)/c256"}
    assert set(index["config_id"]) == configs and index.height == 3
    assert set(index["commit"]) == {c0} and index["dirty"].all()
    assert set(index["dirty_paths"].explode()) == {"conf/overrides/recorded.yaml", "params.yaml"}
    assert set(index["source"]) == {"workspace"} and set(index["dataset"]) == {"pydocs"}
    stages = dict(zip(index["config_id"], index["stage"]))
    assert stages == {
        "minilm/c256": "retrieve@minilm-c256",
        "bm25/c256": "bm25@c256",
        "rrf(minilm,bm25)/c256": "fuse@rrf-minilm-c256",
    }
    assert index["params_digest"].null_count() == 0
    lineage = json.loads((proj.path / "reports" / "lineage.json").read_text())
    assert {(v["run_sha256"], cid) for cid, v in lineage.items()} == set(zip(index["run_sha256"], index["config_id"]))
    c1 = proj.commit("first grid")
    assert proj.repro() == set()  # the archive stage is up to date after the commit

    # 2. A fusion change: only fusion, scoring, archive and rescore rerun; the new fused run joins the archive.
    proj.compose("fusions.rrf.k=10")
    assert proj.repro() == {"params", "fuse@rrf-minilm-c256", "score", "archive", "rescore", "report"}
    c2 = proj.commit("rrf k=10")
    index = proj.index()
    assert index.height == 4
    fused = index.filter(pl.col("config_id") == "rrf(minilm,bm25)/c256").sort("archived_at")
    assert fused["commit"].to_list() == [c0, c1] and fused["run_sha256"].n_unique() == 2
    assert fused["params_digest"].n_unique() == 2

    # 3. Bringing back HEAD~1 adds nothing: its runs were archived when they were made.
    out = proj.releval_archive("--from-rev", "HEAD~1")
    assert "3 runs, 0 added, 3 already archived" in out
    keys = set(zip(index["run_sha256"], index["config_id"]))
    assert proj.keys_at("HEAD~1") <= keys and proj.keys_at("HEAD") <= keys
    assert proj.keys_at("HEAD~1") != proj.keys_at("HEAD")
    assert proj.index().equals(index)
    assert "4 entries, 4 distinct runs, 3 configurations" in proj.releval_archive("--list")

    # 4. An experiment whose runs never reached the archive (`dvc repro score` does not run it) is brought back
    #    from DVC's cache by name, recorded with the experiment's commit.
    proj.compose("fusions.rrf.k=30")
    assert proj.repro("score") == {"fuse@rrf-minilm-c256", "score"}
    run(["dvc", "exp", "save", "-n", "rrf-k30"], proj.path)
    exp_commit = revisions.resolve_experiment(proj.path, "rrf-k30")
    run(["git", "checkout", "--", "."], proj.path)
    run(["dvc", "checkout", "--force"], proj.path)
    assert revisions.resolve_commit(proj.path, "HEAD") == c2 and proj.index().height == 4
    out = proj.releval_archive("--from-exp", "rrf-k30")
    assert "3 runs, 1 added, 2 already archived" in out and "rrf(minilm,bm25)/c256" in out
    added = proj.index().filter(pl.col("source") == "exp:rrf-k30").row(0, named=True)
    assert added["commit"] == exp_commit and not added["dirty"] and added["stage"] == "fuse@rrf-minilm-c256"
    assert proj.releval_archive("--from-exp", "rrf-k30").count("added") == 1  # "0 added": idempotent
    # The archive changed outside the pipeline: the next repro re-records it and re-scores; nothing else runs.
    assert proj.repro() == {"archive", "rescore"}
    history = pl.read_parquet(proj.path / "reports" / "history.parquet")
    assert history.height == 5 and history["judgments_version"].unique().to_list() == ["v2"]
    assert set(history["commit"]) == {c0, c1, exp_commit}
    fused = history.filter(pl.col("config_id") == "rrf(minilm,bm25)/c256")
    assert fused.height == 3 and fused["params_digest"].n_unique() == 3  # k = 60, 10, 30 told apart
    proj.commit("archive the k=30 experiment")

    # 5. Switching the judgments (to v1, which has no parent version) reruns judgments, score and rescore
    #    only: nothing is encoded, indexed or retrieved.
    proj.compose("fusions.rrf.k=10", "judgments=pydocs-v1")
    start = time.perf_counter()
    assert proj.repro() == {"params", "judgments", "score", "rescore", "report"}
    repro_s = time.perf_counter() - start
    start = time.perf_counter()
    assert proj.repro("--single-item", "--force", "rescore") == {"rescore"}
    rescore_s = time.perf_counter() - start
    print(
        f"judgment switch: dvc repro {repro_s:.2f} s; rescore stage alone (dvc repro -s -f rescore, "
        f"{history.height} archived runs): {rescore_s:.2f} s"
    )
    after = pl.read_parquet(proj.path / "reports" / "history.parquet")
    assert after.height == 5 and after["judgments_version"].unique().to_list() == ["v1"]
    assert "no parent version" in (proj.path / "reports" / "idcg_changes.md").read_text()

    # 6. A judgment set with a parent version: the IDCG change report names what moved and why.
    qrels = pl.read_parquet(proj.path / "data" / "work" / "qrels.parquet")
    queries = pl.read_parquet(proj.path / "data" / "work" / "queries.parquet")
    first_query = queries.filter(pl.col("query_id").is_in(qrels["query_id"].implode()))["query_id"][0]
    target = qrels.filter(pl.col("query_id") == first_query).sort("grade", "doc_id", descending=[True, False])
    regraded = target.row(0, named=True)
    assert regraded["grade"] >= 2
    rows = [(r["query_id"], r["doc_id"], r["grade"]) for r in qrels.iter_rows(named=True)]
    v2 = [(q_, d_, 1 if (q_, d_) == (regraded["query_id"], regraded["doc_id"]) else g) for q_, d_, g in rows]
    write_pydocs_set(proj.path / "data" / "judgments", "c1", None, rows)
    write_pydocs_set(proj.path / "data" / "judgments", "c2", "c1", v2)
    proj.compose(
        "fusions.rrf.k=10", "judgments.format=releval", "judgments.path=data/judgments/c2", "judgments.version=c2"
    )
    assert proj.repro() == {"params", "judgments", "score", "rescore", "report"}
    changes = pl.read_parquet(proj.path / "reports" / "idcg_changes.parquet")
    assert changes["query_id"].to_list() == [regraded["query_id"]]
    assert changes["reason"].to_list() == [f"regraded {regraded['doc_id']} {regraded['grade']}->1"]
    moved = pl.read_parquet(proj.path / "reports" / "score_changes.parquet")
    assert moved.filter(pl.col("metric") == "ndcg@10").height == 5
    history = pl.read_parquet(proj.path / "reports" / "history.parquet")
    assert history["judgments_version"].unique().to_list() == ["c2"]
    md = (proj.path / "reports" / "idcg_changes.md").read_text()
    assert md.startswith("# IDCG changes: `c1` → `c2`")
    print((proj.path / "reports" / "history.md").read_text())
    print(md)


@pytest.mark.slow
@pytest.mark.heavy
def test_a_fresh_clone_keeps_every_archived_run_and_audits_the_committed_numbers(tmp_path):
    """`git clone` (no DVC cache, no remote) brings the archive: the clone's audit verifies every
    committed number from it, and the clone's `dvc repro` drops no history row."""
    proj = Project(make_project(tmp_path / "project"))
    write_pydocs_mini(proj.path)
    one_model_conf(proj.path)
    proj.compose()
    inputs = proj.commit("inputs")
    proj.repro()
    proj.commit("first run")
    proj.compose("fusions.rrf.k=10")
    proj.commit("rrf k=10")
    proj.repro()
    proj.commit("results of rrf k=10")
    before = proj.history()
    assert before.height == 4  # three runs, and the fused run of each k
    committed = run(["git", "ls-files", "data/archive"], proj.path).stdout.split()
    assert "data/archive/README.md" in committed and any(p.startswith("data/archive/docs/") for p in committed)
    assert json.loads((proj.path / "reports" / "card.json").read_text())["code"] == {
        "commit": revisions.resolve_commit(proj.path, "HEAD~1"),  # "rrf k=10": the inputs, not the results
        "dirty": False,
        "dirty_paths": [],
    } and inputs != revisions.resolve_commit(proj.path, "HEAD~1")

    clone = tmp_path / "clone"
    run(["git", "clone", "-q", str(proj.path), str(clone)], tmp_path)
    assert not (clone / ".dvc" / "cache").exists() and not (clone / "data" / "work").exists()
    metrics = json.loads((clone / "reports" / "metrics.json").read_text())
    numbers = sum(
        len(metrics["contract"]["metrics"]) + sum(len(s["mean"]) for s in (row.get("slices") or {}).values())
        for row in metrics["configs"].values()
    )
    result = run(["releval", "audit", "--rev", "HEAD", "--all"], clone, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{numbers} of {numbers} numbers in reports/metrics.json recomputed" in result.stdout
    assert "3 of 3 configurations: runs read from the committed archive" in result.stdout
    assert "rebuilt from the committed sources by this checkout's code" in result.stdout
    assert "not available here   dvc.lock   data/work/emb/minilm/c256" in result.stdout
    assert "BROKEN" not in result.stdout and "not available here, none broken)" in result.stdout
    print("fresh clone, before any repro:", result.stdout.splitlines()[0], result.stdout.splitlines()[-1])
    one = run(["releval", "audit", "--rev", "HEAD", "minilm/c256", "ndcg@10"], clone, check=False)
    assert one.returncode == 0, one.stdout + one.stderr
    assert "from the committed archive" in one.stdout and "bit-for-bit" in one.stdout

    run(["dvc", "repro"], clone)
    after = pl.read_parquet(clone / "reports" / "history.parquet")
    keys = {(r["run_sha256"], r["config_id"]) for r in before.iter_rows(named=True)}
    assert after.height >= before.height and keys <= {
        (r["run_sha256"], r["config_id"]) for r in after.iter_rows(named=True)
    }
    status = run(["git", "status", "--short"], clone).stdout
    assert "reports/card.json" not in status and not any(line.startswith(" D") for line in status.splitlines())
    print(f"history rows: {before.height} committed, {after.height} after `dvc repro` in the fresh clone")


def write_pydocs_set(root: Path, version: str, parent: str | None, rows: list[tuple[str, str, int]]) -> None:
    """A judgment set of (query, doc, grade) rows under the scale and rubric of the shipped pydocs sets."""
    shipped, errors = jm.read_manifest(ROOT / "data" / "judgments" / "v2" / "manifest.yaml", expected_version="v2")
    assert shipped is not None, errors
    data = "".join(
        json.dumps({"query_id": q, "doc_id": d, "grade": g, "annotator": shipped.annotators[0]}) + "\n"
        for q, d, g in rows
    ).encode()
    manifest = jm.Manifest(version, parent, "2026-11-30", shipped.scale, "RUBRIC.md", shipped.annotators[:1], "0" * 64)
    jm.write_version(
        root / version, manifest, data, {"RUBRIC.md": (ROOT / "data" / "judgments" / "RUBRIC.md").read_bytes()}
    )


def test_the_command_follows_the_cli_protocol(tmp_path, capsys):
    from releval import cli

    repo = git_repo(tmp_path / "repo")
    (repo / "README").write_text("x\n")
    commit_all(repo, "one")
    assert cli.main(["archive", "--list", "--repo", str(repo)]) == 0
    assert capsys.readouterr().out == "the archive is empty\n"
    assert cli.main(["archive", "--from-rev", "no-such-rev", "--repo", str(repo)]) == 2
    assert "unknown git revision 'no-such-rev'" in capsys.readouterr().err
    assert cli.main(["archive", "--from-rev", "HEAD", "--repo", str(repo)]) == 2
    assert "has no dvc.lock" in capsys.readouterr().err
    assert cli.main(["archive", "--from-exp", "nope", "--repo", str(repo)]) == 2
    assert "no DVC experiment named 'nope'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["archive", "--list", "--from-rev", "HEAD"])  # one of the three, not two
