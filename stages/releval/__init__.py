"""releval: declarative, data-versioned retrieval evaluation."""

import importlib.util as _util
import os as _os
import sys as _sys

__version__ = "0.1.0"

# A stage run by a Python without the project's environment (`dvc repro` from a shell where the
# venv is not active: `python` is the system's) fails on its first third-party import; say what to do.
if _util.find_spec("polars") is None:
    _sys.exit(
        f"releval: this Python ({_sys.executable}) lacks releval's dependencies (no module 'polars'): "
        "activate the project's environment first (`source .venv/bin/activate`; `make setup` makes it), "
        "or run `make repro`"
    )

# Vectors that are the same bits on every x86 machine with AVX2. torch picks its CPU kernels per
# machine (AVX-512 where there is AVX-512, AVX2 elsewhere), and kernels of different widths sum in a
# different order: all-MiniLM-L6-v2 gave different bits in every vector on one machine with and without
# AVX-512 (|Δ| up to 1.5e-7), so every run, archive key and history row of a transformer model moved
# from machine to machine. Pinned here, before torch loads (it reads them at its first operation;
# releval is imported first by every stage and command), to one branch each:
KERNELS = {
    "ATEN_CPU_CAPABILITY": "avx2",  # torch's own vectorised kernels: layer norm, softmax, sums, pooling
    "ONEDNN_MAX_CPU_ISA": "AVX2",  # oneDNN's (torch's GELU)
    # MKL's matrix products (every linear layer): its reproducible AVX2 branch; STRICT: the same bits
    # whatever the number of threads (unpinned, one and two threads gave different vectors)
    "MKL_CBWR": "AVX2,STRICT",
}
# RELEVAL_KERNELS=native leaves the choice to torch: faster on a CPU with AVX-512 (MiniLM encoded
# ~1.4x faster on one), but the vectors, runs and archive keys are then this machine's own.
if _os.environ.get("RELEVAL_KERNELS") == "native":
    KERNELS = {}
_os.environ.update(KERNELS)
