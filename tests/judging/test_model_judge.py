"""The calibrated model judge: the chat client against a local endpoint, calibration against the
double-judged human pairs (with the agreement module's kappa), refusal below --min-kappa, and the
new judgment version it writes (validated, one model annotator, the human-only slice)."""

from __future__ import annotations

import argparse
import gzip
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml

from releval.errors import InputError
from releval.judging import judgments as jmod
from releval.judging import model_judge
from releval.judging.agreement import agreement
from releval.judging.judge_client import ChatClient, JudgeEndpointError
from releval.judging.judges import OpenAIJudge, PairText, parse_grade, read_judge_config

from support import ROOT

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
                status, content = endpoint.answer(body)
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


def judge_args(mini: dict, set_dir: Path, model: Path, *extra: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("set_dir")
    parser.add_argument("--parent")
    parser.add_argument("--annotator")
    model_judge.add_arguments(parser)
    root = mini["root"]
    return parser.parse_args(
        [str(set_dir), "--model", str(model), "--queries", str(root / "queries.jsonl"), "--corpus"]
        + [str(root / "corpus.jsonl"), *extra]
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


def test_the_weak_similarity_judge_is_refused_below_min_kappa_and_accepted_above(tmp_path, mini, monkeypatch):
    """The real offline MiniLM judge: its kappa is the agreement module's for the same labels; at the
    default --min-kappa 0.6 it is refused and only calibration.json is written; with a threshold
    below its kappa, the pool is graded into a version that validates and holds its labels."""
    monkeypatch.chdir(tmp_path)
    shipped = yaml.safe_load((ROOT / "conf" / "judge" / "minilm-similarity.yaml").read_text())
    config = tmp_path / "similarity.yaml"
    config.write_text(yaml.safe_dump({**shipped, "model": str(ROOT / shipped["model"])}))
    set_dir = tmp_path / "judgments" / "s1"
    assert model_judge.run(judge_args(mini, set_dir, config, "--parent", str(mini["set"]))) == 1
    assert sorted(p.name for p in set_dir.iterdir()) == ["calibration.json"]
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
    args.pool = str(mini["root"] / "pool.jsonl")
    assert model_judge.run(args) == 0
    written, problems = jmod.validate_version(set_dir)
    assert problems == [] and written is not None
    identity = json.loads((set_dir / "calibration.json").read_text())["judge"]
    assert identity.startswith("model:minilm-similarity@") and identity in written.manifest.annotators
    labels = written.judgments.filter(pl.col("annotator") == identity)
    assert sorted(zip(labels["query_id"], labels["doc_id"])) == sorted(mini["pool"])
    human = written.judgments.filter(pl.col("annotator") != identity).drop("line")
    assert human.equals(jmod.load_version(mini["set"]).judgments.drop("line"))  # the parent's labels, untouched
