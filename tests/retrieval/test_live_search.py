"""Live search as an external run (releval.retrieval.live_search, external.snapshot): a search
endpoint's answers for the dev queries, taken over real HTTP from a BM25 service
(tests/support/search_server.py) and kept as a checked run file."""

import gzip
import hashlib
import json
import sys
import urllib.request

import polars as pl
import pytest

from releval.errors import InputError
from releval.provenance import card
from releval.retrieval import external, live_search, runs
from support.commands import run
from support.pydocs_mini import make_pydocs_project, mini_queries
from support.search_server import SearchServer

DOCS = {
    "d1": "parse command line options and arguments with argparse",
    "d2": "read and write comma separated values files with csv",
    "d3": "run an external program and capture its output with subprocess",
    "d4": "compute a sha256 digest of bytes with hashlib",
    "d5": "a priority queue with push and pop using heapq",
    "d6": "compare sequences of lines and show differences with difflib",
    "d7": "serialize python objects to a byte stream with pickle",
}
QUERIES = pl.DataFrame(
    {
        "query_id": ["q1", "q2", "q3", "h1"],
        "text": [
            "command line arguments with",
            "sha256 digest with",
            "capture program output with",
            "priority queue push pop",
        ],
        "split": ["dev", "dev", "dev", "holdout"],
    }
)
DEV = ["q1", "q2", "q3"]
DOC_IDS = pl.Series("doc_id", list(DOCS))
DESCRIPTION = {"system": "BM25 search service", "by": "search team"}
ES_BODY = {"query": {"match": {"text": {"query": "{query}", "_name": "{query_id}"}}}, "size": "{k}"}
TOKEN = "s3cr3t-token-never-written"


def declare(url: str, fmt: str = "trec", **endpoint) -> external.ExternalRun:
    spec = {"url": f"{url}/_search", "body": ES_BODY, "k": 5, "timeout": 1.0, "backoff": 0.01, **endpoint}
    entry = {"path": "data/work/queries.parquet", "format": fmt, "description": DESCRIPTION, "endpoint": spec}
    return external.declared("live", entry)


@pytest.fixture
def server():
    with SearchServer(DOCS) as s:
        yield s


def expected_rows(server: SearchServer, k: int = 5) -> list[tuple]:
    """The server's own answers for the dev queries, ranked as releval ranks a run."""
    rows = [
        (qid, doc, score)
        for qid, text in zip(QUERIES["query_id"], QUERIES["text"])
        if qid in DEV
        for doc, score in server.search(text, k)
    ]
    return sorted(rows, key=lambda r: (r[0], -r[2], r[1]))


