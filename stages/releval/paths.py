"""Every default path of the pipeline, relative to the project root, each written once.

The stage scripts' flags default to these and dvc.yaml names the same strings as the stages'
deps and outs (tests/test_paths.py checks that they agree). A stage given a folder flag
(--reports, --work, --runs-root) finds the same files under that folder: :func:`rebase`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from releval.errors import InputError

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
EVIDENCE = f"{WORK}/evidence.parquet"  # the scored split's evidence spans, resolved (releval.measurement.evidence)
CHUNKS = f"{WORK}/chunks"
EMBEDDINGS = f"{WORK}/emb"
# Vectors kept across runs, keyed by model, protocol and text (releval.retrieval.store); not a DVC output.
EMBEDDING_STORE = f"{DATA}/store/embeddings"
INDEXES = f"{WORK}/index"
TREC = f"{WORK}/trec"
RUNS = f"{WORK}/runs"
MODEL_RUNS = f"{RUNS}/model"  # every model family's runs: model/<model>/<chunking>
BM25_RUNS = f"{RUNS}/bm25"
FUSED_RUNS = f"{RUNS}/fused"
RERANKED_RUNS = f"{RUNS}/rerank"
EXTERNAL_RUNS = f"{RUNS}/external"  # run files produced elsewhere (stages/external.py)
EXTERNAL_DECLARED = f"{EXTERNAL_RUNS}/declared.json"

REPORTS = "reports"
# params.yaml's key naming the active dataset's reports folder, which dvc.yaml templates as
# ${reports_dir}: REPORTS itself for the default dataset (its config says `reports: reports`),
# REPORTS/<dataset name> for any other (conf/config.yaml composes it), so that switching datasets
# never writes over another dataset's reports. Paths below are the default dataset's: rebase them.
REPORTS_DIR_KEY = "reports_dir"
REPORTS_DIR_VAR = "${" + REPORTS_DIR_KEY + "}"  # as dvc.yaml writes it
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


_FOLDER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def reports_folder(params: Mapping[str, Any], source: str = PARAMS) -> str:
    """The active dataset's reports folder: ``params[REPORTS_DIR_KEY]``, or REPORTS when params lack it.

    It is REPORTS or one folder directly under it, never one of the default dataset's own outputs
    there (``reports/plots``, ``reports/holdout``, ...): DVC would see two stages writing one path.
    """
    folder = params.get(REPORTS_DIR_KEY, REPORTS)
    if folder == REPORTS:
        return REPORTS
    name = folder.partition(REPORTS + "/")[2] if isinstance(folder, str) else ""
    if not _FOLDER_NAME.fullmatch(name):
        raise InputError(
            f"expected {REPORTS!r} or {REPORTS}/<dataset name> (letters, digits, '.', '_', '-'), got {folder!r}",
            file=source,
            field=REPORTS_DIR_KEY,
        )
    if name in _default_report_names():
        raise InputError(
            f"{folder!r} is where the default dataset writes {name}; name the dataset otherwise",
            file=source,
            field=REPORTS_DIR_KEY,
        )
    return folder


def _default_report_names() -> set[str]:
    """The first path part of every file or folder this module declares under REPORTS."""
    return {
        Path(value).relative_to(REPORTS).parts[0]
        for name, value in globals().items()
        if name.isupper() and isinstance(value, str) and value.startswith(REPORTS + "/")
    }
