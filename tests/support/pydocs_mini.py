"""The embedded default, small: the shipped pydocs data cut to a few queries, and projects over it."""

import gzip
import json
import shutil
from pathlib import Path

import polars as pl

from releval.judging import judgments as jm
from releval.retrieval import runs
from support import ROOT
from support.commands import run
from support.projects import make_project

# Queries of the shipped pydocs set used by the end-to-end tests: twelve dev queries (two of them
# must-never-break; q020 regraded in v2, q101 added in v2) and five sealed holdout queries (one
# must-never-break), every slice present.
MINI_QUERIES = (*(f"q{i:03d}" for i in range(1, 16)), "q020", "q101")
DEFAULT_MODELS = ("minilm", "e5small", "splade", "wordllama", "minilm_l3")  # the shipped grid.models
# The configurations the default grid scores with MINI_CHUNKINGS.
MINI_CONFIGS = frozenset(
    {f"{m}/{c}" for m in DEFAULT_MODELS for c in ("c256", "c512")}
    | {f"bm25/{c}" for c in ("c256", "c512")}
    | {f"rrf({m},bm25)/{c}" for m in DEFAULT_MODELS for c in ("c256", "c512")}
    | {"rrf(splade,minilm)/c256", "minilm/c256+rerank(e5)"}
)
MINI_DISTRACTORS = 8  # judged non-relevant documents kept beside the relevant ones
MINI_CHUNKINGS = "grid.chunkings=[c256,c512]"
# The mini data is cut from corpus edition v2 and its judgments v1/v2: projects over it compose
# that dataset (name `pydocs`); the shipped default is edition v3 (conf/dataset/pydocs.yaml).
MINI_DATASET = "dataset=pydocs-v2"
ACTIVE_JUDGMENTS = Path("data") / "judgments" / "v2"  # the active judgment set of the default config


def write_pydocs_mini(
    dest: Path, query_ids: tuple[str, ...] = MINI_QUERIES, distractors: int = MINI_DISTRACTORS
) -> dict[str, list[str]]:
    """The shipped pydocs data, cut to a few queries, at the paths the default config reads.

    Writes ``data/pydocs/corpus.jsonl.gz``, ``data/queries.jsonl`` and judgment versions
    ``data/judgments/v1`` and ``v2`` (with the real rubric) under ``dest``: every document judged
    relevant to one of ``query_ids`` (v2) plus the first ``distractors`` judged non-relevant ones,
    whole and unchanged; the queries' lines as committed; their judgments, re-sealed with new
    hashes. The default configuration therefore runs unchanged on it. Returns the ids kept.
    """
    src = ROOT / "data"
    wanted = set(query_ids)

    def judgments_of(version: str) -> list[dict]:
        lines = (src / "judgments" / version / "judgments.jsonl").read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip() and json.loads(line)["query_id"] in wanted]

    v2 = judgments_of("v2")
    relevant = sorted({r["doc_id"] for r in v2 if r["grade"] >= 1})
    others = sorted({r["doc_id"] for r in v2} - set(relevant))[:distractors]
    doc_ids = set(relevant) | set(others)
    with gzip.open(src / "pydocs" / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        corpus = [line for line in fh if json.loads(line)["_id"] in doc_ids]
    (dest / "data" / "pydocs").mkdir(parents=True, exist_ok=True)
    with gzip.GzipFile(dest / "data" / "pydocs" / "corpus.jsonl.gz", "wb", mtime=0) as fh:
        fh.write("".join(corpus).encode("utf-8"))
    queries = [
        line
        for line in (src / "queries.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
        if line.strip() and json.loads(line)["query_id"] in wanted
    ]
    (dest / "data" / "queries.jsonl").write_text("".join(queries), encoding="utf-8")
    judgments_dir = dest / "data" / "judgments"
    judgments_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src / "judgments" / "RUBRIC.md", judgments_dir / "RUBRIC.md")
    for version in ("v1", "v2"):
        manifest, errors = jm.read_manifest(src / "judgments" / version / "manifest.yaml", expected_version=version)
        assert manifest is not None, errors
        kept = [r for r in judgments_of(version) if r["doc_id"] in doc_ids]
        data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in kept).encode("utf-8")
        jm.write_version(judgments_dir / version, manifest, data)
    return {"queries": sorted(wanted), "docs": sorted(doc_ids)}


def make_pydocs_project(dest: Path, *overrides: str) -> Path:
    """A git + DVC project with the shipped configuration over the small pydocs data (edition v2), composed."""
    make_project(dest)
    write_pydocs_mini(dest)
    run(["releval", "params", MINI_DATASET, *overrides], dest)
    return dest


def mini_queries(split: str) -> set[str]:
    """The ids of MINI_QUERIES in ``split`` (dev or holdout), as the shipped queries.jsonl labels them."""
    lines = (ROOT / "data" / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    return {r["query_id"] for r in rows if r["query_id"] in MINI_QUERIES and r["split"] == split}


def regrade_one_judgment(project: Path, *, seal: bool = True) -> tuple[str, str, int]:
    """Grade 0 for the best-ranked document of minilm/c256's run that is judged relevant to its
    (dev) query, on every annotator's line of it in the active set. ``seal``: re-seal the set
    (a new manifest hash: a legitimate new state that `dvc repro` reads); otherwise only
    judgments.jsonl is edited (tampering, which the judgments stage would refuse). Returns
    (query_id, doc_id, its former grade)."""
    qrels = pl.read_parquet(project / "data" / "work" / "qrels.parquet")
    ranked = (
        runs.collapse_to_documents(
            pl.read_parquet(project / "data" / "work" / "runs" / "model" / "minilm" / "c256" / "run.parquet")
        )
        .join(qrels.filter(pl.col("grade") >= 1), on=["query_id", "doc_id"])
        .sort("rank", "query_id")
    )
    query_id, doc_id, grade = ranked.select("query_id", "doc_id", "grade").row(0)
    folder = project / ACTIVE_JUDGMENTS
    records = [json.loads(line) for line in (folder / "judgments.jsonl").read_text(encoding="utf-8").splitlines()]
    hits = [r for r in records if (r["query_id"], r["doc_id"]) == (query_id, doc_id)]
    assert hits and all(r["grade"] >= 1 for r in hits)
    for record in hits:
        record["grade"] = 0
    data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8")
    if seal:
        manifest, errors = jm.read_manifest(folder / "manifest.yaml", expected_version=folder.name)
        assert manifest is not None, errors
        jm.write_version(folder, manifest, data)
    else:
        (folder / "judgments.jsonl").write_bytes(data)
    return query_id, doc_id, grade
