"""report.md on a constructed repository: one verdict per comparison, slices too small for a
verdict, the relevance-threshold check, and the conclusion it opens with.

The repository is what `dvc repro` leaves before the report stage: runs whose nDCG@10 per query
is set by where each query's one relevant document is ranked, scored by the metric engine, so
every number in the report is a real computation. One candidate ('slight') is a regression by
its own bootstrap test (p < 0.05) but not after Holm over the grid's four comparisons.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower

from releval import io
from releval.config import load_params
from releval.measurement import holdout, stats
from releval.measurement.metrics import Contract, evaluate
from releval.reporting.evaluation_report import EvaluationReport, build_report, read_inputs
from releval.retrieval import runs
from support import ROOT

N_QUERIES = 40
RESAMPLES = 2000
METRICS = ["ndcg@10", "recall@100", "hit@10", "judged@10"]
SLICES = {"nav": range(0, 3), "long": range(0, 20)}  # 3 queries: no verdict; 20: a verdict


def rank_of_relevant() -> dict[str, list[int | None]]:
    """Per configuration, the rank of each query's relevant document (None: not retrieved)."""
    base = [2] * N_QUERIES
    slight = list(base)
    for i in range(8):
        slight[i] = 5  # 8 queries lose a little ...
    slight[N_QUERIES - 1] = 1  # ... one gains
    worse = [None if i < 20 else 2 for i in range(N_QUERIES)]
    better = [1 if i % 4 else 2 for i in range(N_QUERIES)]
    return {"base/c1": base, "slight/c1": slight, "worse/c1": worse, "better/c1": better, "same/c1": list(base)}


