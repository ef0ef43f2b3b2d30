"""The sealed holdout: which queries are scored, and the append-only access log."""

import json
import os
import subprocess
from pathlib import Path

import polars as pl
import pytest

from releval.measurement import holdout
from releval.errors import InputError


def queries(splits=None):
    ids = ["q1", "q2", "q3", "q4"]
    frame = pl.DataFrame({"query_id": ids, "text": [f"text {i}" for i in ids]})
    return frame if splits is None else frame.with_columns(pl.Series("split", splits))


# --------------------------------------------------------------------------- selecting queries


def test_without_a_split_column_every_query_is_dev():
    table = holdout.query_splits(queries())
    assert table["split"].to_list() == ["dev"] * 4
    assert holdout.split_counts(queries()) == {"dev": 4, "holdout": 0}
    assert holdout.select_queries(queries())["query_id"].to_list() == ["q1", "q2", "q3", "q4"]


def test_holdout_queries_are_not_scored_by_default():
    frame = queries(["dev", "holdout", "dev", "holdout"])
    assert holdout.select_queries(frame)["query_id"].to_list() == ["q1", "q3"]
    assert holdout.select_queries(frame, "holdout")["query_id"].to_list() == ["q2", "q4"]
    assert holdout.select_queries(frame, "all")["query_id"].to_list() == ["q1", "q2", "q3", "q4"]
    assert holdout.split_counts(frame) == {"dev": 2, "holdout": 2}
    assert not holdout.opens_holdout("dev")
    assert holdout.opens_holdout("holdout") and holdout.opens_holdout("all")


@pytest.mark.parametrize("bad", ["test", None, "Holdout"])
def test_a_query_without_a_valid_split_is_refused_by_name(bad):
    frame = queries(["dev", bad, "dev", "holdout"])
    with pytest.raises(InputError) as err:
        holdout.select_queries(frame, source="data/work/queries.parquet")
    assert "q2" in str(err.value) and err.value.field == "split"
    assert err.value.file == "data/work/queries.parquet"


def test_an_unknown_split_request_is_refused():
    with pytest.raises(InputError, match="dev, holdout, all"):
        holdout.select_queries(queries(), "test")


@pytest.mark.parametrize(
    "splits,requested,term",
    [
        (None, "dev", "all"),  # as stages/score.py: no split column, every query scored
        (["dev", "holdout", "dev", "dev"], "dev", "dev"),
        (["dev", "holdout", "dev", "dev"], "holdout", "holdout"),
        (["dev", "holdout", "dev", "dev"], "all", "all"),
    ],
)
def test_the_contract_split_term_names_what_was_scored_and_maps_back(splits, requested, term):
    frame = queries(splits)
    assert holdout.contract_split(frame, requested) == term
    scored = holdout.scored_queries(frame, {"split": term})
    assert scored.equals(holdout.select_queries(frame, requested))


def test_scoring_selection_logs_an_opening_before_scoring_and_names_the_terms(tmp_path):
    log = tmp_path / "reports" / "holdout_access.jsonl"
    frame = queries(["dev", "holdout", "dev", "holdout"])
    scored, terms = holdout.scoring_selection(
        frame, "dev", configs=["a"], command="python stages/score.py", log_path=log
    )
    assert scored["query_id"].to_list() == ["q1", "q3"] and not log.exists()  # the default opens nothing
    assert terms == {"split": "dev", "queries": 2, "holdout_queries_sealed": 2}
    scored, terms = holdout.scoring_selection(
        frame,
        "holdout",
        configs=["b", "a"],
        who="Ada",
        log_path=log,
        command=["python", "stages/score.py", "--split", "holdout"],
    )
    assert scored["query_id"].to_list() == ["q2", "q4"]
    assert terms == {"split": "holdout", "queries": 2, "holdout_queries_sealed": 0}
    (entry,) = holdout.read_log(log)
    assert entry["who"] == "Ada" and entry["configs"] == ["a", "b"] and entry["split"] == "holdout"
    assert entry["command"] == "python stages/score.py --split holdout"
    holdout.scoring_selection(frame, "all", configs=["a"], command="x", who="Grace", log_path=log)
    assert holdout.summary(holdout.read_log(log))["openings"] == 2
    _, terms = holdout.scoring_selection(queries(), "dev", configs=["a"], command="x", log_path=log)
    assert terms == {"split": "all", "queries": 4, "holdout_queries_sealed": 0}  # as score.py writes it today


@pytest.mark.parametrize("splits", [None, ["dev"] * 4])
def test_an_opening_without_holdout_queries_logs_nothing(tmp_path, splits):
    log = tmp_path / "holdout_access.jsonl"
    for split in ("holdout", "all"):
        _, terms = holdout.scoring_selection(queries(splits), split, configs=["a"], command="x", log_path=log)
        assert terms["holdout_queries_sealed"] == 0
    assert not log.exists()


