"""Where an encode stage computes the vectors the store lacks: in this process, or on Ray.

Params section ``encode`` (conf/config.yaml)::

    encode:
      executor: local      # local | ray
      ray: {...}           # releval.retrieval.ray_executor.RaySettings

Not a contract term: either executor computes each vector the store's way
(:func:`releval.retrieval.store.canonical_encode`), so the vectors are the same; only where and
how fast differ. Actors given GPUs encode on CUDA, which is part of the store's namespace.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from releval.errors import InputError
from releval.retrieval.models import ModelConfig

EXECUTORS = ("local", "ray")


@dataclasses.dataclass(frozen=True)
class Executor:
    kind: str = "local"
    ray: Any = None  # RaySettings when kind == "ray"

    @classmethod
    def from_params(cls, data: dict[str, Any]) -> "Executor":
        unknown = sorted(set(data) - {"executor", "ray"})
        if unknown:
            raise InputError(f"unknown key {unknown[0]!r} (expected executor, ray)", file="params.yaml", field="encode")
        kind = data.get("executor", "local")
        if kind not in EXECUTORS:
            raise InputError(f"expected one of {', '.join(EXECUTORS)}", file="params.yaml", field="encode.executor")
        if kind == "local":
            return cls()
        from releval.retrieval.ray_executor import RaySettings

        return cls("ray", RaySettings.from_params(data.get("ray") or {}, where="encode.ray"))

    def placed(self, config: ModelConfig) -> ModelConfig:
        """The config as the vectors are computed (Ray actors with GPUs: on CUDA)."""
        if self.kind == "ray":
            from releval.retrieval.ray_executor import placed_config

            return placed_config(config, self.ray)
        return config

    def compute(self, manifest: dict[str, Any], config: ModelConfig, role: str) -> Callable | None:
        """``compute(encoder, texts) -> (vectors, token lengths)`` for the store; None: in process."""
        if self.kind == "local":
            return None
        from releval.retrieval.ray_executor import encode_with_ray

        def on_ray(encoder, texts):
            return encode_with_ray(manifest, config, texts, role, self.ray), encoder.token_lengths(texts, role)

        return on_ray

    def describe(self) -> dict[str, Any]:
        if self.kind == "local":
            return {"kind": "local"}
        settings = {k: v for k, v in dataclasses.asdict(self.ray).items() if k != "address"}
        return {"kind": "ray", **settings, "cluster": bool(self.ray.address)}
