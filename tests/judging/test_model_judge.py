"""The calibrated model judge: the chat client against a local endpoint, calibration against the
double-judged human pairs (with the agreement module's kappa), refusal below --min-kappa, and the
new judgment version it writes (validated, one model annotator, the human-only slice)."""

from __future__ import annotations

import argparse
import base64
import dataclasses
import gzip
import json
import os
import re
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml

from releval.commands import judge as judge_command
from releval.errors import InputError
from releval.judging import judgments as jmod
from releval.judging import model_judge
from releval.judging.agreement import agreement
from releval.judging.judge_client import ChatClient, JudgeEndpointError
from releval.judging.judges import STOP_AFTER, OpenAIJudge, PairText, parse_grade, read_judge_config

from support import BIN, ROOT

V3 = ROOT / "data" / "judgments" / "v3"
RUBRIC = (ROOT / "data" / "judgments" / "RUBRIC.md").read_text(encoding="utf-8")
SCALE = (0, 1, 2, 3)


# --------------------------------------------------------------------------- a local chat endpoint


class Endpoint:
    """A chat-completions server on 127.0.0.1: ``answer(body) -> (status, content)`` decides each reply."""

    def __init__(self, answer):
        self.answer = answer
        self.bodies: list[dict] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                endpoint.bodies.append({"path": self.path, **body})
                status, content = endpoint.answer({**body, "authorization": self.headers.get("Authorization")})
                payload = (
                    {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}
                    if status == 200
                    else {"error": {"message": content}}
                )
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> "Endpoint":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def judge_config(path: Path, base_url: str, model: str = "test-model") -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "kind": "openai",
                "base_url": base_url,
                "model": model,
                "temperature": 0,
                "seed": 7,
                "max_tokens": 4,
                "retries": 2,
                "backoff": 0.01,
                "concurrency": 2,
            }
        )
    )
    return path


def user_fields(body: dict) -> tuple[str, str]:
    """(query, document title) of a request, read back from the user message."""
    text = body["messages"][-1]["content"]
    match = re.match(r"Query: (.*)\n\nDocument title: (.*)\n", text)
    assert match, text
    return match.group(1), match.group(2)


PAIR = PairText("q1", "topic:x", "functools.lru_cache maxsize", "functools", "lru_cache(maxsize=128) ...")


def test_client_retries_a_500_and_sends_model_temperature_rubric_and_query(tmp_path):
    replies = iter([(500, "overloaded"), (200, " 2\n")])
    with Endpoint(lambda body: next(replies)) as endpoint:
        _, config = read_judge_config(judge_config(tmp_path / "judge.yaml", endpoint.base_url))
        verdict = OpenAIJudge(config, RUBRIC, SCALE).grade_one(PAIR)
    assert verdict.grade == 2 and verdict.error == ""
    assert len(endpoint.bodies) == 2  # the 500, then the retry
    body = endpoint.bodies[-1]
    assert body["path"] == "/v1/chat/completions"
    assert body["model"] == "test-model" and body["temperature"] == 0 and body["seed"] == 7
    assert body["max_tokens"] == 4
    system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    assert RUBRIC.strip() in system and "one of 0, 1, 2 or 3" in system
    assert user_fields(body) == (PAIR.query, PAIR.title) and PAIR.text in user


def test_an_unparseable_answer_is_a_failure_never_a_guess(tmp_path):
    with Endpoint(lambda body: (200, "Grade: 2")) as endpoint:
        _, config = read_judge_config(judge_config(tmp_path / "judge.yaml", endpoint.base_url))
        verdict = OpenAIJudge(config, RUBRIC, SCALE).grade_one(PAIR)
    assert verdict.grade is None and verdict.answer == "Grade: 2" and "unparseable" in verdict.error
    assert [parse_grade(a, SCALE) for a in ("3", " 0\n", "2.", "4", "two", "2 or 3", "")] == [3, 0] + [None] * 5


def test_the_client_names_the_url_when_it_gives_up(tmp_path):
    with Endpoint(lambda body: (503, "down")) as endpoint:
        client = ChatClient(endpoint.base_url, "m", retries=1, backoff=0.0)
        with pytest.raises(JudgeEndpointError, match=re.escape(f"{endpoint.base_url}/chat/completions")):
            client.complete([{"role": "user", "content": "x"}])
    assert len(endpoint.bodies) == 2


def test_a_judge_config_keeps_its_key_out_and_its_temperature_at_zero(tmp_path):
    path = tmp_path / "judge.yaml"
    path.write_text("kind: openai\nbase_url: http://127.0.0.1:1/v1\nmodel: m\ntemperature: 0.7\n")
    with pytest.raises(InputError, match=r"judge.yaml:4: field 'temperature'"):
        read_judge_config(path)
    path.write_text("kind: openai\nbase_url: http://127.0.0.1:1/v1\nmodel: m\napi_key_env: sk-abc123-secret\n")
    with pytest.raises(InputError, match="field 'api_key_env'"):
        read_judge_config(path)
    path.write_text("kind: openai\nbase_url: http://127.0.0.1:1/v1\nmodel: m\ntemprature: 0\n")
    with pytest.raises(InputError, match="temprature"):
        read_judge_config(path)


# --------------------------------------------------------------------------- a small human set from v3