def constructed_repo(root: Path) -> Path:
    """The files the report stage reads, for five configurations over 40 dev queries."""
    work = root / "data" / "work"
    work.mkdir(parents=True)
    ids = [f"q{i:02d}" for i in range(N_QUERIES)]
    slices = [[name for name, members in SLICES.items() if i in members] for i in range(N_QUERIES)]
    queries = pl.DataFrame(
        {
            "query_id": ids,
            "text": [f"query {q}" for q in ids],
            "split": ["dev"] * N_QUERIES,
            "slices": pl.Series(slices, dtype=pl.List(pl.Utf8)),
            "must_never_break": [False] * N_QUERIES,
        }
    )
    # every retrieved filler judged non-relevant: judged@10 = 1, so each comparison gets a verdict
    fillers = [(q, f"{q}-filler{j}", 0) for q in ids for j in range(1, 6)]
    qrels = pl.DataFrame(
        [(q, f"{q}-rel", 2) for q in ids] + fillers,
        schema={"query_id": pl.Utf8, "doc_id": pl.Utf8, "grade": pl.Int64},
        orient="row",
    )
    docs = pl.DataFrame({"doc_id": ["d0"], "title": [""], "text": ["text"], "sha256": ["h0"]})
    docs.write_parquet(work / "docs.parquet")
    queries.write_parquet(work / "queries.parquet")
    qrels.write_parquet(work / "qrels.parquet")
    (root / "qrels.txt").write_text("whatever\n")
    (work / "judgments.json").write_text(
        json.dumps(
            {
                "version": "v1",
                "source": "qrels.txt",
                "source_sha256": io.sha256_file(root / "qrels.txt"),
                "scale": {"0": "nothing", "1": "pointer", "2": "substantial", "3": "answers"},
                "counts": {"judgments": N_QUERIES},
            }
        )
    )
    configs, lineage, per_query = {}, {}, []
    for cid, ranks in rank_of_relevant().items():
        rows = []
        for q, rank in zip(ids, ranks):
            docs_in_order = [f"{q}-filler{j}" for j in range(1, 6)]
            if rank is not None:
                docs_in_order.insert(rank - 1, f"{q}-rel")
            rows += [(q, f"{d}#0", d, 1.0 - j / 10, j + 1) for j, d in enumerate(docs_in_order)]
        run = pl.DataFrame(rows, schema=runs.RUN_SCHEMA, orient="row")
        run_dir = work / "runs" / cid.replace("/", "_")
        ops = {"index_bytes": 1024}
        runs.write_run(
            run_dir,
            run,
            {"config_id": cid, "kind": "bm25", "model": None, "chunking": "c1", "inputs": [], "ops": ops, "models": {}},
        )
        evaluation = evaluate(
            qrels,
            runs.collapse_to_documents(run).select("query_id", "doc_id", "score"),
            METRICS,
            Contract(),
            slices={q: s for q, s in zip(ids, slices) if s},
        )
        configs[cid] = {**evaluation.mean, "ops": ops, "counts": evaluation.counts, "slices": evaluation.slices}
        lineage[cid] = {
            "models": {},
            "inputs": [],
            "run_dir": str(run_dir.relative_to(root)),
            "run_sha256": io.sha256_file(run_dir / "run.parquet"),
        }
        per_query.append(evaluation.per_query.with_columns(pl.lit(cid).alias("config_id")))
    contract = {
        **Contract().to_dict(),
        "metrics": METRICS,
        "primary": "ndcg@10",
        "collapse": "first",
        "dataset": "constructed",
        "judgments_version": "v1",
        "judgments_sha256": "x",
        "queries": N_QUERIES,
        "split": "dev",
        "holdout_queries_sealed": 0,
    }
    reports = root / "reports"
    reports.mkdir()
    (reports / "metrics.json").write_text(json.dumps({"contract": contract, "configs": configs}))
    (reports / "lineage.json").write_text(json.dumps(lineage))
    pl.concat(per_query).select("config_id", pl.exclude("config_id")).write_parquet(reports / "per_query.parquet")
    (root / "params.yaml").write_text(
        json.dumps(
            {
                "dataset": {
                    "name": "constructed",
                    "corpus": {"path": "corpus.jsonl", "format": "jsonl"},
                    "queries": {"path": "queries.jsonl", "format": "releval"},
                    "subset": {"docs": None},
                },
                "judgments": {"version": "v1", "path": "qrels.txt", "format": "trec"},
                "models": {},
                "grid": {"baseline": "base/c1"},
            }
        )
    )
    shutil.copytree(ROOT / "dvc_plots", root / "dvc_plots")
    return root


@pytest.fixture(scope="module")
def built_report(tmp_path_factory) -> tuple[Path, EvaluationReport]:
    """The constructed repository and everything the report stage builds from it."""
    root = constructed_repo(tmp_path_factory.mktemp("constructed"))
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.chdir(root)  # lineage's run folders and the code state are relative to the repository
    try:
        inputs = read_inputs(Path("reports"), Path("data/work"), "reports/holdout_access.jsonl")
        report = build_report(inputs, load_params("params.yaml"), "dvc_plots/offline.html", RESAMPLES, seed=0, worst=5)
    finally:
        monkeypatch.undo()
    return root, report


@pytest.fixture(scope="module")
def built(built_report) -> tuple[Path, str]:
    """The constructed repository and the report.md the report stage builds from it."""
    root, report = built_report
    return root, report.markdown


def per_query_scores(root: Path, config_id: str) -> np.ndarray:
    table = pl.read_parquet(root / "reports" / "per_query.parquet")
    return table.filter(pl.col("config_id") == config_id).sort("query_id")["ndcg@10"].to_numpy()


def block(markdown: str, config_id: str) -> str:
    """The fenced comparison block of one candidate."""
    start = markdown.index(f"1. candidate {config_id} vs baseline base/c1")
    return markdown[start : markdown.index("```", start)]


def grid_row(markdown: str, config_id: str) -> str:
    grid = markdown.split("## Against the baseline")[1].split("best:")[0]
    return next(line for line in grid.splitlines() if line.startswith(config_id + " "))


