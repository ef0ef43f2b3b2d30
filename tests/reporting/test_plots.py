"""Plot data, Vega-Lite specs, DVC templates, PNGs, and pages that render without a network."""

import io
import json
import re
import subprocess
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from support import ROOT
from support.commands import run
from support.dvc_pipeline import PIPELINE
from support.projects import copy_project
from releval import paths
from releval.reporting import plots
from releval.measurement import stats
from releval.measurement import plot_tables
from releval.measurement.grid import compare_grid
from releval.measurement.pair import NotComparable
from releval.errors import InputError
from releval.measurement.metrics import Contract, evaluate
from releval.measurement.scoring import JUDGED_WARNING
from support.browser import CHROMIUM
from support.browser import CHROMIUM_FLAGS as BASE_FLAGS
from support.browser import needs_chromium as needs_chromium_for

CHROMIUM_FLAGS = [
    *BASE_FLAGS,
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--virtual-time-budget=15000",
]
needs_chromium = needs_chromium_for("the offline-rendering check needs a browser")


def long_table(values: dict[str, list[float]], metric="ndcg@10") -> pl.DataFrame:
    n = len(next(iter(values.values())))
    return pl.DataFrame(
        {
            "config_id": [c for c in values for _ in range(n)],
            "query_id": [f"q{i:02d}" for _ in values for i in range(n)],
            metric: [v for vs in values.values() for v in vs],
        }
    )


RNG = np.random.default_rng(7)
PER_QUERY = long_table(
    {"base": list(RNG.uniform(0, 1, 30)), "better": list(RNG.uniform(0.2, 1, 30)), "same": list(RNG.uniform(0, 1, 30))}
)


# --------------------------------------------------------------------------- tables


def test_interval_table_is_the_mean_with_a_paired_percentile_bootstrap():
    rows = plot_tables.interval_table(PER_QUERY, "ndcg@10", n_resamples=2000, seed=3)
    assert [r["config_id"] for r in rows] == sorted(
        ["base", "better", "same"], key=lambda c: -PER_QUERY.filter(pl.col("config_id") == c)["ndcg@10"].mean()
    )
    for row in rows:
        scores = PER_QUERY.filter(pl.col("config_id") == row["config_id"])["ndcg@10"].to_numpy()
        assert row["mean"] == pytest.approx(scores.mean())
        assert row["low"] < row["mean"] < row["high"]
        assert row["queries"] == 30 and row["confidence"] == 0.95
    matrix = np.column_stack(
        [
            PER_QUERY.filter(pl.col("config_id") == c).sort("query_id")["ndcg@10"].to_numpy()
            for c in ("base", "better", "same")
        ]
    )
    low, high = stats.percentile_interval(stats.bootstrap_means(matrix, 2000, 3))
    by_id = {r["config_id"]: r for r in rows}
    assert by_id["better"]["low"] == pytest.approx(low[1]) and by_id["better"]["high"] == pytest.approx(high[1])
    assert plot_tables.interval_table(PER_QUERY, "ndcg@10", n_resamples=2000, seed=3) == rows  # seeded


def test_interval_table_refuses_configurations_scored_on_different_queries():
    uneven = PER_QUERY.filter(~((pl.col("config_id") == "same") & (pl.col("query_id") == "q00")))
    with pytest.raises(NotComparable, match="same lacks 1 queries"):
        plot_tables.interval_table(uneven, "ndcg@10")


def test_difference_table_is_candidate_minus_baseline_per_query():
    rows = plot_tables.difference_table(PER_QUERY, "base", "ndcg@10")
    assert {r["config_id"] for r in rows} == {"better", "same"} and len(rows) == 60
    base = dict(PER_QUERY.filter(pl.col("config_id") == "base").select("query_id", "ndcg@10").iter_rows())
    better = dict(PER_QUERY.filter(pl.col("config_id") == "better").select("query_id", "ndcg@10").iter_rows())
    for row in rows:
        if row["config_id"] == "better":
            assert row["difference"] == better[row["query_id"]] - base[row["query_id"]]
    with pytest.raises(InputError, match="unknown baseline"):
        plot_tables.difference_table(PER_QUERY, "nope", "ndcg@10")


