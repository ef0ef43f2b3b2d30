"""The static family: a static-embedding model (WordLlama), averaged token vectors, no transformer pass."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from releval.errors import InputError
from releval.retrieval.families import Family
from releval.retrieval.models import ModelConfig, source_kind
from releval.retrieval.static import (
    NO_TRUNCATION,
    encode_static,
    load_static,
    static_protocol,
    static_token_lengths,
    static_weights_sha256,
)
from releval.retrieval.truncation import Truncation


class StaticFamily(Family):
    name = "static"
    torch_kernels = False  # numpy on the CPU
    accelerators = False
    own_sources = ("wordllama",)
    sources_rule = "the static family loads wordllama:<config> sources, and only those"
    dimension = True

    @classmethod
    def check_config(cls, config: ModelConfig, where: str) -> None:
        if not (isinstance(config.dimension, int) and config.dimension > 0):
            raise InputError(
                "a static model needs its dimension (e.g. 256)", file="params.yaml", field=f"{where}.dimension"
            )

    @classmethod
    def load(cls, manifest: dict[str, Any], config: ModelConfig) -> "StaticFamily":
        _, name = source_kind(config.source)
        if static_weights_sha256(name, config.dimension) != manifest["weights_sha256"]:
            raise InputError(
                "model weights differ from those the `model` stage recorded; run `dvc repro`",
                file=config.source,
                field="weights_sha256",
            )
        return cls(config, manifest, load_static(name, config.dimension, config))

    @classmethod
    def computed_tokens_cap(cls, config: ModelConfig) -> int | None:
        return None

    @classmethod
    def cut(cls, config: ModelConfig, lengths: np.ndarray) -> Truncation:
        """WordLlama never truncates: every input keeps all its tokens, whatever max_seq_length says."""
        return Truncation(lengths, NO_TRUNCATION)

    def encode(self, texts: Sequence[str], role: str) -> np.ndarray:
        return encode_static(self.model, texts, self.config, role)

    def token_lengths(self, texts: Sequence[str], role: str) -> np.ndarray:
        return static_token_lengths(self.model, texts, self.prompt(role))

    def module_protocol(self) -> dict[str, Any]:
        return static_protocol(self.model)


FAMILY = StaticFamily
