"""What every DVC stage script shares: offline mode, params, and errors that name their source.

Users see releval's own messages only: each warning once, as one ``WARNING:`` line from
:func:`warn`. Python warnings of releval's own (:class:`RelevalWarning`) are printed that way;
third-party warnings and library log chatter are not shown, unless Python is asked for warnings
(``-W`` or ``PYTHONWARNINGS``), which developers use to see them all.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import warnings
from typing import Callable, Iterator

from releval.errors import InputError

# Libraries whose logging warnings (advice, deprecations, progress notes) are not for users.
QUIET_LOGGERS = ("transformers", "sentence_transformers", "huggingface_hub", "torch", "filelock", "urllib3", "ray")


class RelevalWarning(UserWarning):
    """A warning of releval's own: shown through :func:`warn`, once."""


def entry(main: Callable[[], None]) -> None:
    """Run a stage; bad input exits 2 with a one-line message, and outputs stay untouched."""
    offline_environment()
    with routed_warnings():
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
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


@contextlib.contextmanager
def routed_warnings() -> Iterator[None]:
    """Inside: :class:`RelevalWarning` prints through :func:`warn` (once per message and place);
    other Python warnings and library logging below ERROR are dropped (see the module docstring)."""
    asked = bool(sys.warnoptions)
    levels = {name: logging.getLogger(name).level for name in QUIET_LOGGERS}
    with warnings.catch_warnings():
        shown = warnings.showwarning
        if not asked:
            warnings.simplefilter("ignore")
            for name in QUIET_LOGGERS:
                logging.getLogger(name).setLevel(logging.ERROR)
        warnings.simplefilter("default", RelevalWarning)

        def show(message, category, filename, lineno, file=None, line=None) -> None:
            if issubclass(category, RelevalWarning):
                warn(str(message))
            else:
                shown(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        try:
            yield
        finally:
            for name, level in levels.items():
                logging.getLogger(name).setLevel(level)


def warn(message: str) -> None:
    """A loud warning: silent failures are what releval exists to surface."""
    print(f"WARNING: {message}", file=sys.stderr)