def test_the_constructed_candidate_is_a_raw_regression_but_holm_inconclusive(built):
    root, _ = built
    base = per_query_scores(root, "base/c1")
    names = ["better/c1", "same/c1", "slight/c1", "worse/c1"]
    raw = np.array([stats.paired_bootstrap_p_value(base, per_query_scores(root, n), RESAMPLES, seed=0) for n in names])
    adjusted = dict(zip(names, multipletests(raw, method="holm")[1]))
    p_slight = raw[names.index("slight/c1")]
    assert p_slight < 0.05 < adjusted["slight/c1"]
    assert stats.paired_bootstrap_ci(base, per_query_scores(root, "slight/c1"), RESAMPLES, seed=0)[1] < 0


def test_one_verdict_per_candidate_in_the_grid_and_its_block(built):
    root, markdown = built
    expected = {
        "better/c1": "IMPROVEMENT",
        "worse/c1": "REGRESSION",
        "slight/c1": "INCONCLUSIVE",
        "same/c1": "INCONCLUSIVE",
    }
    for config_id, word in expected.items():
        row, text = grid_row(markdown, config_id), block(markdown, config_id)
        assert f"  {word.lower()}" in row, row
        result = next(line for line in text.splitlines() if line.startswith("4. result:"))
        assert result.split(" → ")[-1].split(" (")[0] == word, result
        assert "Holm over 4 configurations" in result
        others = {"improvement", "regression", "inconclusive"} - {word.lower()}
        assert not any(o.upper() in result for o in others)
    # the Holm p-value in the block is the grid's, to the digit
    slight = block(markdown, "slight/c1")
    holm_in_grid = grid_row(markdown, "slight/c1").split()[6]
    assert f"Holm over 4 configurations {holm_in_grid};" in slight
    assert markdown.count("→ REGRESSION") == 1  # worse/c1's, and no other anywhere in report.md


def test_slices_below_the_minimum_get_numbers_but_no_verdict(built):
    _, markdown = built
    for config_id in ("slight/c1", "worse/c1", "better/c1"):
        text = block(markdown, config_id)
        nav = next(line for line in text.splitlines() if "slice nav (3 queries)" in line)
        assert nav.endswith(f"→ too few queries for a verdict (< {stats.MIN_SLICE_QUERIES})"), nav
        assert "Δ " in nav and "W/L/T" in nav and "CI" not in nav and "inf" not in nav
        long = next(line for line in text.splitlines() if "slice long (20 queries)" in line)
        assert "95% CI [" in long and long.split(" → ")[-1] in {"improvement", "regression", "inconclusive"}
    assert "±inf" not in markdown
    assert f"a slice of fewer than {stats.MIN_SLICE_QUERIES} queries gets no verdict" in markdown


def test_the_relevance_threshold_check_is_computed(built):
    _, markdown = built
    assert "winner by relevance threshold: not computed" not in markdown
    line = next(x for x in markdown.splitlines() if x.startswith("winner by relevance threshold:"))
    # only grade-2 judgments: grade >= 1 and >= 2 rank the same; nothing reaches grade 3
    assert line == (
        "winner by relevance threshold: grade >= 1: better/c1, grade >= 2: better/c1, "
        "grade >= 3: no relevant documents → same winner at every threshold"
    )


def test_report_opens_with_the_conclusion(built):
    root, markdown = built
    lines = markdown.splitlines()
    assert lines[0] == "# releval report: constructed"
    assert lines[2].startswith("**Conclusion** (ndcg@10, 40 queries, paired bootstrap, Holm, alpha 0.05)")
    conclusion = markdown.split("**Conclusion**")[1].split("\nCard `")[0]
    assert "- Best: `better/c1` (" in conclusion
    assert "- Indistinguishable from it: none; every other configuration is significantly worse." in conclusion
    assert "- Highest mean in 100.0% of query resamples" in conclusion
    assert "- To settle it: `better/c1` is separated from every other configuration" in conclusion
    assert "- Winner by relevance threshold: grade >= 1: better/c1" in conclusion
    assert markdown.index("**Conclusion**") < markdown.index("## Grid")


