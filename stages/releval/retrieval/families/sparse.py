"""The sparse family: a learned sparse model (SPLADE), vocabulary-sized term weights per text."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from releval.errors import InputError
from releval.retrieval.families import Family, check_kernels
from releval.retrieval.models import ModelConfig, model_folder, token_lengths


class SparseFamily(Family):
    name = "sparse"
    sparse = True

    @classmethod
    def check_config(cls, config: ModelConfig, where: str) -> None:
        if config.normalize:
            raise InputError(
                "a sparse model's scores are dot products of term weights; set normalize: false",
                file="params.yaml",
                field=f"{where}.normalize",
            )

    @classmethod
    def load(cls, manifest: dict[str, Any], config: ModelConfig) -> "SparseFamily":
        from releval.retrieval.sparse import load_sparse_encoder  # scipy and sentence-transformers: only here

        check_kernels(config)
        return cls(config, manifest, load_sparse_encoder(model_folder(manifest), config))

    def encode(self, texts: Sequence[str], role: str):
        """A canonical CSR matrix over the vocabulary."""
        from releval.retrieval.sparse import encode_sparse

        return encode_sparse(self.model, texts, self.config, role)

    def token_lengths(self, texts: Sequence[str], role: str) -> np.ndarray:
        return token_lengths(self.model, texts, self.prompt(role))

    def module_protocol(self) -> dict[str, Any]:
        from releval.retrieval.sparse import sparse_protocol

        return sparse_protocol(self.model)


FAMILY = SparseFamily
