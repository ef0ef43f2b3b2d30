"""Fixtures shared by every test folder, and the hooks that fail a run on a skip that is not allowed.

Helpers that tests import live in tests/support/.
"""

from pathlib import Path

import pytest

from support.commands import run
from support.cranfield import require_cranfield
from support.pydocs_mini import MINI_CHUNKINGS, make_pydocs_project


# --------------------------------------------------------------------------- skips are failures unless allowed

# Each allowed skip, by the start of its reason, with why it is acceptable. Any other skip fails
# the run: a skip must never hide a feature that is missing on a user's machine.
ALLOWED_SKIPS = {
    "Cranfield collection not found": "extra tests on ../shared data, which a user's clone does not have",
    "chromium is not installed": "the screenshot test needs a system Chromium, which not every machine can install",
    "snapshot made with Python": "the pydocs corpus regenerates byte for byte only on the Python build that made it",
}
_SKIPS: list[tuple[str, str]] = []


def pytest_runtest_logreport(report) -> None:
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _SKIPS.append((report.nodeid, reason.removeprefix("Skipped: ")))


def unallowed_skips(skips: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(node, reason) for node, reason in skips if not reason.startswith(tuple(ALLOWED_SKIPS))]


def pytest_terminal_summary(terminalreporter) -> None:
    bad = unallowed_skips(_SKIPS)
    terminalreporter.write_line(f"skips: {len(_SKIPS)} ({len(_SKIPS) - len(bad)} allowed, {len(bad)} not allowed)")
    for node, reason in bad:
        terminalreporter.write_line(f"NOT ALLOWED skip: {node}: {reason}", red=True)


def pytest_sessionfinish(session, exitstatus) -> None:
    if unallowed_skips(_SKIPS) and exitstatus == 0:
        session.exitstatus = 1


# --------------------------------------------------------------------------- what make test leaves to make test-heavy


@pytest.hookimpl(tryfirst=True)  # before `-m` selects: the mark must be there when it looks
def pytest_collection_modifyitems(config, items) -> None:
    """A test on ``default_project`` is heavy: the fixture runs the whole default grid through
    `dvc repro` (about 60 stages, 7 minutes of this box's 2 cores), which alone would take half of
    make test's 15 minutes. `make test-heavy` runs them; CI runs both."""
    for item in items:
        if "default_project" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.heavy)


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def cranfield() -> Path:
    return require_cranfield()


@pytest.fixture(scope="session")
def default_project(tmp_path_factory) -> Path:
    """The shipped default configuration (both models, two chunkings, BM25, RRF, the reranker),
    run once by a real `dvc repro` on the small pydocs data and committed. Read-only: a test that
    changes anything works on ``copy_project(default_project, ...)``."""
    project = make_pydocs_project(tmp_path_factory.mktemp("default") / "project", MINI_CHUNKINGS)
    run(["git", "add", "-A"], project)
    run(["git", "commit", "-qm", "inputs"], project)
    result = run(["dvc", "repro"], project)
    (project.parent / "repro.log").write_text(result.stdout + result.stderr)
    run(["git", "add", "-A"], project)
    run(["git", "commit", "-qm", "first run"], project)
    return project