def test_recall_curve_comes_from_the_engine_and_never_decreases():
    qrels = pl.DataFrame({"query_id": ["1", "1", "1", "2"], "doc_id": ["a", "b", "c", "d"], "grade": [1, 2, 0, 1]})
    docs = [f"x{i}" for i in range(8)] + ["a", "d", "b"]
    run = pl.DataFrame(
        {
            "query_id": ["1"] * len(docs) + ["2"] * 3,
            "doc_id": docs + ["d", "y", "z"],
            "score": list(np.linspace(1, 0, len(docs))) + [0.9, 0.5, 0.1],
        }
    )
    rows = plot_tables.recall_curve_table({"r": run}, qrels, Contract(), max_k=12)
    values = [r["recall"] for r in rows]
    assert [r["k"] for r in rows] == list(range(1, 13))
    assert all(b >= a for a, b in zip(values, values[1:]))
    engine = evaluate(qrels, run, ["recall@1", "recall@9", "recall@11"], Contract()).mean
    assert values[0] == engine["recall@1"] and values[8] == engine["recall@9"] and values[10] == engine["recall@11"]
    assert values[0] == 0.5 and values[-1] == 1.0  # query 2 finds d at rank 1; query 1 needs rank 11
    with pytest.raises(InputError):
        plot_tables.recall_curve_table({"r": run}, qrels, Contract(), max_k=0)


def test_difference_interval_table_is_the_grids_paired_difference_largest_first():
    grid = compare_grid(PER_QUERY, "base", "ndcg@10", n_resamples=2000, seed=3)
    rows = plot_tables.difference_interval_table(grid)
    assert [r["config_id"] for r in rows] == sorted(
        ["better", "same"], key=lambda c: -next(g.mean_difference for g in grid.rows if g.config_id == c)
    )
    for row in rows:
        found = next(g for g in grid.rows if g.config_id == row["config_id"])
        assert (row["difference"], row["low"], row["high"]) == (found.mean_difference, *found.bootstrap_ci)
        assert row["verdict"] == found.verdict and row["p_holm"] == found.p_bootstrap_holm
        assert row["baseline"] == "base" and row["confidence"] == 0.95 and row["queries"] == 30
        assert row["low"] <= row["difference"] <= row["high"]
    # the paired interval, not the marginal one: the difference's, as the verdict reads it
    base = PER_QUERY.filter(pl.col("config_id") == "base").sort("query_id")["ndcg@10"].to_numpy()
    better = PER_QUERY.filter(pl.col("config_id") == "better").sort("query_id")["ndcg@10"].to_numpy()
    assert rows[0]["difference"] == pytest.approx((better - base).mean())


def test_quality_cost_table_reads_the_cost_figures_of_every_configuration():
    configs = {
        "a": {"ndcg@10": 0.5, "ops": {"index_bytes": 2_500_000, "dimension": 384}},
        "bm25": {"ndcg@10": 0.4, "ops": {"index_bytes": 1_000}},
    }
    rows = plot_tables.quality_cost_table(configs, "ndcg@10")
    # Machine figures (throughput, latency) are not plotted with quality: they live in reports/ops.json.
    assert rows[0] == {"config_id": "a", "metric": "ndcg@10", "quality": 0.5, "index_mb": 2.5}
    assert rows[1]["index_mb"] == 0.001
    priced = {"ep": {"ndcg@10": 0.6, "ops": {"index_bytes": 1_000, "index_cost": 0.0038, "query_cost_per_1k": 3e-4}}}
    assert plot_tables.quality_cost_table(priced, "ndcg@10")[0] == {
        "config_id": "ep",
        "metric": "ndcg@10",
        "quality": 0.6,
        "index_mb": 0.001,
        "index_cost": 0.0038,
        "query_cost_per_1k": 3e-4,
    }
    with pytest.raises(InputError, match="has no map"):
        plot_tables.quality_cost_table(configs, "map")


