"""What every DVC stage script shares: offline mode, params, and errors that name their source."""

from __future__ import annotations

import os
import sys
import warnings
from typing import Callable

from releval.errors import InputError


def entry(main: Callable[[], None]) -> None:
    """Run a stage; bad input exits 2 with a one-line message, and outputs stay untouched."""
    offline_environment()
    warnings.simplefilter("default")
    try:
        main()
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)


def offline_environment() -> None:
    """Nothing is fetched from a model hub at run time."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")


def warn(message: str) -> None:
    """A loud warning: silent failures are what releval exists to surface."""
    print(f"WARNING: {message}", file=sys.stderr)