@pytest.mark.parametrize("fmt", ["trec", "parquet"])
def test_the_snapshot_run_is_the_servers_answers(server, tmp_path, fmt):
    converted = external.snapshot(declare(server.url, fmt), QUERIES, DOC_IDS, tmp_path / "live")
    got = converted.run.select("query_id", "doc_id", "score").rows()
    assert got == expected_rows(server) and len(got) > 6
    record = converted.meta["external"]
    assert record["path"] == (tmp_path / "live" / f"snapshot.{fmt}").as_posix()
    assert (tmp_path / "live" / f"snapshot.{fmt}").is_file() and len(list((tmp_path / "live").iterdir())) == 1
    assert record["sha256"] == hashlib.sha256((tmp_path / "live" / f"snapshot.{fmt}").read_bytes()).hexdigest()
    live = record["endpoint"]
    assert (live["url"], live["method"], live["queries_sent"], live["body"]) == (
        f"{server.url}/_search",
        "POST",
        3,
        ES_BODY,
    )
    assert live["taken_at"].endswith("Z") and live["hits"] == len(got)
    # The response hash is sha256 over [[query_id, answer], ...] in canonical JSON, as documented.
    answers = []
    for qid, text in zip(QUERIES["query_id"][:3], QUERIES["text"][:3]):
        body = json.dumps(live_search.render(ES_BODY, {"query": text, "query_id": qid, "k": 5})).encode()
        request = urllib.request.Request(f"{server.url}/_search", body, {"Content-Type": "application/json"})
        answers.append([qid, json.loads(urllib.request.urlopen(request).read())])
    canonical = json.dumps(answers, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert live["responses_sha256"] == hashlib.sha256(canonical.encode()).hexdigest()
    # The card records where and when (description.produced) and the snapshot file's hash.
    carded = card.external_record(converted.meta)
    assert f"{server.url}/_search" in carded["description"]["produced"]
    assert live["taken_at"] in carded["description"]["produced"]
    assert "snapshot of a live system" in carded["description"]["produced"]
    assert carded["sha256"] == record["sha256"]
    assert carded["endpoint"] == {
        "url": f"{server.url}/_search",
        "method": "POST",
        "body": ES_BODY,
        "params": None,
        "taken_at": live["taken_at"],
        "queries_sent": 3,
        "responses_sha256": live["responses_sha256"],
    }
    assert any("a snapshot of a live system" in line for line in external.summary(record))


def test_holdout_queries_are_never_sent(server, tmp_path):
    converted = external.snapshot(declare(server.url), QUERIES, DOC_IDS, tmp_path / "live")
    assert sorted(server.received_ids()) == DEV
    assert "priority queue push pop" not in {text for _, text, _ in server.received}
    assert set(converted.run["query_id"]) == set(DEV)
    assert converted.meta["external"]["queries_dropped"] == 0


def test_retries_on_429_500_a_dropped_connection_and_a_timeout_recover(server, tmp_path):
    server.faults = {"q1": [500, 429], "q2": ["drop"], "q3": ["slow"]}
    converted = external.snapshot(declare(server.url, timeout=0.5), QUERIES, DOC_IDS, tmp_path / "live")
    assert converted.run.select("query_id", "doc_id", "score").rows() == expected_rows(server)
    assert server.received_ids().count("q1") == 3 and server.received_ids().count("q2") == 2


@pytest.mark.parametrize(
    ("fault", "says"),
    [(500, "query 'q2': HTTP 500 after 3 tries"), (429, "query 'q2': HTTP 429 after 3 tries"), (403, "HTTP 403")],
)
def test_a_persistent_failure_fails_naming_the_query_and_status_and_writes_nothing(server, tmp_path, fault, says):
    server.always = {"q2": fault}
    with pytest.raises(live_search.EndpointError) as caught:
        external.snapshot(declare(server.url, retries=2), QUERIES, DOC_IDS, tmp_path / "live")
    message = str(caught.value)
    assert says in message and "\n" not in message and f"{server.url}/_search" in message
    assert server.received_ids().count("q2") == (1 if fault == 403 else 3)
    assert not (tmp_path / "live").exists() or not list((tmp_path / "live").iterdir())


@pytest.mark.parametrize(
    ("endpoint", "fault", "says", "field"),
    [
        ({"hits": "hits.docs[*]"}, None, "query 'q1': the answer has no hits.docs[*]", "externals.live.endpoint.hits"),
        ({}, "nohits", "query 'q2': the answer has no hits.hits[*]", "externals.live.endpoint.hits"),
        ({"id": "_source.doc_id"}, None, "query 'q1': hit 1 has no _source.doc_id", "externals.live.endpoint.id"),
        ({"score": "score"}, None, "query 'q1': hit 1 has no score", "externals.live.endpoint.score"),
        ({}, "malformed", "query 'q2': HTTP 200, the answer is not JSON", "externals.live.endpoint"),
    ],
)
def test_an_answer_without_the_declared_path_names_query_and_path(server, tmp_path, endpoint, fault, says, field):
    if fault:
        server.always = {"q2": fault}
    with pytest.raises(live_search.EndpointError) as caught:
        external.snapshot(declare(server.url, **endpoint), QUERIES, DOC_IDS, tmp_path / "live")
    assert says in str(caught.value) and caught.value.field == field and "\n" not in str(caught.value)


def test_an_answer_naming_a_document_outside_the_corpus_is_refused_as_a_file_would_be(server, tmp_path):
    with pytest.raises(InputError) as caught:
        external.snapshot(declare(server.url), QUERIES, DOC_IDS.filter(DOC_IDS != "d4"), tmp_path / "live")
    assert "'d4' is not a document of the corpus" in str(caught.value)
    assert caught.value.file == (tmp_path / "live" / "snapshot.trec").as_posix()
    assert not (tmp_path / "live").exists() or not list((tmp_path / "live").iterdir())


def test_a_get_endpoint_with_query_parameters_and_other_paths(server, tmp_path):
    endpoint = {
        "url": f"{server.url}/search",
        "method": "GET",
        "body": None,
        "params": {"q": "{query}", "size": "{k}", "qid": "{query_id}"},
        "hits": "results",
        "id": "id",
        "score": "score",
    }
    entry = {"path": "data/work/queries.parquet", "description": DESCRIPTION, "endpoint": {**endpoint, "k": 5}}
    converted = external.snapshot(external.declared("live", entry), QUERIES, DOC_IDS, tmp_path / "live")
    assert converted.run.select("query_id", "doc_id", "score").rows() == expected_rows(server)
    assert sorted(server.received_ids()) == DEV


def test_secret_headers_come_from_the_environment_and_are_never_written(tmp_path, monkeypatch):
    monkeypatch.setenv("LIVE_SEARCH_TOKEN", TOKEN)
    headers = {"Authorization": {"env": "LIVE_SEARCH_TOKEN", "prefix": "Bearer "}}
    with SearchServer(DOCS, token=TOKEN) as server:
        converted = external.snapshot(declare(server.url, headers=headers), QUERIES, DOC_IDS, tmp_path / "live")
        runs.write_run(tmp_path / "live", converted.run, converted.meta)
        assert {h["Authorization"] for _, _, h in server.received} == {f"Bearer {TOKEN}"}
        written = b"".join(p.read_bytes() for p in (tmp_path / "live").iterdir())
        assert TOKEN.encode() not in written and b"LIVE_SEARCH_TOKEN" in written  # the variable's name, not its value
        assert TOKEN not in json.dumps(converted.meta) + "\n".join(external.summary(converted.meta["external"]))
        server.always = {"q1": 500}
        with pytest.raises(live_search.EndpointError) as caught:
            external.snapshot(declare(server.url, headers=headers), QUERIES, DOC_IDS, tmp_path / "again")
        assert TOKEN not in str(caught.value)
        monkeypatch.setenv("LIVE_SEARCH_TOKEN", "wrong")
        server.always = {}
        with pytest.raises(live_search.EndpointError) as caught:
            external.snapshot(declare(server.url, headers=headers), QUERIES, DOC_IDS, tmp_path / "again")
        assert "HTTP 401" in str(caught.value) and "wrong" not in str(caught.value)
    monkeypatch.delenv("LIVE_SEARCH_TOKEN")
    with pytest.raises(InputError) as caught:
        external.snapshot(declare("http://127.0.0.1:9", headers=headers), QUERIES, DOC_IDS, tmp_path / "again")
    assert "LIVE_SEARCH_TOKEN is not set" in str(caught.value)
    assert caught.value.field == "externals.live.endpoint.headers.Authorization"


def test_redaction_removes_every_secret():
    assert live_search.redact(f"http://x?key={TOKEN} Bearer {TOKEN}", [TOKEN]) == "http://x?key=*** Bearer ***"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"endpoint": {"url": "ftp://x/search", "body": ES_BODY}}, "externals.live.endpoint.url"),
        ({"endpoint": {"url": "http://u:p@x/search", "body": ES_BODY}}, "externals.live.endpoint.url"),
        ({"endpoint": {"url": "http://x", "method": "GET", "body": ES_BODY}}, "externals.live.endpoint.body"),
        ({"endpoint": {"url": "http://x", "body": {"q": "{qurey}"}}}, "externals.live.endpoint.body"),
        ({"endpoint": {"url": "http://x", "body": {"size": 3}}}, "externals.live.endpoint.body"),
        ({"endpoint": {"url": "http://x", "body": ES_BODY, "hits": "hits[*].x"}}, "externals.live.endpoint.hits"),
        ({"endpoint": {"url": "http://x", "body": ES_BODY, "id": "_id[*]"}}, "externals.live.endpoint.id"),
        ({"endpoint": {"url": "http://x", "body": ES_BODY, "k": 0}}, "externals.live.endpoint.k"),
        ({"endpoint": {"url": "http://x", "body": ES_BODY, "colour": 1}}, "externals.live.endpoint.colour"),
        (
            {"endpoint": {"url": "http://x", "body": ES_BODY, "headers": {"Authorization": "Bearer abc"}}},
            "externals.live.endpoint.headers.Authorization",
        ),
        ({"path": "data/live.trec"}, "externals.live.path"),
        ({"description": {**DESCRIPTION, "produced": "today"}}, "externals.live.description.produced"),
    ],
)
def test_an_endpoint_declaration_missing_what_it_must_say_is_refused_naming_the_key(change, field):
    entry = {
        "path": "data/work/queries.parquet",
        "description": DESCRIPTION,
        "endpoint": {"url": "http://x", "body": ES_BODY},
        **change,
    }
    with pytest.raises(InputError) as caught:
        external.declared("live", entry)
    assert caught.value.field == field