# --------------------------------------------------------------------------- specs and templates


def tables():
    return {
        "difference_ci": plot_tables.difference_interval_table(
            compare_grid(PER_QUERY, "base", "ndcg@10", n_resamples=500)
        ),
        "recall_curve": [{"config_id": c, "k": k, "recall": k / 10} for c in ("a", "b") for k in range(1, 11)],
        "quality_cost": [
            {
                "config_id": "a",
                "metric": "ndcg@10",
                "quality": 0.5,
                "index_mb": 1.0,
            },
            {
                "config_id": "b",
                "metric": "ndcg@10",
                "quality": 0.4,
                "index_mb": 0.4,
            },
        ],
        "difference_hist": plot_tables.difference_table(PER_QUERY, "base", "ndcg@10"),
    }


def _fields(node):
    if isinstance(node, dict):
        if isinstance(node.get("field"), str):
            yield node["field"]
        for value in node.values():
            yield from _fields(value)
    elif isinstance(node, list):
        for value in node:
            yield from _fields(value)


def test_specs_inline_their_data_and_encode_only_fields_the_rows_have():
    data = tables()
    specs = plots.vega_specs(data, "ndcg@10", "base")
    assert set(specs) == set(plots.PLOTS)
    for name, spec in specs.items():
        assert spec["$schema"].endswith("vega-lite/v5.json")
        assert spec["data"]["values"] == data[name]
        columns = set().union(*(row.keys() for row in data[name]))
        assert set(_fields(spec)) <= columns, name
        json.dumps(spec, allow_nan=False)


def test_committed_dvc_templates_are_the_ones_this_module_defines():
    folder = ROOT / "dvc_plots" / "templates"
    committed = {p.stem: json.loads(p.read_text()) for p in folder.glob("*.json")}
    assert committed == plots.dvc_templates()
    for name, template in committed.items():
        text = json.dumps(template)
        for anchor in ("<DVC_METRIC_DATA>", "<DVC_METRIC_X>", "<DVC_METRIC_TITLE>"):
            assert anchor in text, (name, anchor)
    definitions = {k: v for entry in plots.dvc_plot_definitions() for k, v in entry.items()}
    assert {Path(d["template"]).stem for d in definitions.values()} == set(committed)


def test_committed_offline_template_inlines_vega_and_loads_nothing():
    text = (ROOT / "dvc_plots" / "offline.html").read_text()
    assert plots.check_offline_template(text) == []
    assert "cdn.jsdelivr" not in text and not re.search(r"<script[^>]*src=", text)
    assert len(text) > 500_000  # vega + vega-lite + vega-embed, not a stub
    cdn = text.replace("</head>", '<script src="https://cdn.jsdelivr.net/npm/vega@5"></script></head>')
    assert any("URL" in p for p in plots.check_offline_template(cdn))
    assert plots.check_offline_template("<html>{scripts}{plot_divs}</html>")  # DVC would add CDN tags
    readme = (ROOT / "dvc_plots" / "README.md").read_text()
    for name, version in plots.VENDORED.items():
        assert f"{name}@{version}" in readme


def test_dvc_yaml_plots_are_the_ones_this_module_defines():
    # dvc.yaml reads them from the active dataset's reports folder (reports/ for the default dataset).
    active_plots = paths.rebase(paths.PLOTS, paths.REPORTS, paths.REPORTS_DIR_VAR).as_posix()
    assert PIPELINE["plots"] == plots.dvc_plot_definitions(plots_dir=active_plots)
    outs = [next(iter(o)) if isinstance(o, dict) else o for o in PIPELINE["stages"]["report"]["outs"]]
    assert active_plots in outs and all(
        Path(p).stem in plots.PLOTS for d in plots.dvc_plot_definitions() for v in d.values() for p in v["y"]
    )


