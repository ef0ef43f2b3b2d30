"""What every DVC stage script shares: offline mode, params, and errors that name their source."""

from __future__ import annotations

import sys
import warnings
from typing import Callable

from releval.errors import InputError


def entry(main: Callable[[], None]) -> None:
    """Run a stage; bad input exits 2 with a one-line message, and outputs stay untouched."""
    from releval.models import offline_environment

    offline_environment()
    warnings.simplefilter("default")
    try:
        main()
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)


def warn(message: str) -> None:
    """A loud warning: silent failures are what releval exists to surface."""
    print(f"WARNING: {message}", file=sys.stderr)