def test_response_paths():
    assert live_search.parse_path("hits.hits[*]", allow_all=True) == ("hits", "hits", "*")
    assert live_search.parse_path("fields.id[0]") == ("fields", "id", 0)
    assert live_search.parse_path("[*]", allow_all=True) == ("*",)
    assert live_search.resolve({"fields": {"id": ["a", "b"]}}, ("fields", "id", 1)) == "b"
    for bad in ("", ".a", "a..b", "a[x]", "a[0]b"):
        with pytest.raises(InputError):
            live_search.parse_path(bad)


# --------------------------------------------------------------------------- the pipeline


@pytest.mark.slow
@pytest.mark.heavy  # a real dvc repro of a small grid: over a minute here
def test_the_external_stage_snapshots_a_live_endpoint_and_scores_it_beside_the_grid(tmp_path):
    """A small DVC project, BM25 only, and the live-search configuration of conf/external/live.yaml
    pointed at the BM25 service over the project's corpus: `dvc repro` takes the snapshot (dev
    queries only), scores it beside bm25/c256, and no file of the project holds the secret."""
    project = make_pydocs_project(
        tmp_path / "project",
        "grid.chunkings=[c256]",
        "grid.models=[]",
        "grid.fusions=[]",
        "grid.fused={}",
        "grid.reranked={}",
        "grid.baseline=bm25/c256",
    )
    with gzip.open(project / "data" / "pydocs" / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        docs = {r["_id"]: f"{r.get('title', '')} {r['text']}" for r in map(json.loads, fh)}
    with SearchServer(docs, token=TOKEN) as server:
        shipped = (project / "conf" / "external" / "live.yaml").read_text(encoding="utf-8")
        assert "url: http://127.0.0.1:9200/docs/_search" in shipped
        (project / "conf" / "external" / "live.yaml").write_text(
            shipped.replace("http://127.0.0.1:9200/docs", server.url), encoding="utf-8"
        )
        run(["releval", "params", "+external@externals.live=live", "grid.external=[live]"], project)
        result = run(["dvc", "repro"], project, env_extra={"SEARCH_API_KEY": TOKEN})
        assert "a snapshot of a live system" in result.stdout
        assert set(server.received_ids()) == mini_queries("dev")
        # A query the endpoint keeps failing stops the stage with one line; the kept snapshot is untouched.
        folder = project / "data" / "work" / "runs" / "external" / "live"
        before = {p.name: p.read_bytes() for p in folder.iterdir()}
        failing = sorted(mini_queries("dev"))[1]
        server.always = {failing: 503}
        failed = run(
            [sys.executable, "stages/external.py", "--name", "live"],
            project,
            check=False,
            env_extra={"SEARCH_API_KEY": TOKEN},
        )
        assert failed.returncode == 2 and failed.stderr.count("\n") == 1, failed.stderr
        assert f"query {failing!r}: HTTP 503 after 4 tries" in failed.stderr and TOKEN not in failed.stderr
        assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    metrics = json.loads((project / "reports" / "metrics.json").read_text())["configs"]
    assert metrics["external/live"]["ndcg@10"] > 0 and "bm25/c256" in metrics
    folder = project / "data" / "work" / "runs" / "external" / "live"
    stored, meta = runs.read_run(folder)
    assert set(stored["query_id"]) <= mini_queries("dev") and (folder / "snapshot.trec").is_file()
    assert meta["external"]["endpoint"]["url"] == f"{server.url}/_search"
    observations = json.loads((project / "reports" / "observations.json").read_text())["observations"]
    observed = next(o for o in observations if o["config_id"] == "external/live")
    assert server.url in observed["external"]["description"]["produced"]
    carded = json.loads((project / "reports" / "card.json").read_text())["external_runs"]["external/live"]
    assert carded["endpoint"]["responses_sha256"] == meta["external"]["endpoint"]["responses_sha256"]
    assert carded["endpoint"]["queries_sent"] == len(mini_queries("dev"))
    for path in [
        project / "params.yaml",
        project / "dvc.lock",
        *(project / "data" / "work").rglob("*"),
        *(project / "reports").rglob("*"),
    ]:
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path
