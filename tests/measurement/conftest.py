"""Fixtures of the compare and gate tests."""

from pathlib import Path

import pytest

from support.scored_project import Project, constructed, qids


@pytest.fixture
def project(tmp_path: Path) -> Project:
    """Reports for 60 queries and four configurations: base, better, worse and noise (see ``constructed``)."""
    proj = Project(tmp_path / "proj")
    ids = qids(60)
    proj.write_reports(constructed(), ids)
    proj.write_queries(ids)
    return proj