@pytest.fixture(scope="module")
def mini(tmp_path_factory) -> dict:
    """Four v3 queries' double-judged pairs over 12 documents, as a human-only set ``h1``, with its
    queries and corpus, and six pairs of the same queries and documents the set does not judge."""
    root = tmp_path_factory.mktemp("mini")
    v3 = jmod.load_version(V3)
    human = model_judge.double_judged(v3.judgments)
    reference = jmod.aggregate(human)
    queries = sorted(reference.filter(pl.col("grade") >= 2)["query_id"].unique().to_list())[:4]
    docs: set[str] = set()
    for query_id in queries:
        rows = reference.filter(pl.col("query_id") == query_id).sort(["grade", "doc_id"], descending=[True, False])
        docs |= set(rows.filter(pl.col("grade") >= 1)["doc_id"].head(2).to_list())
        docs |= set(rows.filter(pl.col("grade") == 0)["doc_id"].head(1).to_list())
    kept = human.filter(pl.col("query_id").is_in(queries) & pl.col("doc_id").is_in(sorted(docs)))
    keys = set(zip(kept["query_id"].to_list(), kept["doc_id"].to_list(), kept["annotator"].to_list()))
    lines = [
        line
        for line in (V3 / "judgments.jsonl").read_text(encoding="utf-8").splitlines()
        if (lambda r: (r["query_id"], r["doc_id"], r["annotator"]) in keys)(json.loads(line))
    ]
    set_dir = root / "judgments" / "h1"
    manifest = jmod.Manifest(
        "h1",
        None,
        "2026-12-01",
        dict(v3.manifest.scale),
        "RUBRIC.md",
        ("claude-a", "claude-b", "adjudicator"),
        "0" * 64,
    )
    jmod.write_version(set_dir, manifest, ("\n".join(lines) + "\n").encode(), {"RUBRIC.md": RUBRIC.encode()})
    query_lines = [
        line
        for line in (ROOT / "data/pydocs/v3/queries.jsonl").read_text(encoding="utf-8").splitlines()
        if json.loads(line)["query_id"] in queries
    ]
    (root / "queries.jsonl").write_text("\n".join(query_lines) + "\n", encoding="utf-8")
    with gzip.open(ROOT / "data/pydocs/v3/corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        corpus = [line for line in fh if json.loads(line)["_id"] in docs]
    (root / "corpus.jsonl").write_text("".join(corpus), encoding="utf-8")
    judged = set(zip(kept["query_id"].to_list(), kept["doc_id"].to_list()))
    pool = [(q, d) for q in queries for d in sorted(docs) if (q, d) not in judged][:6]
    (root / "pool.jsonl").write_text("".join(json.dumps({"query_id": q, "doc_id": d}) + "\n" for q, d in pool))
    return {"root": root, "set": set_dir, "pool": pool, "queries": queries, "docs": sorted(docs)}


def judge_args(mini: dict, set_dir: Path, model: Path, *extra: str) -> model_judge.Request:
    """The model judge's request as `releval judge SET_DIR --model CONFIG ...` reads it."""
    parser = argparse.ArgumentParser()
    judge_command.configure(parser)
    root = mini["root"]
    return judge_command.model_judge_request(
        parser.parse_args(
            [str(set_dir), "--model", str(model), "--queries", str(root / "queries.jsonl"), "--corpus"]
            + [str(root / "corpus.jsonl"), *extra]
        )
    )


def reference_of(mini: dict) -> pl.DataFrame:
    return jmod.aggregate(model_judge.double_judged(jmod.load_version(mini["set"]).judgments))


def model_grades(calibration: dict) -> pl.DataFrame:
    rows = [p for p in calibration["pairs"] if p["model"] is not None]
    return pl.DataFrame(
        {
            "query_id": [p["query_id"] for p in rows],
            "doc_id": [p["doc_id"] for p in rows],
            "grade": [p["model"] for p in rows],
        }
    )


def test_a_judge_that_agrees_with_the_humans_writes_a_new_version(tmp_path, mini, monkeypatch):
    """An endpoint answering the human reference grade calibrates at kappa 1; the pool is graded
    (one unparseable answer recorded, not imported) into a version the validator accepts."""
    monkeypatch.chdir(tmp_path)  # no params.yaml: every input is named
    reference = reference_of(mini)
    titles = {}
    for line in (mini["root"] / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        titles[row["_id"]] = row.get("title", "")
    texts = {json.loads(line)["query_id"]: json.loads(line)["text"] for line in open(mini["root"] / "queries.jsonl")}
    grade_of = {(texts[q], titles[d]): g for q, d, g in reference.select("query_id", "doc_id", "grade").iter_rows()}
    unparseable = (texts[mini["pool"][0][0]], titles[mini["pool"][0][1]])
    assert unparseable not in grade_of

    def answer(body):
        fields = user_fields(body)
        return 200, "I would say 2" if fields == unparseable else str(grade_of.get(fields, 1))

    set_dir = tmp_path / "judgments" / "m1"
    with Endpoint(answer) as endpoint:
        config = judge_config(tmp_path / "judge.yaml", endpoint.base_url)
        args = judge_args(
            mini, set_dir, config, "--parent", str(mini["set"]), "--pool", str(mini["root"] / "pool.jsonl")
        )
        assert model_judge.run(args) == 0
    calibration = json.loads((set_dir / "calibration.json").read_text())
    assert calibration["accepted"] and calibration["double_judged_pairs"] == reference.height
    assert calibration["agreement"]["linear_weighted_kappa"] == 1.0
    written, problems = jmod.validate_version(set_dir)
    assert problems == [] and written is not None
    identity = calibration["judge"]
    assert re.fullmatch(r"model:test-model@[0-9a-f]{12}", identity)
    assert written.manifest.parent == "h1" and identity in written.manifest.annotators
    labels = written.judgments.filter(pl.col("annotator") == identity)
    assert sorted(zip(labels["query_id"], labels["doc_id"])) == sorted(mini["pool"][1:])  # not the failed one
    judge = json.loads((set_dir / "judge.json").read_text())
    assert judge["failures"] == [
        {"query_id": mini["pool"][0][0], "doc_id": mini["pool"][0][1], "error": "unparseable answer 'I would say 2'"}
    ]
    touched = set(labels["query_id"].to_list())
    assert judge["human_only_queries"] == sorted(set(mini["queries"]) - touched)
    assert judge["human_only_queries"] == model_judge.human_only_queries(written)
    assert judge["calibration"]["linear_weighted_kappa"] == 1.0 and identity in written.manifest.description
    # A different model is another annotator: it starts from the human parent, never from this version.
    with Endpoint(answer) as endpoint:
        other = judge_config(tmp_path / "other.yaml", endpoint.base_url, model="other-model")
        with pytest.raises(InputError, match="another model judge"):
            model_judge.run(judge_args(mini, tmp_path / "judgments" / "m2", other, "--parent", str(set_dir)))
    assert not (tmp_path / "judgments" / "m2").exists()


def test_the_weak_similarity_judge_is_refused_below_min_kappa_and_accepted_above(tmp_path, mini, monkeypatch, capsys):
    """The real offline MiniLM judge: its kappa is the agreement module's for the same labels; at the
    default --min-kappa 0.6 it is refused and only calibration.json is written; with a threshold
    below its kappa, the pool is graded into a version that validates and holds its labels."""
    monkeypatch.chdir(tmp_path)
    shipped = yaml.safe_load((ROOT / "conf" / "judge" / "minilm-similarity.yaml").read_text())
    config = tmp_path / "similarity.yaml"
    config.write_text(yaml.safe_dump({**shipped, "model": str(ROOT / shipped["model"])}))
    set_dir = tmp_path / "judgments" / "s1"
    assert model_judge.run(judge_args(mini, set_dir, config, "--parent", str(mini["set"]))) == 1
    assert sorted(p.name for p in set_dir.iterdir()) == ["calibration.json", model_judge.JOURNAL_NAME]
    calibration = json.loads((set_dir / "calibration.json").read_text())
    kappa = calibration["agreement"]["linear_weighted_kappa"]
    assert not calibration["accepted"] and kappa is not None and kappa < 0.6
    reference = reference_of(mini)
    grades = model_grades(calibration)
    assert grades.height == reference.height  # a similarity judge always answers
    expected = agreement(reference, grades, SCALE)
    assert kappa == expected.weighted_kappa
    assert calibration["agreement"]["kappa"] == expected.kappa
    assert calibration["agreement"]["confusion"] == expected.confusion.tolist()
    # The grades are the cosines' under the shipped thresholds.
    from releval.judging.judges import load_offline_encoder

    encoder, _ = load_offline_encoder(ROOT / shipped["model"])
    pairs = model_judge.TextSource(
        mini["root"] / "queries.jsonl", "jsonl", mini["root"] / "corpus.jsonl", "jsonl"
    ).pairs(list(zip(grades["query_id"], grades["doc_id"])))
    queries = sorted({p.query for p in pairs})
    documents = sorted({f"{p.title}\n{p.text}" if p.title else p.text for p in pairs})
    vectors_q = dict(zip(queries, encoder.encode(queries, "query")))
    vectors_d = dict(zip(documents, encoder.encode(documents, "document")))
    cosines = [float(vectors_q[p.query] @ vectors_d[f"{p.title}\n{p.text}" if p.title else p.text]) for p in pairs]
    assert grades["grade"].to_list() == np.searchsorted(shipped["thresholds"], cosines, side="right").tolist()

    args = judge_args(mini, set_dir, config, "--parent", str(mini["set"]), "--min-kappa", f"{kappa - 0.05:.4f}")
    args = dataclasses.replace(args, pool=str(mini["root"] / "pool.jsonl"))
    capsys.readouterr()
    assert model_judge.run(args) == 0
    out = capsys.readouterr().out  # the refused run's answers are reused, not computed again
    assert f"calibration: {reference.height} of {reference.height} answers taken from" in out
    assert not (set_dir / model_judge.JOURNAL_NAME).exists()  # the version holds them now
    written, problems = jmod.validate_version(set_dir)
    assert problems == [] and written is not None
    identity = json.loads((set_dir / "calibration.json").read_text())["judge"]
    assert identity.startswith("model:minilm-similarity@") and identity in written.manifest.annotators
    labels = written.judgments.filter(pl.col("annotator") == identity)
    assert sorted(zip(labels["query_id"], labels["doc_id"])) == sorted(mini["pool"])
    human = written.judgments.filter(pl.col("annotator") != identity).drop("line")
    assert human.equals(jmod.load_version(mini["set"]).judgments.drop("line"))  # the parent's labels, untouched


# --------------------------------------------------------------------------- the shipped layout, kills and resumes


def reference_answers(mini: dict) -> dict[tuple[str, str], int]:
    """(query text, document title) -> the human reference grade of the set's double-judged pairs."""
    titles = {}
    for line in (mini["root"] / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        titles[row["_id"]] = row.get("title", "")
    texts = {json.loads(line)["query_id"]: json.loads(line)["text"] for line in open(mini["root"] / "queries.jsonl")}
    reference = reference_of(mini)
    return {(texts[q], titles[d]): g for q, d, g in reference.select("query_id", "doc_id", "grade").iter_rows()}


def shipped_project(tmp_path: Path, mini: dict) -> Path:
    """A project laid out as the shipped data: data/judgments/RUBRIC.md beside the version
    data/judgments/v3, whose manifest says ``rubric: ../RUBRIC.md``; queries, corpus and pool at its root."""
    project = tmp_path / "project"
    judgments_dir = project / "data" / "judgments"
    judgments_dir.mkdir(parents=True)
    (judgments_dir / "RUBRIC.md").write_text(RUBRIC, encoding="utf-8")
    h1 = jmod.load_version(mini["set"])
    manifest = dataclasses.replace(h1.manifest, rubric="../RUBRIC.md")
    jmod.write_version(judgments_dir / "v3", manifest, (mini["set"] / "judgments.jsonl").read_bytes())
    for name in ("queries.jsonl", "corpus.jsonl", "pool.jsonl"):
        shutil.copy(mini["root"] / name, project / name)
    return project


def releval_judge(project: Path, config: Path, *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`releval judge data/judgments/v4 --parent data/judgments/v3 --model CONFIG ...` in ``project``."""
    command = [str(BIN / "releval"), "judge", "data/judgments/v4", "--parent", "data/judgments/v3", "--model"]
    command += [str(config), "--queries", "queries.jsonl", "--corpus", "corpus.jsonl", "--pool", "pool.jsonl", *extra]
    return subprocess.run(command, cwd=project, env={**os.environ, **(env or {})}, capture_output=True, text=True)


@pytest.mark.slow
def test_the_model_judge_writes_a_version_in_the_shipped_layout(tmp_path, mini):
    """Seam 6: the rubric is ../RUBRIC.md, beside the versions; the new version keeps referring to it."""
    project = shipped_project(tmp_path, mini)
    grade_of = reference_answers(mini)
    with Endpoint(lambda body: (200, str(grade_of.get(user_fields(body), 1)))) as endpoint:
        config = judge_config(tmp_path / "judge.yaml", endpoint.base_url)
        result = releval_judge(project, config)
    assert result.returncode == 0, result.stdout + result.stderr
    written, problems = jmod.validate_version(project / "data" / "judgments" / "v4")
    assert problems == [] and written is not None
    assert written.manifest.parent == "v3" and written.manifest.rubric == "../RUBRIC.md"
    identity = json.loads((project / "data/judgments/v4/judge.json").read_text())["annotator"]
    labels = written.judgments.filter(pl.col("annotator") == identity)
    assert sorted(zip(labels["query_id"], labels["doc_id"])) == sorted(mini["pool"])
    assert sorted(p.name for p in (project / "data" / "judgments").iterdir()) == ["RUBRIC.md", "v3", "v4"]


def test_a_version_elsewhere_keeps_the_rubric_the_judge_was_prompted_with(tmp_path, mini, monkeypatch):
    """The parent says ../RUBRIC.md; from a new version in another folder that path names no rubric,
    or another one: the rubric the judge read is copied into the version instead."""
    monkeypatch.chdir(tmp_path)
    project = shipped_project(tmp_path, mini)
    grade_of = reference_answers(mini)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "RUBRIC.md").write_text("# another dataset's rubric\n")
    with Endpoint(lambda body: (200, str(grade_of.get(user_fields(body), 1)))) as endpoint:
        config = judge_config(tmp_path / "judge.yaml", endpoint.base_url)
        for set_dir in (tmp_path / "elsewhere" / "m1", tmp_path / "other" / "m1"):
            args = judge_args(mini, set_dir, config, "--parent", str(project / "data/judgments/v3"))
            args = dataclasses.replace(args, pool=str(mini["root"] / "pool.jsonl"))
            assert model_judge.run(args) == 0
            written, problems = jmod.validate_version(set_dir)
            assert problems == [] and written.manifest.rubric == "RUBRIC.md"
            assert (set_dir / "RUBRIC.md").read_text(encoding="utf-8") == RUBRIC
            assert json.loads((set_dir / "judge.json").read_text())["prompt_template"].count(RUBRIC.strip()) == 1
    assert (tmp_path / "other" / "RUBRIC.md").read_text() == "# another dataset's rubric\n"


class Gate:
    """An endpoint's answers: the first ``open_for`` requests are answered by ``answer``, every later
    one is held (no reply) until :meth:`release`; ``answered`` lists the user messages answered."""

    def __init__(self, answer, open_for: int):
        self.answer, self.open_for = answer, open_for
        self.answered: list[str] = []
        self.held = 0
        self.condition = threading.Condition()
        self.released = threading.Event()

    def __call__(self, body):
        with self.condition:
            if len(self.answered) < self.open_for:
                self.answered.append(body["messages"][-1]["content"])
                return self.answer(body)
            self.held += 1
            self.condition.notify_all()
        self.released.wait()
        return 503, "released"

    def wait_held(self, count: int) -> None:
        with self.condition:
            assert self.condition.wait_for(lambda: self.held >= count, timeout=300), "the judge never got that far"

    def release(self) -> None:
        self.released.set()


def asked(endpoint: Endpoint) -> list[str]:
    return [body["messages"][-1]["content"] for body in endpoint.bodies]


@pytest.mark.slow
def test_a_judge_killed_mid_grading_resumes_without_asking_any_answered_pair_again(tmp_path, mini):
    """Seam 6: every answer is kept as it arrives. SIGKILL while both workers wait for an answer
    (calibration done, half the pool answered), then a judge of another identity, then the same
    command again: it asks only the pairs never answered, and writes a valid version."""
    project = shipped_project(tmp_path, mini)
    set_dir = project / "data" / "judgments" / "v4"
    grade_of = reference_answers(mini)
    calibration_pairs = reference_of(mini).height

    def answer(body):
        return 200, str(grade_of.get(user_fields(body), 1))

    gate = Gate(answer, open_for=calibration_pairs + 3)
    with Endpoint(gate) as endpoint:
        config = judge_config(tmp_path / "judge.yaml", endpoint.base_url)  # concurrency 2
        command = [str(BIN / "releval"), "judge", "data/judgments/v4", "--parent", "data/judgments/v3", "--model"]
        command += [str(config), "--queries", "queries.jsonl", "--corpus", "corpus.jsonl", "--pool", "pool.jsonl"]
        process = subprocess.Popen(command, cwd=project, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            gate.wait_held(2)  # both workers are waiting: every answer sent before was recorded
        finally:
            process.kill()
            process.wait()
            gate.release()
    first_run = gate.answered
    assert len(first_run) == calibration_pairs + 3 and len(set(first_run)) == len(first_run)
    assert not (set_dir / "manifest.yaml").exists()
    assert sorted(p.name for p in set_dir.iterdir()) == ["calibration.json", model_judge.JOURNAL_NAME]
    journal = [json.loads(line) for line in (set_dir / model_judge.JOURNAL_NAME).read_text().splitlines()]
    assert len(journal) == len(first_run)

    # Another judge (another model: another identity) reuses none of them.
    with Endpoint(answer) as endpoint:
        other = judge_config(tmp_path / "other.yaml", endpoint.base_url, model="other-model")
        result = releval_judge(project, other, "--calibrate-only")
    assert result.returncode == 0, result.stdout + result.stderr
    assert len(endpoint.bodies) == calibration_pairs and "another identity" in result.stdout

    # The same command again: only the pool pairs the first run never had answered are sent.
    with Endpoint(answer) as endpoint:
        config = judge_config(tmp_path / "judge.yaml", endpoint.base_url)
        result = releval_judge(project, config)
    assert result.returncode == 0, result.stdout + result.stderr
    second_run = asked(endpoint)
    assert len(second_run) == len(mini["pool"]) - 3 and len(set(second_run)) == len(second_run)
    assert not set(second_run) & set(first_run)  # no pair asked twice
    assert f"calibration: {calibration_pairs} of {calibration_pairs} answers taken from" in result.stdout
    written, problems = jmod.validate_version(set_dir)
    assert problems == [] and written is not None and written.manifest.rubric == "../RUBRIC.md"
    identity = json.loads((set_dir / "judge.json").read_text())["annotator"]
    labels = written.judgments.filter(pl.col("annotator") == identity)
    assert sorted(zip(labels["query_id"], labels["doc_id"])) == sorted(mini["pool"])
    assert not (set_dir / model_judge.JOURNAL_NAME).exists()


@pytest.mark.slow
def test_a_failure_after_grading_loses_no_answer(tmp_path, mini):
    """Killed at the last step (just before the version's directory is renamed into place), a rerun
    sends no request at all and writes the version."""
    project = shipped_project(tmp_path, mini)
    grade_of = reference_answers(mini)
    with Endpoint(lambda body: (200, str(grade_of.get(user_fields(body), 1)))) as endpoint:
        config = judge_config(tmp_path / "judge.yaml", endpoint.base_url)
        killed = releval_judge(project, config, env={"RELEVAL_FAULT": "before-rename@data/judgments/v4"})
        assert killed.returncode == -9 and len(endpoint.bodies) == reference_of(mini).height + len(mini["pool"])
        assert not (project / "data/judgments/v4/manifest.yaml").exists()
        endpoint.bodies.clear()
        result = releval_judge(project, config)
        assert result.returncode == 0, result.stdout + result.stderr
        assert endpoint.bodies == []
    written, problems = jmod.validate_version(project / "data" / "judgments" / "v4")
    assert problems == [] and written is not None


# --------------------------------------------------------------------------- secrets


def files_holding(root: Path, secrets: list[str]) -> list[str]:
    """The files under ``root`` whose bytes hold one of ``secrets``."""
    found = []
    for path in sorted(root.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            found += [f"{path.relative_to(root)}: {s}" for s in secrets if s.encode() in data]
    return found


KEY = "sk-test-7f3a9c1e5b2d4f60a8e1c3b5d7f9a2c4"  # a key no other file holds


@pytest.mark.slow
def test_a_401_echoing_the_key_stops_the_judge_and_the_key_is_written_and_printed_nowhere(tmp_path, mini):
    """Seam 13a: an endpoint refusing the key, and echoing it in the body, is told once (one line
    naming the URL) after a few requests, not once per pair; the key is in no file and no output."""
    project = shipped_project(tmp_path, mini)

    def refuse(body):
        return 401, f"Incorrect API key provided: {body['authorization'].removeprefix('Bearer ')}."

    with Endpoint(refuse) as endpoint:
        config = judge_config(tmp_path / "judge.yaml", endpoint.base_url)
        config.write_text(config.read_text() + "api_key_env: RELEVAL_TEST_KEY\n")
        result = releval_judge(project, config, env={"RELEVAL_TEST_KEY": KEY})
    assert result.returncode == 2, result.stdout + result.stderr
    assert KEY not in result.stdout + result.stderr
    assert files_holding(project, [KEY]) == []
    assert all(body["messages"] for body in endpoint.bodies)
    assert STOP_AFTER <= len(endpoint.bodies) < STOP_AFTER + 2  # two workers: at most one more in flight
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert (
        len(errors) == 1 and result.stderr.count("Incorrect API key") == 1 and "Incorrect API key" not in result.stdout
    )
    assert f"{endpoint.base_url}/chat/completions refused {STOP_AFTER} requests in a row with HTTP 401" in errors[0]
    assert "field 'api_key_env'" in errors[0] and "RELEVAL_TEST_KEY" in errors[0] and "***" in errors[0]
    assert not (project / "data" / "judgments" / "v4").exists()  # nothing was answered: nothing to keep


@pytest.mark.slow
def test_userinfo_in_base_url_is_sent_as_basic_auth_and_redacted_from_every_record(tmp_path, mini):
    """A ``user:password@`` in base_url authenticates (HTTP basic) and is in no file and no output,
    nor the key an endpoint echoes in an answer or an error body of a version that is written."""
    project = shipped_project(tmp_path, mini)
    grade_of = reference_answers(mini)
    password = "pw-0d9e8c7b6a5f4e3d"
    token = base64.b64encode(f"judge:{password}".encode()).decode()
    pool_pair = mini["pool"]

    def answer(body):
        if body["authorization"] != f"Basic {token}":
            return 401, "no"
        grade = grade_of.get(user_fields(body))
        if grade is not None:
            return 200, str(grade)
        # Pool pairs: two of them fail, echoing the credentials (and the URL with them) back.
        query, title = user_fields(body)
        if title == titles[pool_pair[0][1]] and query == queries[pool_pair[0][0]]:
            return 200, f"I am not sure ({body['authorization']}, judge:{password})"
        if title == titles[pool_pair[1][1]] and query == queries[pool_pair[1][0]]:
            return 400, f"bad request from http://judge:{password}@127.0.0.1/v1 with {body['authorization']}"
        return 200, "1"

    titles = {json.loads(line)["_id"]: json.loads(line).get("title", "") for line in open(project / "corpus.jsonl")}
    queries = {json.loads(line)["query_id"]: json.loads(line)["text"] for line in open(project / "queries.jsonl")}
    with Endpoint(answer) as endpoint:
        url = endpoint.base_url.replace("http://", f"http://judge:{password}@")
        config = judge_config(tmp_path / "judge.yaml", url)
        result = releval_judge(project, config)
    assert result.returncode == 0, result.stdout + result.stderr
    secrets = [password, token, f"judge:{password}"]
    assert [s for s in secrets if s in result.stdout + result.stderr] == []
    assert files_holding(project, secrets) == []
    set_dir = project / "data" / "judgments" / "v4"
    judge = json.loads((set_dir / "judge.json").read_text())
    assert judge["config"]["base_url"] == endpoint.base_url  # without the userinfo
    errors = sorted(failure["error"] for failure in judge["failures"])
    assert len(errors) == 2 and all("***" in error for error in errors)
    assert "http://***@127.0.0.1/v1" in errors[0] and "unparseable" in errors[1]
    notes = [json.loads(line)["notes"] for line in (set_dir / "model_grades.jsonl").read_text().splitlines()]
    assert sorted(n for n in notes if n) == errors


def test_an_error_names_the_url_without_userinfo_and_no_half_key_survives_the_cut(tmp_path):
    key = "k" * 10 + "SECRET" + "k" * 10
    with Endpoint(lambda body: (403, "x" * 290 + body["authorization"])) as endpoint:
        client = ChatClient(endpoint.base_url.replace("http://", "http://u:p4ss@"), "m", api_key=key, retries=0)
        with pytest.raises(JudgeEndpointError) as caught:
            client.complete([{"role": "user", "content": "x"}])
    message = str(caught.value)
    assert caught.value.status == 403 and message.startswith(f"{endpoint.base_url}/chat/completions: HTTP 403")
    assert "SECRET" not in message and "kkkkk" not in message and "p4ss" not in message


def test_refusals_of_a_basic_auth_stop_the_judge_naming_base_url_without_its_password(tmp_path):
    with Endpoint(lambda body: (401, f"who is {body['authorization']}?")) as endpoint:
        url = endpoint.base_url.replace("http://", "http://judge:pw-77a1@")
        _, config = read_judge_config(judge_config(tmp_path / "judge.yaml", url))
        judge = OpenAIJudge(config, RUBRIC, SCALE, source="judge.yaml")
        with pytest.raises(InputError) as caught:
            judge.grade([PAIR] * 20)
    message = str(caught.value)
    assert message.startswith(f"judge.yaml: field 'base_url': {endpoint.base_url}/chat/completions refused")
    assert "the user:password in base_url" in message and "who is Basic ***?" in message and "pw-77a1" not in message
    assert STOP_AFTER <= len(endpoint.bodies) < STOP_AFTER + 2


# --------------------------------------------------------------------------- evidence quotes (issue 31, item 3)

RUBRIC_V4 = (ROOT / "data" / "judgments" / "RUBRIC-v4.md").read_text(encoding="utf-8")


def test_a_reply_is_the_grade_alone_or_with_quotes_only_under_a_span_rule():
    from releval.judging.judges import Reply, has_span_rule, parse_reply

    assert has_span_rule(RUBRIC_V4) and not has_span_rule(RUBRIC)
    quoted = (
        '{"grade": 2, "evidence": [{"quote": "lru_cache(maxsize=128)"}, "maxsize", {"quote": "x", "occurrence": 2}]}'
    )
    assert parse_reply(" 2\n", SCALE, spans=True) == Reply(2)  # the grade alone stays an answer
    assert parse_reply(quoted, SCALE, spans=True) == Reply(
        2, ({"quote": "lru_cache(maxsize=128)"}, {"quote": "maxsize"}, {"quote": "x", "occurrence": 2})
    )
    assert parse_reply(f"```json\n{quoted}\n```", SCALE, spans=True).grade == 2  # one fence is allowed
    assert parse_reply(quoted, SCALE, spans=False) == Reply(None)  # no span rule: only a grade parses
    bad_items = '{"grade": 1, "evidence": [3, {"quote": "  "}, {"quote": "a", "occurrence": 0}, {"text": "a"}, "ok"]}'
    assert parse_reply(bad_items, SCALE, spans=True) == Reply(1, ({"quote": "ok"},), 4)  # the grade stands
    assert parse_reply('{"grade": 1, "evidence": "ok"}', SCALE, spans=True) == Reply(1, (), 1)
    for failure in ('{"grade": 4}', '{"grade": "2"}', '{"grade": true}', '{"evidence": []}', '{"grade": 2, "why": 1}'):
        assert parse_reply(failure, SCALE, spans=True).grade is None, failure
    assert parse_reply("2, see the first paragraph", SCALE, spans=True).grade is None


def test_the_prompt_asks_for_quotes_only_when_the_rubric_has_a_span_rule(tmp_path):
    from releval.judging.judges import SYSTEM_TEMPLATE, build_messages, prompt_template

    plain = build_messages(RUBRIC, SCALE, PAIR)[0]["content"]
    assert plain == SYSTEM_TEMPLATE.format(rubric=RUBRIC.strip(), grades="0, 1, 2 or 3")  # byte for byte as before
    spans = build_messages(RUBRIC_V4, SCALE, PAIR)[0]["content"]
    assert '"evidence": [{"quote": "<exact text>"}]' in spans and "at most 3" in spans and "never the title" in spans
    assert prompt_template(RUBRIC_V4, SCALE) != prompt_template(RUBRIC, SCALE)  # another prompt: another annotator
    _, config = read_judge_config(judge_config(tmp_path / "judge.yaml", "http://127.0.0.1:1/v1"))  # max_tokens 4
    with pytest.raises(InputError, match="field 'max_tokens'.*evidence spans"):
        OpenAIJudge(config, RUBRIC_V4, SCALE, source="judge.yaml")
    assert OpenAIJudge(dataclasses.replace(config, max_tokens=None), RUBRIC_V4, SCALE).spans


def unique_quote(text: str, length: int = 30) -> str:
    from releval.inputs.schemas import quote_places

    for start in range(len(text) // 3, len(text) - length):
        quote = text[start : start + length]
        if quote.strip() == quote and len(quote_places(text, quote)) == 1:
            return quote
    raise AssertionError("no unique quote")


def repeated_quote(text: str) -> str:
    from releval.inputs.schemas import quote_places

    return next(q for q in (" the ", " a ", "e") if len(quote_places(text, q)) >= 3 and q.strip())


def test_the_judges_quotes_are_kept_where_they_locate_and_dropped_and_counted_where_not(tmp_path, mini, monkeypatch):
    """A parent whose rubric has the span rule; an endpoint answering the pool with quotes: those that
    locate exactly (once, or at their occurrence) become the judgments' evidence, the others (not in
    the text, ambiguous, on grade 0, not a quote) are dropped and counted in judge.json; the grade-only
    answer stays an answer and the unparseable one a failure."""
    from releval.inputs.schemas import quote_places
    from releval.measurement.evidence import resolve_spans

    monkeypatch.chdir(tmp_path)
    h1 = jmod.load_version(mini["set"])
    parent = tmp_path / "judgments" / "h1"
    jmod.write_version(
        parent, h1.manifest, (mini["set"] / "judgments.jsonl").read_bytes(), {"RUBRIC.md": RUBRIC_V4.encode()}
    )
    texts = {}
    for line in (mini["root"] / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        texts[row["_id"]] = row["text"]
    queries = {json.loads(line)["query_id"]: json.loads(line)["text"] for line in open(mini["root"] / "queries.jsonl")}
    grade_of = reference_answers(mini)
    pool = mini["pool"]
    plan = {}  # (query text, doc text) -> (the reply, the quotes expected to be kept)
    for i, (query_id, doc_id) in enumerate(pool):
        text = texts[doc_id]
        once, many = unique_quote(text), repeated_quote(text)
        second = {"quote": many, "occurrence": 2}
        replies = [
            (json.dumps({"grade": 2, "evidence": [once, "not a sentence of this page at all"]}), [{"quote": once}]),
            ("2", []),
            (json.dumps({"grade": 3, "evidence": [{"quote": many}, second]}), [second]),
            (json.dumps({"grade": 0, "evidence": [once]}), []),
            ("```json\n" + json.dumps({"grade": 1, "evidence": [once, 7]}) + "\n```", [{"quote": once}]),
            ("I would say 2", None),
        ]
        plan[(queries[query_id], text)] = replies[i]
        assert len(quote_places(text, many)) >= 2

    def answer(body):
        message = body["messages"][-1]["content"]
        assert "evidence" in body["messages"][0]["content"]
        query = re.match(r"Query: (.*)\n", message).group(1)
        text = message.split("Document text:\n", 1)[1].rsplit("\n\nGrade (", 1)[0]
        if (query, text) in plan:
            return 200, plan[(query, text)][0]
        return 200, str(grade_of[user_fields(body)])

    set_dir = tmp_path / "judgments" / "m1"
    with Endpoint(answer) as endpoint:
        config = judge_config(tmp_path / "judge.yaml", endpoint.base_url)
        config.write_text(config.read_text().replace("max_tokens: 4", "max_tokens: 512"))
        args = judge_args(mini, set_dir, config, "--parent", str(parent), "--pool", str(mini["root"] / "pool.jsonl"))
        assert model_judge.run(args) == 0
    docs = pl.DataFrame({"doc_id": list(texts), "title": [""] * len(texts), "text": list(texts.values())})
    written, problems = jmod.validate_version(
        set_dir, doc_lengths=jmod.doc_lengths(docs), doc_texts=jmod.doc_texts(docs)
    )
    assert problems == []
    identity = json.loads((set_dir / "judge.json").read_text())["annotator"]
    labels = written.judgments.filter(pl.col("annotator") == identity)
    found = {(r["query_id"], r["doc_id"]): (r["grade"], r["evidence"]) for r in labels.iter_rows(named=True)}
    assert sorted(found) == sorted(pool[:5])  # the unparseable answer is a failure, the others grades
    for i, pair in enumerate(pool[:5]):
        text = texts[pair[1]]
        grade, evidence = found[pair]
        kept = plan[(queries[pair[0]], text)][1]
        assert grade == [2, 2, 3, 0, 1][i]
        assert (jmod_evidence := [{k: v for k, v in s.items() if v is not None} for s in evidence or []]) == kept, i
        places = resolve_spans(text, jmod_evidence)
        assert [text[s:e] for s, e in places] == [span["quote"] for span in kept]
    evidence = json.loads((set_dir / "judge.json").read_text())["evidence"]
    assert evidence["asked"] and evidence["spans_kept"] == 3 and evidence["pairs_with_evidence"] == 3
    assert evidence["dropped_by_reason"] == {
        model_judge.NOT_IN_TEXT: 1,
        model_judge.AMBIGUOUS: 1,
        model_judge.ON_A_LOW_GRADE: 1,
        model_judge.NOT_A_QUOTE: 1,
    }
    assert evidence["quotes_dropped"] == 4 and all(d["query_id"] and d["doc_id"] for d in evidence["dropped"])
    graded_file = [json.loads(line) for line in (set_dir / model_judge.GRADES_NAME).read_text().splitlines()]
    assert sum(1 for row in graded_file if row.get("evidence")) == 3


def test_placed_evidence_keeps_exact_quotes_only():
    text = "alpha beta. alpha beta. gamma delta epsilon zeta."
    kept, dropped = model_judge.placed_evidence(
        text,
        2,
        [
            {"quote": "gamma delta"},
            {"quote": "alpha beta"},
            {"quote": "alpha beta", "occurrence": 3},
            {"quote": "alpha beta", "occurrence": 2},
            {"quote": "delta epsilon"},
            {"quote": "Gamma, three times"},
            {"quote": "zeta."},
            {"quote": "beta."},
        ],
    )
    assert kept == [{"quote": "gamma delta"}, {"quote": "alpha beta", "occurrence": 2}, {"quote": "zeta."}]
    assert [reason for _, reason in dropped] == [
        model_judge.AMBIGUOUS,
        model_judge.NO_SUCH_OCCURRENCE,
        model_judge.OVERLAPS,
        model_judge.NOT_IN_TEXT,
        model_judge.AMBIGUOUS,
    ]
    kept, dropped = model_judge.placed_evidence(text, 2, [{"quote": w} for w in ("gamma", "delta", "epsilon", "zeta")])
    assert len(kept) == 3 and dropped == [("zeta", model_judge.BEYOND_MAX)]
    assert model_judge.placed_evidence(text, 0, [{"quote": "gamma"}]) == ([], [("gamma", model_judge.ON_A_LOW_GRADE)])
