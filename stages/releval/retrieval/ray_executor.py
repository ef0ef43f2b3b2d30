"""Encode texts with Ray: one model, its protocol, a pool of actors on one machine or a cluster.

:func:`encode_with_ray` runs Ray Data ``map_batches`` over a fixed pool of actors; each actor
loads the model once through :func:`releval.retrieval.encoders.load_encoder` (the same loader,
weight check and protocol as an in-process encode) and encodes batches of texts under the
requested role. Every text carries its row number through the dataset, and the result is put
back in input order from those numbers, so neither Ray's scheduling nor a retried batch can
reorder, lose or duplicate a vector: a result without exactly one vector per row is refused.

Dense and static models give a float32 matrix, sparse models a canonical CSR matrix, as
``Encoder.encode`` does. Placement is Ray's: actors given GPUs (``gpus_per_actor > 0``) encode
on ``cuda`` (the GPU Ray assigned them), the others on the CPU, whatever ``devices`` says.

Fault tolerance: an actor whose process dies (a killed worker, a lost node) is restarted up to
``max_restarts`` times (its model reloaded), and the batch it was encoding is resubmitted up to
``max_task_retries`` times; -1 means unlimited.

Ray is an optional dependency (``pip install 'releval[ray]'``), imported only when used.
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from releval.config import build
from releval.errors import InputError
from releval.retrieval.encoders import load_encoder
from releval.retrieval.families import family_class
from releval.retrieval.models import ModelConfig

INSTALL_HINT = "pip install 'releval[ray]'"
# Set on every actor, as releval.stage sets it in the driver: on a cluster, a node's own
# environment must not let a model library reach the network.
OFFLINE_ENVIRONMENT = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@dataclasses.dataclass(frozen=True)
class RaySettings:
    """Where and how wide to encode.

    ``address`` None starts a local Ray instance (``num_cpus`` and ``object_store_mb`` size it;
    Ray's defaults when None) and shuts it down afterwards; a string joins that cluster
    ("auto", "HOST:6379" or "ray://HOST:10001") and leaves it running.
    """

    address: str | None = None
    actors: int = 1
    cpus_per_actor: float = 1.0
    gpus_per_actor: float = 0.0
    batch_size: int = 256
    max_restarts: int = 3
    max_task_retries: int = 3
    num_cpus: int | None = None
    object_store_mb: int | None = None

    def __post_init__(self):
        if self.address is not None and not (isinstance(self.address, str) and self.address.strip()):
            raise InputError("expected a cluster address (e.g. 'auto' or 'ray://host:10001'), or null", field="address")
        _require_int(self.actors, "actors", minimum=1)
        _require_int(self.batch_size, "batch_size", minimum=1)
        _require_int(self.max_restarts, "max_restarts", minimum=-1)
        _require_int(self.max_task_retries, "max_task_retries", minimum=-1)
        if not _is_number(self.cpus_per_actor) or self.cpus_per_actor <= 0:
            raise InputError("must be a positive number", field="cpus_per_actor")
        if not _is_number(self.gpus_per_actor) or self.gpus_per_actor < 0:
            raise InputError("must be a number >= 0", field="gpus_per_actor")
        for name in ("num_cpus", "object_store_mb"):
            value = getattr(self, name)
            if value is None:
                continue
            if self.address is not None:
                raise InputError("sizes a local Ray instance only; a joined cluster has its own size", field=name)
            _require_int(value, name, minimum=1)

    @classmethod
    def from_params(cls, data: dict[str, Any], where: str = "ray") -> "RaySettings":
        """Settings from a params mapping; unknown keys are refused by name."""
        return build(cls, data or {}, where=where)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _require_int(value: Any, name: str, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise InputError(f"must be an integer >= {minimum}", field=name)


def import_ray():
    """The ray module, or an InputError saying how to install it."""
    try:
        import ray
        import ray.data  # noqa: F401  (Ray Data ships in the ray[data] extra)
    except ImportError as exc:
        raise InputError(
            f"the ray executor needs Ray with Ray Data ({exc}); {INSTALL_HINT}", field="executor"
        ) from None
    return ray


def placed_config(config: ModelConfig, settings: RaySettings) -> ModelConfig:
    """The config each actor loads: on its assigned GPU when it has one, else on the CPU."""
    if settings.gpus_per_actor > 0:
        if not family_class(config.family).accelerators:
            raise InputError(
                f"{config.name} is a {config.family} model, which runs on no GPU here; set gpus_per_actor: 0",
                field="gpus_per_actor",
            )
        return dataclasses.replace(config, devices=("cuda",))
    return dataclasses.replace(config, devices=("cpu",))


def shipped_manifest(manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest with its model folder made absolute: a Ray worker's working directory is not
    the driver's (on a cluster, every node must see that folder at the same path)."""
    folder = manifest.get("folder")
    return {**manifest, "folder": str(Path(folder).resolve())} if folder else dict(manifest)


class EncodeBatches:
    """The actor's work: load the model once, then encode each batch and keep its row numbers."""

    def __init__(self, manifest: dict[str, Any], config: ModelConfig, role: str):
        self.encoder = load_encoder(manifest, config)
        self.role = role

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        from releval.retrieval.store import canonical_encode

        # The store's way (exact-length, fixed-shape batches): each vector a function of its text
        # alone, so Ray's batching gives the bytes an in-process encode gives.
        vectors, _ = canonical_encode(self.encoder, [str(text) for text in batch["text"]], self.role)
        if isinstance(vectors, np.ndarray):
            return {"row": batch["row"], "vector": vectors}
        # Sparse rows have different lengths: each travels as the bytes of its indices and weights.
        spans = list(zip(vectors.indptr[:-1], vectors.indptr[1:]))
        return {
            "row": batch["row"],
            "indices": np.array([vectors.indices[a:b].astype(np.int32).tobytes() for a, b in spans], dtype=object),
            "weights": np.array([vectors.data[a:b].astype(np.float32).tobytes() for a, b in spans], dtype=object),
            "width": np.full(len(spans), vectors.shape[1], dtype=np.int64),
        }


@contextlib.contextmanager
def ray_session(ray, settings: RaySettings) -> Iterator[None]:
    """Ray connected for the duration: a session the caller already has is used and left as is;
    otherwise a local instance is started (and shut down after) or the cluster at ``address`` is
    joined (``ray.shutdown`` then only disconnects this driver; the cluster keeps running)."""
    if ray.is_initialized():
        yield
        return
    quiet = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
    if settings.address is None:
        store = settings.object_store_mb * 1024 * 1024 if settings.object_store_mb else None
        ray.init(num_cpus=settings.num_cpus, object_store_memory=store, **quiet)
    else:
        ray.init(address=settings.address, log_to_driver=False, configure_logging=False)
    try:
        yield
    finally:
        ray.shutdown()


def batches_of(texts: Sequence[str], size: int) -> list:
    """Arrow tables of ``row, text``, one block per batch, so that batches spread over the actors."""
    import pyarrow as pa

    return [
        pa.table(
            {
                "row": np.arange(start, min(start + size, len(texts)), dtype=np.int64),
                "text": texts[start : start + size],
            }
        )
        for start in range(0, len(texts), size)
    ]


def encode_with_ray(
    manifest: dict[str, Any], config: ModelConfig, texts: Sequence[str], role: str, settings: RaySettings
):
    """``texts`` encoded under ``config``'s protocol for ``role`` by a pool of Ray actors, in input
    order: a float32 matrix (dense, static) or a canonical CSR matrix (sparse)."""
    if role not in ("query", "document"):
        raise ValueError(f"role must be 'query' or 'document', not {role!r}")
    ray = import_ray()
    placed = placed_config(config, settings)
    texts = [str(text) for text in texts]
    if not texts:  # nothing to distribute; the in-process encoder gives the empty result's shape
        return load_encoder(manifest, dataclasses.replace(placed, devices=("cpu",))).encode([], role)
    with ray_session(ray, settings):
        dataset = ray.data.from_arrow(batches_of(texts, settings.batch_size))
        # An actor that dies while loading the model is not restarted by Ray but replaced by Ray
        # Data, which by default fails the job on the first such death.
        dataset.context.max_consecutive_actor_init_deaths = settings.max_restarts
        with warnings.catch_warnings():
            # Ray 2.60 deprecates passing actor options as keywords but names no replacement for
            # max_restarts/max_task_retries; the version is pinned in the `ray` extra.
            warnings.filterwarnings("ignore", message=".*ray_remote_args.*deprecated")
            encoded = dataset.map_batches(
                EncodeBatches,
                fn_constructor_kwargs={"manifest": shipped_manifest(manifest), "config": placed, "role": role},
                batch_size=settings.batch_size,
                batch_format="numpy",
                compute=ray.data.ActorPoolStrategy(size=settings.actors),
                num_cpus=settings.cpus_per_actor,
                num_gpus=settings.gpus_per_actor,
                runtime_env={"env_vars": OFFLINE_ENVIRONMENT},
                max_restarts=settings.max_restarts,
                max_task_retries=settings.max_task_retries,
            )
        try:
            blocks = list(encoded.iter_batches(batch_size=None, batch_format="numpy"))
        except ray.exceptions.RayActorError as exc:
            if not exc.actor_init_failed:
                raise
            raise InputError(
                f"the Ray actors could not load model {config.name}: {last_line(str(exc))}", field="executor"
            ) from exc
    return in_input_order(blocks, len(texts))


def last_line(message: str) -> str:
    """The last non-empty line of a Ray error: the cause, as ``Type: message``."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    return lines[-1] if lines else message


def in_input_order(blocks: list[dict[str, np.ndarray]], count: int):
    """The encoded blocks as one matrix whose row i is text i; exactly one vector per text."""
    rows = np.concatenate([block["row"] for block in blocks]) if blocks else np.empty(0, dtype=np.int64)
    order = np.argsort(rows, kind="stable")
    if not np.array_equal(rows[order], np.arange(count)):
        missing = np.setdiff1d(np.arange(count), rows).size
        raise RuntimeError(
            f"ray returned {rows.size} vectors for {count} texts ({missing} texts missing, "
            f"{rows.size - np.unique(rows).size} duplicated)"
        )
    if "vector" in blocks[0]:
        vectors = np.concatenate([block["vector"] for block in blocks])[order]
        return np.ascontiguousarray(vectors, dtype=np.float32)
    return sparse_rows(blocks, order)


def sparse_rows(blocks: list[dict[str, np.ndarray]], order: np.ndarray):
    import scipy.sparse

    from releval.retrieval.sparse import as_canonical

    indices = [np.frombuffer(b, dtype=np.int32) for block in blocks for b in block["indices"]]
    weights = [np.frombuffer(b, dtype=np.float32) for block in blocks for b in block["weights"]]
    indices, weights = [indices[i] for i in order], [weights[i] for i in order]
    indptr = np.concatenate([[0], np.cumsum([len(x) for x in indices])]).astype(np.int64)
    width = int(blocks[0]["width"][0])
    matrix = scipy.sparse.csr_matrix(
        (
            np.concatenate(weights) if weights else np.empty(0, np.float32),
            np.concatenate(indices) if indices else np.empty(0, np.int32),
            indptr,
        ),
        shape=(len(indices), width),
    )
    return as_canonical(matrix)
