"""The Cranfield collection in ../shared: extra tests that a user's clone cannot run, skipped with a reason."""

from pathlib import Path

import pytest

from support import ROOT

SHARED = ROOT.parent / "shared"
CRANFIELD = SHARED / "data" / "cranfield"

CRANFIELD_MISSING = f"Cranfield collection not found at {CRANFIELD} (extra tests; a clone alone has no ../shared)"


def require_cranfield() -> Path:
    if not (CRANFIELD / "cran.all.1400").exists():
        pytest.skip(CRANFIELD_MISSING)
    return CRANFIELD


needs_cranfield = pytest.mark.skipif(not (CRANFIELD / "cran.all.1400").is_file(), reason=CRANFIELD_MISSING)
