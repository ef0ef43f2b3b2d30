"""The dense family: a sentence-transformers model, one float32 vector per text."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from releval.retrieval.families import Family, check_kernels
from releval.retrieval.models import ModelConfig, encode, load_sentence_transformer, token_lengths


class DenseFamily(Family):
    name = "dense"

    def __init__(self, config: ModelConfig, manifest: dict[str, Any], model: Any = None):
        super().__init__(config, manifest, model)
        self.pool = None  # several devices: sentence-transformers' process pool, while device_pool() is open

    @classmethod
    def load(cls, manifest: dict[str, Any], config: ModelConfig) -> "DenseFamily":
        check_kernels(config)
        return cls(config, manifest, load_sentence_transformer(manifest, config))

    def encode(self, texts: Sequence[str], role: str) -> np.ndarray:
        return encode(self.model, texts, self.config, role, pool=self.pool)

    @contextlib.contextmanager
    def device_pool(self) -> Iterator["DenseFamily"]:
        """Several devices: one process pool for every encode call inside."""
        if len(self.config.devices) < 2 or self.pool is not None:
            yield self
            return
        self.pool = self.model.start_multi_process_pool(list(self.config.devices))
        try:
            yield self
        finally:
            self.model.stop_multi_process_pool(self.pool)
            self.pool = None

    def token_lengths(self, texts: Sequence[str], role: str) -> np.ndarray:
        return token_lengths(self.model, texts, self.prompt(role))

    def module_protocol(self) -> dict[str, Any]:
        """The sentence-transformers modules after the transformer (pooling, normalisation), by name."""
        pooling = next((module for module in self.model if type(module).__name__ == "Pooling"), None)
        mode = getattr(pooling, "pooling_mode", None) if pooling is not None else None
        return {
            "modules": [type(module).__name__ for module in self.model],
            "pooling": list(mode) if isinstance(mode, (list, tuple)) else mode,
        }


FAMILY = DenseFamily
