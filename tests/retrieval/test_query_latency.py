"""Per-query latency of a model's run: encoding times kept in the embedding store beside the
namespace, search times measured on every run, and the model loaded only when something needs it.

The stage test runs the real stages (model, encode, index, retrieve) on a tiny project with the
static WordLlama model, the fastest to load.
"""

from __future__ import annotations

import json
import re
import runpy
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml

from releval import io
from releval.measurement import operations
from releval.retrieval import encoders, runs, store

from support import ROOT

STORED = re.compile(r"store \((\d+) queries, \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\)")

# --------------------------------------------------------------------------- the figures


def test_latency_is_the_percentile_of_each_querys_encoding_plus_search():
    """Each query's two parts are added before the percentiles: not the sum of two medians."""
    encode = np.array([9.0, 1.0, 1.0]) / 1000.0
    search = np.array([1.0, 9.0, 1.0]) / 1000.0
    summary = runs.encode_and_search_latency(encode, search)
    assert summary == pytest.approx({"latency_ms_p50": 10.0, "latency_ms_p95": 10.0})
    assert summary == pytest.approx(runs.latency_summary(encode + search))
    # paired by position: the same times in another order are another latency
    assert runs.encode_and_search_latency(encode, search[[1, 0, 2]])["latency_ms_p50"] == pytest.approx(2.0)
    with pytest.raises(ValueError, match="encoding times of"):
        runs.encode_and_search_latency(encode, search[:2])


def test_per_query_seconds_times_the_latency_sample_in_order():
    items = [f"q{i}" for i in range(130)]
    seen: list[str] = []
    seconds = runs.per_query_seconds(seen.append, items)
    warmup, timed = runs.LATENCY_PROTOCOL["warmup"], runs.LATENCY_PROTOCOL["queries"]
    assert seen == items[:warmup] + items[:timed] and seconds.shape == (timed,)
    assert set(seen) <= set(runs.latency_sample(items)) and runs.latency_sample(items) == items[:timed]
    assert runs.per_query_seconds(lambda item: None, items[:3]).shape == (3,)


def test_recorded_encoding_times_are_reused_only_for_the_same_texts_and_protocol(tmp_path):
    cell = store.EmbeddingStore(tmp_path, {"format": 1, "model": "m", "role": "query"}, "dense")
    texts = ["wing flutter", "shock wave", "heat transfer"]
    measured: list[int] = []

    def measure(ms: float):
        return lambda: measured.append(1) or (np.full(3, ms / 1000.0), int(ms * 2**20))

    def latency(texts, protocol=runs.LATENCY_PROTOCOL, ms=2.0):
        return store.query_latency(cell, texts, protocol, measure(ms))

    seconds, model_bytes, source = latency(texts)
    assert source == "this run" and len(measured) == 1 and model_bytes == 2 * 2**20
    np.testing.assert_allclose(seconds, 0.002)
    assert (cell.folder / store.QUERY_LATENCY_FILE).is_file()

    seconds, model_bytes, source = latency(texts, ms=5.0)
    assert STORED.fullmatch(source) and STORED.fullmatch(source).group(1) == "3" and len(measured) == 1
    np.testing.assert_allclose(seconds, 0.002)  # the recorded times, not a new measurement
    assert model_bytes == 2 * 2**20  # and what the model added to the peak: serving needs it loaded

    for other, protocol in (
        (["wing flutter", "shock wave", "heat transfer!"], runs.LATENCY_PROTOCOL),  # a text changed
        (texts[::-1], runs.LATENCY_PROTOCOL),  # the same texts in another order
        (texts, {**runs.LATENCY_PROTOCOL, "threads": 4}),  # another protocol
    ):
        before = len(measured)
        seconds, _, source = latency(other, protocol, ms=7.0)
        assert (source, len(measured)) == ("this run", before + 1), (other, protocol)
        np.testing.assert_allclose(seconds, 0.007)
    # each measurement is kept beside the others: the first is still there
    assert STORED.fullmatch(latency(texts, ms=9.0)[2]) and len(measured) == 4
    assert len(json.loads((cell.folder / store.QUERY_LATENCY_FILE).read_text())) == 4
    # a record without the model's share of the peak (an earlier format) is measured anew
    records = json.loads((cell.folder / store.QUERY_LATENCY_FILE).read_text())
    for record in records.values():
        del record["model_peak_bytes"]
    io.write_json(cell.folder / store.QUERY_LATENCY_FILE, records)
    assert latency(texts, ms=9.0)[2] == "this run" and len(measured) == 5


# --------------------------------------------------------------------------- the retrieve stage