def test_offline_template_refuses_scripts_it_cannot_inline():
    scripts = {"vega": "var vega = 1;", "vega-lite": "var vegaLite = 2;", "vega-embed": "var e = '</script>';"}
    with pytest.raises(InputError, match="vega-embed"):
        plots.offline_template(scripts)
    page = plots.offline_template({**scripts, "vega-embed": "function vegaEmbed() {}\n//# sourceMappingURL=x.map"})
    assert "sourceMappingURL" not in page and "{plot_divs}" in page and "{scripts}" not in page


def test_titles_and_labels_are_words_not_plot_ids():
    specs = plots.vega_specs(tables(), "ndcg@10", "base")
    for name, spec in specs.items():
        title = spec["title"]["text"]
        assert name not in title and title == plots.plot_title(name, "ndcg@10", "base"), title
    assert "difference from base" in specs["difference_ci"]["title"]["text"]
    with pytest.raises(InputError, match="unknown plot"):
        plots.plot_title("ndcg_ci", "ndcg@10", "base")


# --------------------------------------------------------------------------- PNGs


def _ink(png: bytes) -> float:
    from PIL import Image

    image = np.asarray(Image.open(io.BytesIO(png)).convert("L"))
    return float((image < 200).mean())


@pytest.mark.parametrize("name", plots.PLOTS)
def test_each_plot_renders_as_a_png_with_marks(name):
    data = tables()
    png = plots.render_png(name, data[name], "ndcg@10", "base")
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert _ink(png) > 0.01
    assert png == plots.render_png(name, data[name], "ndcg@10", "base")  # same data, same bytes


def test_png_changes_with_the_data_and_unknown_plots_are_refused():
    data = tables()
    moved = [
        {**row, "difference": row["difference"] / 2, "low": row["low"] / 2, "high": row["high"] / 2}
        for row in data["difference_ci"]
    ]
    assert plots.render_png("difference_ci", moved, "ndcg@10", "base") != plots.render_png(
        "difference_ci", data["difference_ci"], "ndcg@10", "base"
    )
    with pytest.raises(InputError, match="unknown plot"):
        plots.render_png("pie", [], "ndcg@10", "base")


# --------------------------------------------------------------------------- on a real pipeline


@pytest.mark.slow
def test_report_stage_writes_plot_data_that_agrees_with_the_scores(default_project):
    metrics = json.loads((default_project / "reports" / "metrics.json").read_text())
    folder = default_project / "reports" / "plots"
    for name in plots.PLOTS:
        assert json.loads((folder / f"{name}.json").read_text()), name
        assert _ink((folder / f"{name}.png").read_bytes()) > 0.01, name
    differences = {r["config_id"]: r for r in json.loads((folder / "difference_ci.json").read_text())}
    assert set(differences) == set(metrics["configs"]) - {"minilm/c256"}
    base = metrics["configs"]["minilm/c256"]["ndcg@10"]
    for cid, row in differences.items():
        assert row["difference"] == pytest.approx(metrics["configs"][cid]["ndcg@10"] - base, abs=1e-9)
        assert row["low"] <= row["difference"] <= row["high"] and row["baseline"] == "minilm/c256"
        assert row["verdict"] in plots.VERDICT_COLOURS
    curve = json.loads((folder / "recall_curve.json").read_text())
    at_100 = {r["config_id"]: r["recall"] for r in curve if r["k"] == 100}
    assert at_100 == {cid: row["recall@100"] for cid, row in metrics["configs"].items()}
    differences = json.loads((folder / "difference_hist.json").read_text())
    assert {r["baseline"] for r in differences} == {"minilm/c256"}
    report = (default_project / "reports" / "report.md").read_text()
    for heading in (
        "## Grid",
        "## Against the baseline `minilm/c256`",
        "## Slices",
        "## Worst queries",
        "## Evaluation card",
        "## Warnings",
    ):
        assert heading in report, heading
    assert "1. candidate bm25/c256 vs baseline minilm/c256" in report
    # A configuration whose top documents are mostly unjudged is warned about, and only such a one
    # (on this small, densely judged corpus none is: see the next test for one that is).
    assert_judged_warnings(report, metrics)
    assert "truncated at minilm's max_seq_length" in report
    status = run(["dvc", "status"], default_project)
    assert "up to date" in status.stdout, status.stdout