def test_the_conclusion_names_what_would_settle_a_close_call(tmp_path):
    """Two configurations a few queries apart: the conclusion names the runner-up and the
    `releval power` figure at the observed SD of their per-query differences."""
    from releval.measurement.grid import compare_grid
    from releval.reporting.report_md import conclusion_markdown

    rng = np.random.default_rng(5)
    base = rng.uniform(0.3, 0.7, 30)
    close = base + rng.normal(0.01, 0.05, 30)
    per_query = pl.DataFrame(
        {
            "config_id": ["a"] * 30 + ["b"] * 30,
            "query_id": [f"q{i:02d}" for i in range(30)] * 2,
            "ndcg@10": np.concatenate([base, close]),
        }
    )
    grid = compare_grid(per_query, "a", "ndcg@10", n_resamples=RESAMPLES)
    lines = conclusion_markdown(grid, {"a": {}, "b": {}}, "ndcg@10")
    best, runner_up = ("b", "a") if close.mean() > base.mean() else ("a", "b")
    assert lines[2] == f"- Best: `{best}` ({max(close.mean(), base.mean()):.4f})."
    assert lines[3] == f"- Indistinguishable from it: 1 of the 1 others: `{runner_up}`."
    settle = lines[5]
    differences = (close - base) if best == "b" else (base - close)
    sd = float(np.std(differences, ddof=1))
    needed = math.ceil(TTestPower().solve_power(effect_size=differences.mean() / sd, alpha=0.05, power=0.8))
    assert settle.startswith(f"- To settle it: `{best}` vs `{runner_up}`: SD of per-query differences {sd:.4f}; ")
    assert f"{needed} queries would detect a true difference of the observed size {differences.mean():.4f}" in settle
    assert f"`releval power --sd {sd:.4g} --delta {differences.mean():.4g}`" in settle


def test_a_single_configuration_concludes_there_is_nothing_to_compare():
    from releval.reporting.report_md import conclusion_markdown

    assert conclusion_markdown(None, {"a/c1": {"ndcg@10": 0.5}}, "ndcg@10") == [
        "**Conclusion:** one configuration was scored, `a/c1` (ndcg@10 0.5000); nothing to compare."
    ]


def test_holdout_queries_stay_out_of_the_threshold_check():
    """The threshold means reproduce the reported means at the contract's threshold."""
    from releval.measurement.grid import threshold_means

    qrels = pl.DataFrame({"query_id": ["q1", "q2"], "doc_id": ["d1", "d2"], "grade": [1, 3]})
    run = pl.DataFrame({"query_id": ["q1", "q2"], "doc_id": ["d1", "x"], "score": [1.0, 1.0]})
    contract = {**Contract().to_dict(), "metrics": ["hit@1"]}
    means = threshold_means({"a": run}, holdout.restrict(qrels, ["q1", "q2"]), contract, "hit@1", (1, 3, 4))
    assert means == {1: {"a": 0.5}, 3: {"a": 0.0}, 4: None}


