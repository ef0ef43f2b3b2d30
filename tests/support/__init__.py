"""Helpers shared by the test modules, one concern per module; tests/conftest.py holds only fixtures and hooks.

Here: the repository's locations, so that no test depends on how deep its folder is, and the offline setting.
"""

import os
import sys
from pathlib import Path

# Set before any test imports a model library: models load from disk, never from the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[2]
TEST_DATA = ROOT / "tests" / "data"
BIN = Path(sys.executable).parent  # the virtual environment's scripts: releval, dvc
