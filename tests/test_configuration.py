"""What you configure is what runs: the grid in params.yaml is exactly what is scored, overrides
stick through `releval params` and `dvc exp run`, and an edited conf/ is never "up to date".

Real `dvc repro` / `dvc exp run` on a copy of the default project (tests/conftest.py).
"""

import json

import pytest

from support.commands import ran_stages, run
from support.projects import copy_project
from support.pydocs_mini import MINI_CONFIGS

pytestmark = [pytest.mark.slow, pytest.mark.heavy]

C256 = {c for c in MINI_CONFIGS if "/c256" in c}


def scored(project) -> set[str]:
    return set(json.loads((project / "reports" / "metrics.json").read_text())["configs"])


def test_shrinking_and_regrowing_the_grid_scores_exactly_its_cells(default_project, tmp_path):
    project = copy_project(default_project, tmp_path / "project")
    run(["releval", "params", "grid.chunkings=[c256]"], project)
    shrunk = run(["dvc", "repro"], project)
    log = shrunk.stdout + shrunk.stderr
    assert {"score", "archive", "report"} <= ran_stages(shrunk.stdout)
    assert not any("c512" in stage for stage in ran_stages(shrunk.stdout))
    assert scored(project) == C256
    assert "c512" not in (project / "reports" / "grid.md").read_text()
    assert f"score: ignored {len(MINI_CONFIGS - C256)} run folder(s) of configurations no longer in the grid" in log
    quality = json.loads((project / "reports" / "quality.json").read_text())
    assert set(quality["ndcg@10"]) == set(quality["judged@10"]) == C256
    assert quality["queries"] == 12  # the dev queries of the mini set

    # `dvc exp run` composes from conf/, where `releval params` recorded grid.chunkings=[c256]:
    # the -S override is applied on top of it, nothing reverts to conf/'s defaults.
    run(["dvc", "exp", "run", "-S", "grid.chunkings=[c256,c512]", "-S", "fusions.rrf.k=30"], project)
    assert scored(project) == MINI_CONFIGS
    params = (project / "params.yaml").read_text()
    assert "k: 30" in params and "- c512" in params
    # ...and `make repro` (releval params) will not silently drop what the experiment set.
    refused = run(["releval", "params"], project, check=False)
    assert refused.returncode == 2
    assert "fusions.rrf.k" in refused.stderr and "grid.chunkings" in refused.stderr


def test_editing_conf_without_recomposing_stops_dvc_repro(default_project, tmp_path):
    project = copy_project(default_project, tmp_path / "project")
    metric = project / "conf" / "metric" / "default.yaml"
    metric.write_text(metric.read_text().replace("primary: ndcg@10", "primary: mrr@10"))
    stale = run(["dvc", "repro"], project, check=False)
    assert stale.returncode != 0
    assert "conf/ changed since this file was composed; run `make repro`" in stale.stdout + stale.stderr
    assert ran_stages(stale.stdout) <= {"params"}
    run(["releval", "params"], project)
    fresh = run(["dvc", "repro"], project)
    assert "params" in ran_stages(fresh.stdout) and "report" in ran_stages(fresh.stdout)
    assert json.loads((project / "reports" / "metrics.json").read_text())["contract"]["primary"] == "mrr@10"
