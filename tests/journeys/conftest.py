"""The journey suite: what a user types, as the docs write it, on a fresh clone (`make test-journeys`).

Every test here is marked ``journey`` (left out of `make test` and `make test-heavy`; CI runs
`make test-journeys`). Tests run in file order (the target turns random order off): a journey's
later steps continue the state its earlier ones left, as a user's shell does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        if Path(str(item.fspath)).is_relative_to(HERE):
            item.add_marker(pytest.mark.journey)
