"""How many texts of one token length share a forward pass (:mod:`releval.retrieval.store` explains why)."""

from __future__ import annotations

import dataclasses

# On CPUs, batches of texts shorter than this many tokens are filled to a fixed row count.
FILL_BELOW_CPU = 64


@dataclasses.dataclass(frozen=True)
class BatchPlan:
    """How many texts of one token length share a forward pass.

    Groups of ``rows`` texts; a group's last batch is filled up to ``rows`` with repeats of its own
    texts (extra vectors dropped) when the length is under ``fill_below``. Long texts are not
    filled: with at least ``fill_below`` rows per text in every matrix product, the kernels treat
    each row alike whatever the row count (measured, see the module docstring), and filling would
    cost up to ``rows - 1`` wasted texts per distinct length.
    """

    rows: int
    fill_below: int

    def describe(self) -> str:
        return f"exact-length, {self.rows} rows, filled below {self.fill_below} tokens"


def batch_plan(config) -> BatchPlan:
    """The model's batch size; on accelerators every batch is filled (cheap there, and their
    kernels are chosen per shape), on CPUs only batches of texts shorter than :data:`FILL_BELOW_CPU`."""
    device = str(config.devices[0]).split(":")[0]
    if device == "cpu":
        return BatchPlan(config.batch_size, FILL_BELOW_CPU)
    return BatchPlan(config.batch_size, 2**31)
