"""Inputs longer than a model takes: what each family's truncation accounting reports."""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class Truncation:
    """Inputs longer than a model's max_seq_length: content tokens the model never sees.

    ``lengths`` counts each input as the model tokenizes it (prompt and special tokens
    included); the model keeps its special tokens and cuts content, so every token past
    ``max_seq_length`` is a content token lost.
    """

    lengths: np.ndarray
    max_seq_length: int

    @property
    def inputs(self) -> int:
        return len(self.lengths)

    @property
    def truncated(self) -> int:
        """Inputs that lose at least one content token."""
        return int((self.lengths > self.max_seq_length).sum())

    @property
    def rate(self) -> float:
        return self.truncated / max(self.inputs, 1)

    @property
    def seen_tokens(self) -> int:
        return int(np.minimum(self.lengths, self.max_seq_length).sum())

    @property
    def lost_tokens(self) -> int:
        return int(self.lengths.sum()) - self.seen_tokens

    @property
    def lost_share(self) -> float:
        """Share of all tokens never encoded."""
        return 1.0 - self.seen_tokens / max(int(self.lengths.sum()), 1)

    def warning(self, model: str, chunking: str, threshold: float = 0.0) -> str | None:
        """The one warning about lost content tokens, when more than ``threshold`` of inputs lose some."""
        if not self.truncated or self.rate <= threshold:
            return None
        return (
            f"{model}/{chunking}: {self.truncated} of {self.inputs} chunks ({self.rate:.1%}) are longer than "
            f"max_seq_length={self.max_seq_length} as {model} tokenizes them (prompt and special tokens "
            f"included); {self.lost_tokens} content tokens ({self.lost_share:.1%} of all) are never encoded"
        )