def test_the_holdout_command_with_no_holdout_query_says_so_and_writes_nothing(tmp_path, monkeypatch, capsys):
    from releval.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text(json.dumps({"grid": {"models": ["m"], "chunkings": ["c"]}}))
    table = tmp_path / "queries.parquet"
    queries(["dev"] * 4).write_parquet(table)
    log = tmp_path / "reports" / "holdout_access.jsonl"
    for split in ("holdout", "all"):
        code = main(["holdout", "--split", split, "--queries", str(table), "--log", str(log)])
        out = capsys.readouterr().out
        assert code == 0 and out == f"nothing to open: {table} has no holdout queries; nothing was logged to {log}\n"
    assert not log.exists() and not (tmp_path / "reports").exists()
    code = main(["holdout", "--queries", str(tmp_path / "absent.parquet"), "--log", str(log)])
    assert code == 2 and "run `dvc repro`" in capsys.readouterr().err and not log.exists()


def test_restrict_keeps_only_the_named_queries():
    run = pl.DataFrame({"query_id": ["q1", "q2", "q2", "q3"], "doc_id": ["a", "b", "c", "d"]})
    assert holdout.restrict(run, ["q2"])["doc_id"].to_list() == ["b", "c"]


# --------------------------------------------------------------------------- the log


def entry(when="2026-11-30T10:00:00Z", who="Ada", configs=("minilm/c256",), split="holdout"):
    return holdout.opening(
        list(configs), ["python", "stages/score.py", "--split", split], split=split, who=who, when=when
    )


def test_an_opening_records_who_when_what_and_how():
    made = entry()
    assert made == {
        "when": "2026-11-30T10:00:00Z",
        "who": "Ada",
        "split": "holdout",
        "configs": ["minilm/c256"],
        "command": "python stages/score.py --split holdout",
    }
    fresh = holdout.opening(["b", "a"], "releval score --split all", split="all", who="x")
    assert fresh["when"].endswith("Z") and fresh["configs"] == ["a", "b"]
    with pytest.raises(InputError, match="does not open the holdout"):
        holdout.opening(["a"], "cmd", split="dev", who="x")


def test_appending_never_rewrites_earlier_lines(tmp_path):
    log = tmp_path / "reports" / "holdout_access.jsonl"
    holdout.append_opening(log, entry())
    first = log.read_bytes()
    inode = log.stat().st_ino
    holdout.append_opening(log, entry(when="2026-11-30T11:00:00Z", who="Grace", configs=("bm25/c256", "x")))
    after = log.read_bytes()
    # A new log starts with its header line: never empty, so DVC has no "is empty" to warn about.
    assert after.splitlines()[0].decode() + "\n" == holdout.LOG_HEADER_LINE
    assert after.startswith(first) and len(after.splitlines()) == 3
    assert log.stat().st_ino == inode  # appended in place, not replaced by a rewritten copy
    holdout.check_append_only(first, after)
    entries = holdout.read_log(log)
    assert [e["who"] for e in entries] == ["Ada", "Grace"]
    assert json.loads(after.splitlines()[2])["configs"] == ["bm25/c256", "x"]


def test_a_log_with_an_incomplete_last_line_is_not_appended_to(tmp_path):
    log = tmp_path / "holdout_access.jsonl"
    log.write_text(json.dumps(entry()) + "\n" + '{"when": "2026-11-30T1')
    before = log.read_bytes()
    with pytest.raises(InputError, match="incomplete") as err:
        holdout.append_opening(log, entry(when="2026-11-30T12:00:00Z"))
    assert err.value.line == 2
    assert log.read_bytes() == before


@pytest.mark.parametrize(
    "change,field",
    [
        ({"when": "2026-11-30T10:00:00"}, "when"),  # no time zone
        ({"when": "2026-11-30T10:00:00+02:00"}, "when"),  # not UTC
        ({"when": "yesterday"}, "when"),
        ({"split": "dev"}, "split"),
        ({"configs": "minilm/c256"}, "configs"),
        ({"who": ""}, "who"),
        ({"extra": 1}, "extra"),
    ],
)
def test_a_malformed_entry_is_refused_and_nothing_is_written(tmp_path, change, field):
    log = tmp_path / "holdout_access.jsonl"
    bad = {**entry(), **change}
    with pytest.raises(InputError) as err:
        holdout.append_opening(log, bad)
    assert err.value.field == field
    assert not log.exists()


def test_parsing_names_the_bad_line():
    good = json.dumps(entry())
    with pytest.raises(InputError) as err:
        holdout.parse_log(f"{good}\nnot json\n", "reports/holdout_access.jsonl")
    assert err.value.line == 2 and err.value.file == "reports/holdout_access.jsonl"
    with pytest.raises(InputError) as err:
        holdout.parse_log(f"{good}\n{json.dumps({**entry(), 'split': 'dev'})}\n")
    assert err.value.line == 2 and err.value.field == "split"


