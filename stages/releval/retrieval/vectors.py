"""A cell's vector files, for any family: dense and static models store one float32 matrix
(``embeddings.npy``), sparse models a canonical CSR matrix as three ``.npy`` arrays.

Kept apart from :mod:`releval.retrieval.encoders` so that stages which only read or write vectors
(index, the embedding store) do not import, and depend on, the model-loading code.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from releval import io

DENSE_FILE = "embeddings.npy"


def write_vectors(folder: str | Path, vectors) -> None:
    """A cell's vectors, byte-identical for identical vectors (no zip timestamps)."""
    if isinstance(vectors, np.ndarray):
        io.write_npy(Path(folder) / DENSE_FILE, vectors)
    else:
        from releval.retrieval.sparse import write_sparse

        write_sparse(folder, vectors)


def read_vectors(folder: str | Path):
    """A cell's vectors, of the kind :func:`write_vectors` wrote there: its files say which."""
    if (Path(folder) / DENSE_FILE).is_file():
        return io.read_npy(Path(folder) / DENSE_FILE)
    from releval.retrieval.sparse import read_sparse

    return read_sparse(folder)  # names the first file missing when there are no vectors at all
