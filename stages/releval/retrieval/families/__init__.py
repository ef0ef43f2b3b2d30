"""The retriever families: how a model turns text into something searchable, one class per family.

Each module of this package is one family, named as configs name it (``family: sparse`` is
:mod:`releval.retrieval.families.sparse`), and defines ``FAMILY``, a subclass of :class:`Family`.
The encode, retrieve and rerank stages, the embedding store and the config check reach a family
only through that class, so adding a family is one new module here plus its config in
``conf/model/``. Vectors come in two kinds, whichever family made them: a float32 matrix (searched
by usearch or exactly, :mod:`releval.retrieval.dense`) or a CSR matrix over a vocabulary (searched
through an inverted index, :mod:`releval.retrieval.sparse`); a family says which it gives.
"""

from __future__ import annotations

import contextlib
import importlib
import pkgutil
import platform
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

import numpy as np

from releval import KERNELS
from releval.errors import InputError
from releval.retrieval.batching import batch_plan
from releval.retrieval.truncation import Truncation

# A model's config is a releval.retrieval.models.ModelConfig; that module imports this one (a config is
# checked by its family's class), so configs are typed here by this name alone.
ModelConfig = Any

FAMILIES = tuple(sorted(module.name for module in pkgutil.iter_modules(__path__)))


def family_class(name: str) -> type["Family"]:
    """The class of the family ``name`` (a config's ``family``)."""
    if name not in FAMILIES:
        raise InputError(f"expected one of {', '.join(FAMILIES)}", field="family")
    return importlib.import_module(f"{__name__}.{name}").FAMILY


def source_owner(kind: str) -> type["Family"] | None:
    """The family that alone loads sources of this kind (``wordllama``, ``endpoint``), if one does."""
    return next((family for family in map(family_class, FAMILIES) if kind in family.own_sources), None)


def check_kernels(config: ModelConfig) -> None:
    """torch runs the kernels :data:`releval.KERNELS` pins (a transformer on an x86 CPU), or the vectors
    would be this machine's, not those every other machine computes: refused, naming why."""
    if not KERNELS or not str(config.devices[0]).startswith("cpu"):
        return
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return
    import torch

    wanted = KERNELS["ATEN_CPU_CAPABILITY"].upper()
    running = torch.backends.cpu.get_cpu_capability()
    if running != wanted:
        raise InputError(
            f"torch runs its {running} kernels, not the {wanted} ones releval pins so that vectors are the same "
            "bits on every machine: torch computed something before releval was imported (import releval "
            "first), or this CPU lacks AVX2 (RELEVAL_KERNELS=native lets torch choose; the vectors are then "
            "this machine's own)",
            field=f"models.{config.name}",
        )