def test_a_rewritten_history_is_caught():
    one, two = json.dumps(entry()) + "\n", json.dumps(entry(when="2026-12-01T00:00:00Z")) + "\n"
    holdout.check_append_only(one.encode(), (one + two).encode())
    with pytest.raises(InputError) as err:
        holdout.check_append_only((one + two).encode(), (one.replace("Ada", "Eve") + two).encode())
    assert err.value.line == 1
    with pytest.raises(InputError):
        holdout.check_append_only((one + two).encode(), one.encode())  # a line removed


def test_summary_counts_openings_and_reports_the_latest():
    assert holdout.summary([]) == {"openings": 0, "last_opening": None}
    entries = [entry(when="2026-11-30T12:00:00Z", who="late"), entry(when="2026-11-29T12:00:00Z", who="early")]
    summary = holdout.summary(entries)
    assert summary["openings"] == 2 and summary["last_opening"]["who"] == "late"


def test_read_log_of_a_never_opened_holdout_is_empty(tmp_path):
    assert holdout.read_log(tmp_path / "absent.jsonl") == []


def _git_env(tmp_path, **extra):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": str(home / "gitconfig"),
        **extra,
    }


def test_who_is_the_git_user_name_else_the_login(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    env = _git_env(tmp_path, USER="ada")
    assert holdout.who_opens(repo, env) == "ada"
    subprocess.run(["git", "init", "-q"], cwd=repo, env=env, check=True)
    subprocess.run(["git", "config", "user.name", "Ada Lovelace"], cwd=repo, env=env, check=True)
    assert holdout.who_opens(repo, env) == "Ada Lovelace"
    bare = {k: v for k, v in _git_env(tmp_path).items()}
    assert holdout.who_opens(tmp_path, bare) == "unknown"


def test_an_opening_already_logged_by_the_holdout_command_is_not_logged_twice(tmp_path, monkeypatch):
    log = tmp_path / "holdout_access.jsonl"
    frame = queries(["dev", "holdout", "dev", "holdout"])
    entry = holdout.opening(["a"], "releval holdout", who="Ada")
    holdout.append_opening(log, entry)
    monkeypatch.setenv(holdout.OPENING_ENV, json.dumps(entry))
    holdout.scoring_selection(frame, "holdout", configs=["a"], command="score", log_path=log)
    assert holdout.read_log(log) == [entry]
    # Only the log's last line counts: an entry that is not (or no longer) last is logged anew.
    holdout.append_opening(log, holdout.opening(["b"], "by hand", who="Grace"))
    holdout.scoring_selection(frame, "holdout", configs=["a"], command="score", who="Ada", log_path=log)
    assert len(holdout.read_log(log)) == 3
    monkeypatch.setenv(holdout.OPENING_ENV, json.dumps({**entry, "who": "Mallory"}))
    holdout.scoring_selection(frame, "holdout", configs=["a"], command="score", who="Ada", log_path=log)
    assert len(holdout.read_log(log)) == 4


def test_the_holdout_command_names_every_grid_configuration_and_runs_stages_in_order():
    from releval.measurement.holdout_stages import stage_commands
    from releval.retrieval.runs import grid_config_ids, run_path_id

    grid = {
        "models": ["m"],
        "chunkings": ["c1", "c2"],
        "fusions": ["rrf"],
        "fused": {"mb": {"fusion": "rrf", "runs": ["bm25/c2", "model/m/c2"]}},
        "reranked": {"r": {"run": "fused/rrf/m/c1", "reranker": "e5"}},
    }
    assert grid_config_ids(grid) == sorted(
        ["bm25/c1", "bm25/c2", "m/c1", "m/c2", "rrf(m,bm25)/c1", "rrf(m,bm25)/c2", "rrf(m,bm25)/c1+rerank(e5)"]
        + ["rrf(bm25,m)/c2"]
    )
    assert run_path_id("model/m/c1") == "m/c1" and run_path_id("bm25/c2") == "bm25/c2"
    with pytest.raises(InputError, match="grid.reranked"):
        run_path_id("rerank/r")
    steps = stage_commands(grid, "holdout", Path("scratch"), Path("reports/holdout"))
    scripts = [step[0] for step in steps]
    assert scripts[0] == "stages/judgments.py" and scripts[-1] == "stages/score.py"
    assert scripts.index("stages/rerank.py") > max(i for i, s in enumerate(scripts) if s == "stages/fuse.py")
    fused_step = next(i for i, step in enumerate(steps) if "--fused" in step)
    assert fused_step > max(i for i, s in enumerate(scripts) if s in ("stages/retrieve.py", "stages/bm25.py"))
    # Every step that reads queries or judgments asks for the holdout; every write goes to scratch or reports/holdout.
    for step in steps:
        if step[0] in ("stages/judgments.py", "stages/bm25.py", "stages/retrieve.py", "stages/score.py"):
            assert step[step.index("--split") + 1] == "holdout", step
        outputs = [
            step[i + 1]
            for i, arg in enumerate(step)
            if arg in ("--out", "--meta", "--out-root", "--runs-root", "--reports", "--trec-dir")
        ]
        assert outputs and all(o.startswith(("scratch", "reports/holdout")) for o in outputs), step
