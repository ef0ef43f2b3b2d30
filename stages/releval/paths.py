"""Every default path of the pipeline, relative to the project root, each written once.

The stage scripts' flags default to these and dvc.yaml names the same strings as the stages'
deps and outs (tests/test_paths.py checks that they agree). A stage given a folder flag
(--reports, --work, --runs-root) finds the same files under that folder: :func:`rebase`.
"""

from __future__ import annotations

from pathlib import Path

CONF = "conf"
PARAMS = "params.yaml"

DATA = "data"
MODELS = f"{DATA}/models"
WHEELS = f"{DATA}/wheels"  # model wheels downloaded by make setup (data archives, never imported)
ARCHIVE = f"{DATA}/archive"

WORK = f"{DATA}/work"
DOCS = f"{WORK}/docs.parquet"
QUERIES = f"{WORK}/queries.parquet"
QRELS = f"{WORK}/qrels.parquet"
JUDGMENTS_META = f"{WORK}/judgments.json"
CHUNKS = f"{WORK}/chunks"
EMBEDDINGS = f"{WORK}/emb"
# Vectors kept across runs, keyed by model, protocol and text (releval.retrieval.store); not a DVC output.
EMBEDDING_STORE = f"{DATA}/store/embeddings"
INDEXES = f"{WORK}/index"
TREC = f"{WORK}/trec"
RUNS = f"{WORK}/runs"
DENSE_RUNS = f"{RUNS}/dense"
BM25_RUNS = f"{RUNS}/bm25"
FUSED_RUNS = f"{RUNS}/fused"
RERANKED_RUNS = f"{RUNS}/rerank"

REPORTS = "reports"
METRICS = f"{REPORTS}/metrics.json"
QUALITY = f"{REPORTS}/quality.json"  # the DVC metrics file of quality
OPS = f"{REPORTS}/ops.json"  # the DVC metrics file of machine figures
OPS_MD = f"{REPORTS}/ops.md"
PER_QUERY = f"{REPORTS}/per_query.parquet"
LINEAGE = f"{REPORTS}/lineage.json"
GRID = f"{REPORTS}/grid.md"
CARD = f"{REPORTS}/card.json"
OBSERVATIONS = f"{REPORTS}/observations.json"
REPORT_MD = f"{REPORTS}/report.md"
REPORT_HTML = f"{REPORTS}/report.html"
PLOTS = f"{REPORTS}/plots"
HISTORY = f"{REPORTS}/history.parquet"
HISTORY_MD = f"{REPORTS}/history.md"
IDCG_CHANGES = f"{REPORTS}/idcg_changes.parquet"
IDCG_CHANGES_MD = f"{REPORTS}/idcg_changes.md"
SCORE_CHANGES = f"{REPORTS}/score_changes.parquet"
HOLDOUT_LOG = f"{REPORTS}/holdout_access.jsonl"
HOLDOUT_REPORTS = f"{REPORTS}/holdout"
HOLDOUT_SCRATCH = f"{WORK}/holdout-opening"
PYDOCS_CORPUS = f"{DATA}/pydocs/corpus.jsonl.gz"  # edition v2 (capped pages), kept for v1/v2 judgments
PYDOCS_V3 = f"{DATA}/pydocs/v3"
PYDOCS_V3_CORPUS = f"{PYDOCS_V3}/corpus.jsonl.gz"
PYDOCS_V3_QUERIES = f"{PYDOCS_V3}/queries.jsonl"

DVC_PLOTS = "dvc_plots"
OFFLINE_TEMPLATE = f"{DVC_PLOTS}/offline.html"
PLOT_TEMPLATES = f"{DVC_PLOTS}/templates"
DVC_LOCK = "dvc.lock"


def rebase(path: str, default_folder: str, folder: str | Path) -> Path:
    """``path`` (declared under ``default_folder``) under ``folder`` instead.

    ``rebase(METRICS, REPORTS, "out")`` is ``out/metrics.json``; with ``folder`` at its default
    the result is ``path`` itself.
    """
    return Path(folder) / Path(path).relative_to(default_folder)