class Family:
    """A loaded model of one family, under its config's declared protocol: what the stages call.

    Class attributes and class methods answer what a stage needs before (or without) loading the
    model; instances encode. A family that also has ``encode_to_store(store, keys, texts, role,
    on_encoded) -> token counts`` writes its vectors to the embedding store itself, batch by batch as
    they arrive (:func:`releval.retrieval.store.encode_through_store`).
    """

    name: ClassVar[str]
    sparse: ClassVar[bool] = False  # vectors: a CSR matrix over a vocabulary, else a float32 matrix
    torch_kernels: ClassVar[bool] = True  # computed by torch on this machine: kernels pinned and recorded
    accelerators: ClassVar[bool] = True  # may run on a GPU (the ray executor places it there)
    own_sources: ClassVar[tuple[str, ...]] = ()  # source kinds only this family loads
    sources_rule: ClassVar[str] = ""  # the one line that says so, when a config breaks it
    remote: ClassVar[bool] = False  # served elsewhere, configured by the config's `endpoint` mapping
    dimension: ClassVar[bool] = False  # the config names which trained dimension to load

    def __init__(self, config: ModelConfig, manifest: dict[str, Any], model: Any = None):
        self.config, self.manifest, self.model = config, manifest, model

    @property
    def family(self) -> str:
        return self.name

    @classmethod
    def load(cls, manifest: dict[str, Any], config: ModelConfig) -> "Family":
        """The model the `model` stage's manifest names."""
        raise NotImplementedError

    @classmethod
    def check_config(cls, config: ModelConfig, where: str) -> None:
        """Refuse, naming the field, a config this family cannot honour (beyond every family's checks)."""

    @classmethod
    def protocol(cls, config: ModelConfig) -> dict[str, Any]:
        """The use protocol recorded next to every score the model produces (:meth:`ModelConfig.protocol`)."""
        return {
            "family": cls.name,
            **({"dimension": config.dimension} if config.dimension is not None else {}),
            "query_prompt": config.query_prompt,
            "document_prompt": config.document_prompt,
            "normalize": config.normalize,
            "max_seq_length": config.max_seq_length,
            "dtype": config.dtype,
            "trust_remote_code": config.trust_remote_code,
        }

    @classmethod
    def computed_tokens_cap(cls, config: ModelConfig) -> int | None:
        """How many tokens of each text the model computes on (None: all of them): the cost of an encode."""
        return config.max_seq_length

    @classmethod
    def cut(cls, config: ModelConfig, lengths: np.ndarray) -> Truncation:
        """How the model's input limit cuts texts of these token counts."""
        return Truncation(lengths, config.max_seq_length)

    @classmethod
    def namespace_terms(cls, manifest: dict[str, Any], config: ModelConfig) -> dict[str, Any]:
        """What, besides the text, its weights and its role's prompt, decides a vector: the embedding
        store's namespace (:func:`releval.retrieval.store.namespace_terms`)."""
        return {
            **{k: v for k, v in config.protocol().items() if k not in ("query_prompt", "document_prompt")},
            "device_type": str(config.devices[0]).split(":")[0],
            "batching": batch_plan(config).describe(),
            # torch's kernels (releval.KERNELS): vectors stored before they were pinned, or under
            # RELEVAL_KERNELS=native, are this machine's own
            **({"kernels": dict(KERNELS) or "native"} if cls.torch_kernels else {}),
        }

    @classmethod
    def encode_figures(
        cls, config: ModelConfig, lengths: np.ndarray, keys: np.ndarray, loaded: "Family | None"
    ) -> dict[str, Any]:
        """encode.json's figures of this family beyond every family's, from a cell's texts' token counts
        and sha256 keys (endpoint: tokens, requests, cost); ``loaded``: the model, where this run loaded it."""
        return {}

    @classmethod
    def query_cost_figures(cls, config: ModelConfig, lengths: np.ndarray) -> dict[str, Any]:
        """run.json's cost of encoding 1,000 queries of these token counts, where the family prices it."""
        return {}

    def prompt(self, role: str) -> str:
        return self.config.query_prompt if role == "query" else self.config.document_prompt

    def encode(self, texts: Sequence[str], role: str) -> Any:
        """Vectors of ``texts`` as a query ("query") or a document ("document")."""
        raise NotImplementedError

    @contextlib.contextmanager
    def device_pool(self) -> Iterator["Family"]:
        """A context inside which several encode calls share the family's devices."""
        yield self

    def token_lengths(self, texts: Sequence[str], role: str) -> np.ndarray:
        """Each text's token count as the model tokenizes it (prompt and special tokens included)."""
        raise NotImplementedError

    def seen_lengths(self, texts: Sequence[str], role: str) -> tuple[np.ndarray, np.ndarray]:
        """Each text's token count as tokenized, and as the model sees it once cut."""
        lengths = self.token_lengths(texts, role)
        return lengths, np.minimum(lengths, self.cut(self.config, lengths).max_seq_length)

    def truncation(self, texts: Sequence[str], role: str = "document") -> Truncation:
        """How the model's input limit cuts ``texts`` under the role's prompt."""
        return self.cut(self.config, self.token_lengths(texts, role))

    def module_protocol(self) -> dict[str, Any]:
        """What the loaded model does beyond its config (pooling, activation, vocabulary), recorded per run."""
        raise NotImplementedError