def assert_judged_warnings(report: str, metrics: dict) -> list[str]:
    """The report's judged@10 warnings are exactly those of the configurations below the threshold."""
    warnings = report.split("## Warnings")[1]
    low = []
    for cid, row in metrics["configs"].items():
        warned = f"- {cid}: judged@10 = {row['judged@10']:.2f}: most of its top documents are unjudged" in warnings
        assert warned == (row["judged@10"] < JUDGED_WARNING), (cid, row["judged@10"])
        low += [cid] if warned else []
    return low


@pytest.mark.slow
def test_report_warns_where_most_top_documents_are_unjudged(default_project, tmp_path):
    """Judgments that keep only the relevant documents leave most retrieved documents unjudged."""
    from releval.judging import judgments as jm

    project = copy_project(default_project, tmp_path / "sparse")
    folder = project / "data" / "judgments" / "v2"
    lines = (folder / "judgments.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    kept = [line for line in lines if json.loads(line)["grade"] >= 1]
    assert 0 < len(kept) < len(lines)
    manifest, errors = jm.read_manifest(folder / "manifest.yaml", expected_version="v2")
    assert manifest is not None, errors
    jm.write_version(folder, manifest, "".join(kept).encode("utf-8"))
    run(["dvc", "repro"], project)
    metrics = json.loads((project / "reports" / "metrics.json").read_text())
    report = (project / "reports" / "report.md").read_text()
    assert assert_judged_warnings(report, metrics)  # at least one configuration is warned about


def _chromium(*args):
    return subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.slow
@needs_chromium
def test_report_page_embeds_every_plot(default_project):
    page = (default_project / "reports" / "report.html").read_text()
    assert "<script" not in page and not re.search(r"""(src|href)=["']https?:""", page)
    dom = _chromium("--dump-dom", (default_project / "reports" / "report.html").as_uri()).stdout
    for name in plots.PLOTS:
        start = dom.index(f'id="figure-{name}"')
        assert '<img alt="' in dom[start : start + 300] and "data:image/png;base64," in dom[start : start + 600], name


def _screenshot_ink(page: Path, shot: Path) -> float:
    _chromium("--window-size=1000,2400", f"--screenshot={shot}", page.as_uri())
    return _ink(shot.read_bytes())


@pytest.mark.slow
@needs_chromium
def test_dvc_plots_show_renders_offline_with_the_committed_template(default_project, tmp_path):
    # No flag: .dvc/config names the offline template, so a plain `dvc plots show` uses it.
    ours = tmp_path / "offline"
    run(["dvc", "plots", "show", "-o", str(ours)], default_project)
    page = ours / "index.html"
    assert page.read_text().count("vegaEmbed('#") == 4
    dom = _chromium("--dump-dom", page.as_uri()).stdout
    assert dom.count("<canvas") == 4  # one drawn chart per plot (DVC embeds with the canvas renderer)
    rendered = _screenshot_ink(page, tmp_path / "ours.png")
    # Control: DVC's built-in page loads Vega from a CDN, which this browser cannot reach: blank.
    from dvc_render.html import PAGE_HTML

    default_template = tmp_path / "dvc_default.html"
    default_template.write_text(PAGE_HTML)
    cdn = tmp_path / "cdn"
    run(["dvc", "plots", "show", "--html-template", str(default_template), "-o", str(cdn)], default_project)
    blank = _screenshot_ink(cdn / "index.html", tmp_path / "cdn.png")
    assert blank < 0.001 and rendered > 0.005, (blank, rendered)
