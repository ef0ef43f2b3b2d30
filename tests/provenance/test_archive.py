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

import polars as pl
import pytest
import yaml

from support import ROOT
from support.commands import ran_stages, run
from support.projects import make_project
from support.pydocs_mini import write_pydocs_mini
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
    table = run_table([("q1", "d1#0-5", 0.9), ("q1", "d2#0-5", 0.5)])
    out = revisions.StageOut(
        "retrieve@toy-c1", "data/work/runs/dense/toy/c1", "abc.dir", {"params.yaml": {"models.toy": {"batch_size": 8}}}
    )
    item = run_files(tmp_path, "data/work/runs/dense/toy/c1", table, dense_meta(), out)
    store = ar.Archive(tmp_path / "archive")
    report = store.add([item], PROVENANCE, dataset="tiny", archived_at="2026-02-03T00:00:00Z")
    assert report.added == [(item.run_sha256, "toy/c1")] and report.present == []

    run_sha = hashlib.sha256(item.run_bytes).hexdigest()
    meta_sha = hashlib.sha256(item.meta_bytes).hexdigest()
    assert (store.root / "runs" / f"{run_sha}.parquet").read_bytes() == item.run_bytes
    assert (store.root / "meta" / f"{meta_sha}.json").read_bytes() == item.meta_bytes
    index = store.index()
    assert index.schema == ar.INDEX_SCHEMA and index.height == 1
    row = index.row(0, named=True)
    assert row == {
        "run_sha256": run_sha,
        "config_id": "toy/c1",
        "meta_sha256": meta_sha,
        "kind": "dense",
        "chunking": "c1",
        "models": ["toy"],
        "dataset": "tiny",
        "run_path": "data/work/runs/dense/toy/c1",
        "rows": 2,
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
    assert store.read_run(run_sha).equals(table)
    assert store.read_meta(meta_sha)["config_id"] == "toy/c1"


def test_adding_again_is_a_no_op_and_nothing_is_rewritten(tmp_path):
    first = run_files(tmp_path, "data/work/runs/dense/toy/c1", run_table([("q1", "d1#0-5", 0.9)]), dense_meta())
    store = ar.Archive(tmp_path / "archive")
    store.add([first], PROVENANCE, dataset="tiny", archived_at="2026-02-03T00:00:00Z")
    index_bytes = store.index_path.read_bytes()
    index_stat = store.index_path.stat()
    files = {p: p.read_bytes() for p in store.root.rglob("*") if p.is_file()}

    # The same run again, even with other provenance and a sidecar whose ops differ: the first record stays.
    again = run_files(
        tmp_path / "2",
        "data/work/runs/dense/toy/c1",
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
    assert report.added == [] and report.present == [(first.run_sha256, "toy/c1")]
    assert store.index_path.read_bytes() == index_bytes
    assert store.index_path.stat().st_mtime_ns == index_stat.st_mtime_ns  # not even rewritten identically
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
    assert all(p.read_bytes() == data for p, data in files.items() if p != store.index_path)
    assert not list(store.root.rglob(".releval-tmp-*"))


def test_one_run_table_under_two_configurations_is_stored_once(tmp_path):
    """The same model under two names gives byte-identical runs but two sidecars: two entries, one file."""
    table = run_table([("q1", "d1#0-5", 0.9), ("q1", "d2#0-5", 0.5)])
    a = run_files(tmp_path / "a", "data/work/runs/dense/toy/c1", table, dense_meta("toy"))
    b = run_files(tmp_path / "b", "data/work/runs/dense/toy_b/c1", table, dense_meta("toy_b"))
    assert a.run_sha256 == b.run_sha256
    store = ar.Archive(tmp_path / "archive")
    report = store.add([a, b, a], PROVENANCE, dataset="tiny")
    assert sorted(c for _, c in report.added) == ["toy/c1", "toy_b/c1"] and len(report.present) == 1
    assert len(list((store.root / "runs").iterdir())) == 1
    assert len(list((store.root / "meta").iterdir())) == 2
    assert sorted(store.index()["config_id"].to_list()) == ["toy/c1", "toy_b/c1"]


def test_an_edited_archive_is_caught(tmp_path):
    item = run_files(tmp_path, "data/work/runs/dense/toy/c1", run_table([("q1", "d1#0-5", 0.9)]), dense_meta())
    store = ar.Archive(tmp_path / "archive")
    store.add([item], PROVENANCE, dataset="tiny")
    path = store.run_file(item.run_sha256)
    path.write_bytes(path.read_bytes()[:-1] + b"\0")
    with pytest.raises(ar.InputError, match="does not match"):
        store.read_run(item.run_sha256)


def test_a_run_without_config_id_is_refused(tmp_path):
    item = ar.RunFiles("data/work/runs/x", b"", b'{"kind": "dense"}')
    with pytest.raises(ar.InputError, match="config_id"):
        ar.Archive(tmp_path / "archive").add([item], PROVENANCE, dataset="tiny")
    assert not (tmp_path / "archive" / "runs").exists()


LOCK = {
    "schema": "2.0",
    "stages": {
        "retrieve@toy-c1": {
            "cmd": "python stages/retrieve.py",
            "params": {"params.yaml": {"retriever.dense": {"top_k": 5}}},
            "outs": [{"path": "data/work/runs/dense/toy/c1", "md5": "d1.dir"}],
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
    assert [o.path for o in outs] == ["data/work/runs/dense/toy/c1", "data/work/runs/rerank/toy-c1-x"]
    held = ar.producing_out("data/work/runs/dense/toy/c1", outs)
    assert held.stage == "retrieve@toy-c1" and held.params == {"params.yaml": {"retriever.dense": {"top_k": 5}}}
    assert ar.producing_out("data/work/runs/rerank/toy-c1-x", outs).md5 == "r1.dir"
    assert ar.producing_out("data/work/runs/dense/old/c1", outs) is None
    assert ar.params_digest(None) is None
    assert ar.params_digest({"b": 1, "a": [1, 2]}) == ar.params_digest({"a": [1, 2], "b": 1})


def test_workspace_provenance_ignores_dvc_bookkeeping(tmp_path):
    repo = git_repo(tmp_path / "repo")
    assert ar.workspace_provenance(repo, LOCK).commit is None  # no commit yet
    (repo / "params.yaml").write_text("a: 1\n")
    (repo / "dvc.lock").write_text("x\n")
    (repo / "reports").mkdir()
    (repo / "reports" / "grid.md").write_text("g\n")
    head = commit_all(repo, "one")
    (repo / "dvc.lock").write_text("y\n")
    (repo / "reports" / "grid.md").write_text("h\n")
    (repo / ".gitignore").write_text("/data/archive\n")
    clean = ar.workspace_provenance(repo, LOCK)
    assert clean.commit == head and not clean.dirty and clean.dirty_paths == () and clean.commit_date
    (repo / "params.yaml").write_text("a: 2\n")
    (repo / "new_code.py").write_text("x = 1\n")
    dirty = ar.workspace_provenance(repo, LOCK)
    assert dirty.commit == head and dirty.dirty and dirty.dirty_paths == ("new_code.py", "params.yaml")


def test_workspace_runs_skip_folders_no_stage_made(tmp_path):
    for rel, cid in (("dense/toy/c1", "toy/c1"), ("dense/old/c1", "old/c1")):
        runs.write_run(
            tmp_path / "data/work/runs" / rel, run_table([("q1", "d1#0-5", 1.0)]), dense_meta(**{"config_id": cid})
        )
    found, skipped = ar.workspace_runs(tmp_path, "data/work/runs", LOCK)
    assert [f.run_path for f in found] == ["data/work/runs/dense/toy/c1"] and found[0].out.stage == "retrieve@toy-c1"
    assert skipped == ["data/work/runs/dense/old/c1"]


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
        [run_files(tmp_path, "data/work/runs/dense/toy/c1", run_table([("q1", "d1#0-5", 1.0)]), dense_meta())],
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
            run_files(tmp_path, "data/work/runs/dense/toy/c1", run_table(RUN_A), dense_meta()),
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

# The shipped configuration cut to one dense model and one chunking (no reranker): three runs.
ONE_MODEL = ("~model@models.e5small", "grid.models=[minilm]", "grid.chunkings=[c256]", "~grid.reranked.minilm-c256-e5")


class Project:
    """A git + DVC project over the small embedded pydocs data (support.pydocs_mini.write_pydocs_mini)."""

    def __init__(self, path: Path):
        self.path = path

    def compose(self, *extra: str) -> None:
        run(["releval", "params", *ONE_MODEL, *extra], self.path)

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
def test_archive_and_rescore_in_a_real_dvc_project(tmp_path):
    proj = Project(make_project(tmp_path / "project"))
    assert "\n  archive:" in (proj.path / "dvc.yaml").read_text()  # the real pipeline declares it
    write_pydocs_mini(proj.path)
    c0 = proj.commit("code")

    # 1. The first repro archives every run, recorded against HEAD (params.yaml not committed yet: dirty).
    proj.compose()
    first = proj.repro()
    assert {"archive", "rescore", "score"} <= first
    index = proj.index()
    configs = {"minilm/c256", "bm25/c256", "rrf(minilm,bm25)/c256"}
    assert set(index["config_id"]) == configs and index.height == 3
    assert set(index["commit"]) == {c0} and index["dirty"].all()
    assert set(index["dirty_paths"].explode()) == {"params.yaml"}
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
    assert proj.repro() == {"fuse@rrf-minilm-c256", "score", "archive", "rescore", "report"}
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
    assert proj.repro() == {"judgments", "score", "rescore", "report"}
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
    assert proj.repro() == {"judgments", "score", "rescore", "report"}
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
