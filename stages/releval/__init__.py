"""releval: declarative, data-versioned retrieval evaluation."""

import importlib.util as _util
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