def test_the_conclusion_says_when_the_queries_are_too_few_for_the_differences_seen():
    """30 queries, a candidate about 0.01 better in noise of SD 0.05: inconclusive, and the conclusion
    names the queries a paired t-test would need for that difference (statsmodels' TTestPower)."""
    from releval.measurement.grid import compare_grid
    from releval.reporting.report_md import conclusion_markdown

    rng = np.random.default_rng(5)
    base = rng.uniform(0.3, 0.7, 30)
    close = base + rng.normal(0.02, 0.05, 30)
    per_query = pl.DataFrame(
        {
            "config_id": ["a"] * 30 + ["b"] * 30,
            "query_id": [f"q{i:02d}" for i in range(30)] * 2,
            "ndcg@10": np.concatenate([base, close]),
        }
    )
    grid = compare_grid(per_query, "a", "ndcg@10", n_resamples=RESAMPLES)
    assert grid.rows[0].verdict == "inconclusive"
    differences = close - base
    sd = float(np.std(differences, ddof=1))
    needed = math.ceil(TTestPower().solve_power(effect_size=abs(differences.mean()) / sd, alpha=0.05, power=0.8))
    assert needed > 30
    thin = next(line for line in conclusion_markdown(grid, {"a": {}, "b": {}}, "ndcg@10") if "Thin" in line)
    assert thin == (
        f"- Thin evidence: 30 queries are too few for 1 of the 1 differences from `a` called inconclusive: "
        f"to detect the largest observed difference, `b`'s {differences.mean():+.4f}, at 80% power you would need "
        f"about {needed} queries (SD of per-query differences {sd:.4f}; "
        f"`releval power --sd {sd:.4g} --delta {abs(differences.mean()):.4g}`)."
    )


def test_report_md_says_when_the_queries_are_too_few(built):
    """The constructed candidate is inconclusive on 40 queries: report.md's conclusion and its
    comparison block say how many queries its observed difference would need."""
    _, markdown = built
    conclusion = markdown.split("**Conclusion**")[1].split("\nCard `")[0]
    assert "- Thin evidence: 40 queries are too few for " in conclusion
    assert "   thin evidence: 40 queries; " in markdown and "you would need about " in markdown


# --------------------------------------------------------------------------- report.html


def _page_text(page: str) -> str:
    """The page's words: tags dropped, entities read, whitespace folded."""
    import html
    import re

    body = re.sub(r"</?(code|strong|span)[^>]*>", "", page.split("<body>", 1)[1])  # inline: no space
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", body)).split())


def test_the_page_says_everything_report_md_says(built_report):
    """Every heading, the conclusion's points, the card's and the warnings' lines of report.md are on
    the page, as words; every comparison block is there in a fold."""
    import re

    _, report = built_report
    words = _page_text(report.page)
    for heading in re.findall(r"^## (.*)$", report.markdown, flags=re.M):
        assert heading.replace("`", "") in words, heading
    for line in report.markdown.splitlines():
        if line.startswith("- "):  # the conclusion, the card and the warnings
            plain = re.sub(r"\*\*(.+?)\*\*", r"\1", line[2:]).replace("`", "")
            assert " ".join(plain.split()) in words, line
    for block in re.findall(r"```\n(.*?)\n```", report.markdown, flags=re.S):
        assert block.splitlines()[0] in words
    assert report.page.count("<details>") >= len(report.plot_tables["difference_ci"]) + 2


def test_the_page_has_the_verdict_table_the_difference_plot_and_the_per_query_view(built_report):
    import re

    _, report = built_report
    page = report.page
    table = page[page.index('<section id="baseline">') :].split("</table>")[0]
    for row in report.plot_tables["difference_ci"]:
        cell = f"<code>{row['config_id']}</code>"
        assert cell in table and f'class="badge {row["verdict"]}"' in table
    verdicts = {r["config_id"]: r["verdict"] for r in report.plot_tables["difference_ci"]}
    assert verdicts == {
        "better/c1": "improvement",
        "worse/c1": "regression",
        "slight/c1": "inconclusive",
        "same/c1": "inconclusive",
    }
    assert re.search(r'id="figure-difference_ci"><img alt="ndcg@10 difference from base/c1', page)
    assert set(report.images) == {"difference_ci", "recall_curve", "quality_cost", "difference_hist"}
    view = page[page.index('<section id="per-query">') :].split("</section>")[0]
    # the baseline against each configuration, the best first and open
    summaries = re.findall(r"<summary><code>([^<]+)</code> against <code>base/c1</code>", view)
    assert summaries[0] == "better/c1" and set(summaries) == set(verdicts)
    assert "<details open><summary><code>better/c1</code> against" in view
    assert "<script" not in page and "vegaEmbed" not in page
