"""The system Chromium for the tests that render a page (never a browser a test tool downloads)."""

import shutil

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Headless, no sandbox (CI runs as root), and none of the background connections a closed network refuses.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


def needs_chromium(purpose: str):
    """Skip (with the reason tests/conftest.py allows) where no system Chromium is installed."""
    return pytest.mark.skipif(
        CHROMIUM is None, reason=f"chromium is not installed (apt-get install -y chromium); {purpose}"
    )