WORDS = "wing flutter boundary layer heat transfer shock wave lift drag slipstream vortex".split()
WORDLLAMA = {
    "name": "wordllama",
    "family": "static",
    "source": "wordllama:l2_supercat",
    "dimension": 256,
    "query_prompt": "",
    "document_prompt": "",
    "asymmetric": False,
    "normalize": True,
    "max_seq_length": 512,
    "batch_size": 64,
    "dtype": "float32",
    "devices": ["cpu"],
    "trust_remote_code": False,
}
FOLDERS = ["--chunks-dir", "chunks", "--models-dir", "models", "--store", "store"]
CELL = ["--model", "wordllama", "--chunking", "c"]
RETRIEVE = [*CELL, *FOLDERS, "--queries", "queries.parquet", "--emb-root", "emb", "--index-root", "index"]


def run_stage(script: str, argv: list[str], monkeypatch) -> None:
    """A stage script as `python stages/<script>` runs it, in this process (so that it can be watched)."""
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_PROGRESS_BARS"):
        monkeypatch.setenv(name, "1")  # entry() sets these; monkeypatch restores them
    monkeypatch.setenv("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    monkeypatch.setenv("TRANSFORMERS_VERBOSITY", "error")
    monkeypatch.setattr(sys, "argv", [script, *argv])
    runpy.run_path(str(ROOT / "stages" / script), run_name="__main__")


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """A tiny project whose cell wordllama/c is encoded and indexed (40 chunks, 12 queries)."""
    monkeypatch.chdir(tmp_path)
    retriever = {"titles": "prepend", "dense": {"top_k": 5, "recall_k": 3}, "index": {"exact": "auto"}}
    params = {"retriever": retriever, "models": {"wordllama": WORDLLAMA}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    rng = np.random.default_rng(0)
    texts = [" ".join(rng.choice(WORDS, size=12)) for _ in range(40)]
    ids = [f"d{i}" for i in range(40)]
    chunks = pl.DataFrame({"chunk_id": [f"{d}#0-12" for d in ids], "doc_id": ids, "text": texts})
    io.write_parquet(tmp_path / "chunks" / "c.parquet", chunks)
    query_texts = [" ".join(rng.choice(WORDS, size=3)) for _ in range(12)]
    write_queries(tmp_path, [f"q{i}" for i in range(12)], query_texts)
    run_stage("model.py", ["--name", "wordllama", "--out-root", "models"], monkeypatch)
    run_stage("encode.py", [*CELL, *FOLDERS, "--out-root", "emb"], monkeypatch)
    run_stage("index.py", [*CELL, "--emb-root", "emb", "--out-root", "index"], monkeypatch)
    return tmp_path


def write_queries(root: Path, ids: list[str], texts: list[str]) -> None:
    io.write_parquet(root / "queries.parquet", pl.DataFrame({"query_id": ids, "text": texts}))


def retrieve(monkeypatch, out: str) -> tuple[int, dict, bytes]:
    """Run the retrieve stage into ``out``: how many times it loaded the model, its meta and run bytes."""
    loads: list[str] = []
    real = encoders.load_encoder

    def counted(manifest, config):
        loads.append(config.name)
        return real(manifest, config)

    monkeypatch.setattr(encoders, "load_encoder", counted)
    run_stage("retrieve.py", [*RETRIEVE, "--out-root", out], monkeypatch)
    folder = Path(out) / "wordllama" / "c"
    return len(loads), runs.read_meta(folder), (folder / "run.parquet").read_bytes()


def test_a_second_retrieve_with_unchanged_queries_does_not_load_the_model(project, monkeypatch):
    loads, first, first_run = retrieve(monkeypatch, "first")
    assert loads == 1 and first["latency_from"] == "this run"
    assert first["ops"]["latency_ms_p95"] >= first["ops"]["latency_ms_p50"] > 0

    loads, again, again_run = retrieve(monkeypatch, "again")
    assert loads == 0
    assert STORED.fullmatch(again["latency_from"]).group(1) == "12"
    assert again_run == first_run  # the rankings and scores, byte for byte
    assert again["ops"]["latency_ms_p95"] >= again["ops"]["latency_ms_p50"] > 0
    # only machine figures and where they came from differ; none of them is a cost figure
    assert operations.cost_figures(again["ops"]) == operations.cost_figures(first["ops"])
    assert "latency_from" not in again["ops"]
    rest = {key: value for key, value in first.items() if key not in ("ops", "latency_from")}
    assert {key: value for key, value in again.items() if key not in ("ops", "latency_from")} == rest


def test_queries_in_another_order_are_timed_anew_and_ranked_the_same(project, monkeypatch):
    _, _, first_run = retrieve(monkeypatch, "first")
    queries = pl.read_parquet(project / "queries.parquet").reverse()
    write_queries(project, queries["query_id"].to_list(), queries["text"].to_list())
    loads, meta, reordered_run = retrieve(monkeypatch, "reordered")
    # every query vector is in the store, but no encoding times of these queries in this order
    assert loads == 1 and meta["latency_from"] == "this run"
    ordered = ["query_id", "rank"]
    assert pl.read_parquet(reordered_run).sort(ordered).equals(pl.read_parquet(first_run).sort(ordered))
