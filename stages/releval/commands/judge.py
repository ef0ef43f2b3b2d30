"""`releval judge`: grade pooled pairs on a local page, one at a time and blind; or with a model judge.

    releval judge SET_DIR --annotator NAME [--pool POOL.csv|POOL.jsonl] [--parent SET_DIR] [--port 0]
                  [--double-share 0.25 --second-annotator NAME] [--seed 0] [--depth K]
                  [--queries FILE] [--corpus FILE] [--date YYYY-MM-DD] [--no-browser]
    releval judge SET_DIR --annotator NAME --finish
    releval judge ... --model CONFIG ...           (the model judge: releval.judging.model_judge)

SET_DIR is the judgment version the grades go into: an existing one (grades are appended), or a
new directory revising ``--parent`` (default: the active judgment version, params ``judgments``).
The pairs are ``--pool``'s, else the judging debt (what ``releval pool --missing`` computes),
recorded at the first start in ``SET_DIR.session/assignment.json``. The page (127.0.0.1 only, no
external asset) shows one query and one document at a time, sorted by query then document, with
no system, score or rank; the rubric of the set beside it; keys 0-3 grade, Left/Right go back and
skip; a notes field; progress per query and overall; a search box (BM25 over the corpus) to add a
document the pool missed for the query on screen. Every grade is saved at once, atomically, in
``SET_DIR.session/<annotator>.json``: restart the command and reload the page to go on.

Evidence spans: on a pair graded 1 or more, select the passage(s) that earn the grade in the
document's text (never the title) with the mouse and press ``e`` (or the "add the selection"
button); ``x`` removes the last, each listed span has a remove button; at most 3, highlighted in the
text. They are saved with the grade (a grade changed to 0 drops them) and written as the judgments'
``evidence``: quoted anchors, with an occurrence where the passage's text repeats.

``--double-share S --second-annotator B``: a seeded share S of the queries (recorded) is also
judged by B, who starts the same command with ``--annotator B`` and sees only those queries and
only his own grades. "Finish" (the page's button, or ``--finish``) imports the annotator's grades
into SET_DIR through the code of ``releval pool --import``: validated, manifest re-sealed; a finish
that was killed is completed by the next one.

One server (or ``--finish``) per set and annotator at a time: a second is refused, naming the
first's pid and address (``SET_DIR.session/<annotator>.lock``, an OS lock that a killed server does
not leave behind). Another annotator of the same set starts his own beside it.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import threading
import time
import webbrowser

from releval.errors import InputError, InputErrors
from releval.judging import model_judge


def configure(parser: argparse.ArgumentParser) -> None:
    add_model_judge_arguments(parser.add_argument_group("model judge"))
    page = parser.add_argument_group("the judging page")
    _add(
        parser,
        page,
        "set_dir",
        nargs="?",
        metavar="SET_DIR",
        help="judgment version to write into (created from --parent)",
    )
    _add(parser, page, "--annotator", help="your name, as the judgments will carry it")
    _add(parser, page, "--pool", metavar="POOL", help="pairs to judge: a pool file (.csv or .jsonl); "
         "default: the judging debt of the grid (releval pool --missing)")  # fmt: skip
    _add(parser, page, "--parent", metavar="SET_DIR", help="when SET_DIR does not exist: the version it revises "
         "(default: the active judgment version, params judgments)")  # fmt: skip
    _add(parser, page, "--port", type=int, default=0, help="port on 127.0.0.1 (default 0: a free one)")
    _add(parser, page, "--double-share", type=float, metavar="SHARE",
         help="share of the queries also judged by --second-annotator (default 0.25 when one is named)")  # fmt: skip
    _add(parser, page, "--second-annotator", metavar="NAME", help="the second judge of the double-judged queries")
    _add(parser, page, "--seed", type=int, help="seed of the double-judged queries' choice (default 0)")
    _add(parser, page, "--depth", type=int, help="the judging debt's depth (default: the k of the contract's judged@k)")
    _add(parser, page, "--queries", help="queries (default: data/work/queries.parquet, else the set's dataset's)")
    _add(parser, page, "--queries-format", choices=("jsonl", "beir", "smart", "parquet"), help="default jsonl")
    _add(parser, page, "--corpus", help="corpus (default: data/work/docs.parquet, else the set's dataset's)")
    _add(parser, page, "--corpus-format", choices=("jsonl", "folder", "beir", "smart", "parquet"),
         help="default: what the path looks like")  # fmt: skip
    _add(parser, page, "--date", help="date of a new version (default today), YYYY-MM-DD")
    _add(parser, page, "--finish", action="store_true", help="write the grades into SET_DIR without serving the page")
    _add(parser, page, "--no-browser", action="store_true", help="print the page's address; open no browser")


def add_model_judge_arguments(group: argparse._ActionsContainer) -> None:
    """The model judge's options (:class:`releval.judging.model_judge.Request`)."""
    group.add_argument("--model", metavar="CONFIG", help="judge config (YAML), e.g. conf/judge/vllm.yaml")
    group.add_argument(
        "--min-kappa",
        type=float,
        default=0.6,
        help="refuse the judge when its linear weighted kappa against the human reference is below this (0.6)",
    )
    group.add_argument(
        "--max-failure-rate",
        type=float,
        default=0.05,
        help="refuse the judge when more than this share of its calibration answers is unparseable (0.05)",
    )
    group.add_argument("--calibrate-only", action="store_true", help="write SET_DIR/calibration.json and stop")
    group.add_argument(
        "--pool", metavar="FILE", help="pairs to grade: a pool file (.csv/.jsonl); default: the grid's judging debt"
    )
    group.add_argument("--depth", type=int, help="judging debt: top-k documents (default: the contract's judged@k)")
    group.add_argument("--queries", help="query file for the texts (default: params dataset.queries)")
    group.add_argument("--queries-format", help="its format (default: params dataset.queries.format, else jsonl)")
    group.add_argument("--corpus", help="corpus for the texts (default: params dataset.corpus)")
    group.add_argument("--corpus-format", help="its format (default: params dataset.corpus.format, else jsonl)")
    group.add_argument("--date", help="date of the new version (default today), YYYY-MM-DD")


def model_judge_request(args: argparse.Namespace) -> model_judge.Request:
    """The model judge's part of the command line."""
    fields = [field.name for field in dataclasses.fields(model_judge.Request)]
    return model_judge.Request(**{name: getattr(args, name) for name in fields if hasattr(args, name)})


def _add(parser: argparse.ArgumentParser, group, name: str, **kwargs) -> None:
    """Add an option unless the model judge's group already declared it (the two share SET_DIR, --pool...)."""
    dest = kwargs.get("dest") or name.lstrip("-").replace("-", "_")
    taken = name in parser._option_string_actions or any(a.dest == dest for a in parser._actions)
    if not taken:
        group.add_argument(name, **kwargs)


def run(args: argparse.Namespace) -> int:
    if getattr(args, "model", None):
        return model_judge.run(model_judge_request(args))
    from releval.judging import web  # the page's server and its imports (0.2 s): not for the model judge

    if not getattr(args, "set_dir", None):
        raise InputError("name the judgment version to write into: releval judge SET_DIR", field="set_dir")
    if not args.annotator:
        raise InputError("the judging page needs --annotator NAME", file="<command line>", field="annotator")
    # One process per (set, annotator): a second server would overwrite the first one's session.
    with web.claim(args.set_dir, args.annotator, "finish" if args.finish else "serve") as held:
        desk = web.open_desk(
            args.set_dir,
            args.annotator,
            pool=args.pool,
            parent=args.parent,
            queries=args.queries,
            queries_format=args.queries_format,
            corpus=args.corpus,
            corpus_format=args.corpus_format,
            depth=args.depth,
            second=args.second_annotator,
            double_share=args.double_share,
            seed=args.seed,
            date=args.date,
        )
        if args.finish:
            return _finish(desk)
        return _serve(web, desk, args.port, open_browser=not args.no_browser, held=held)


def _finish(desk) -> int:
    """Import; every problem is printed as FILE:LINE: field 'F': message (exit 1), nothing written."""
    try:
        result = desk.finish()
    except InputErrors as exc:
        for error in exc.errors:
            print(error)
        print(f"{len(exc.errors)} problems; nothing was written", file=sys.stderr)
        return 1
    print(f"judge: {result['message']}; {result['ungraded']} pairs still ungraded")
    return 0


FINISH_GRACE_SECONDS = 1.0


def _serve(web, desk, port: int, *, open_browser: bool, held) -> int:
    server = web.make_server(desk, port)
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    held.note(doing="serve", url=url)  # a second start names this address
    state = desk.state()
    print(
        f"judge: {desk.annotator} on {desk.set_dir} — {state['graded']} of {state['total']} pairs graded; "
        f"session {desk.path}\n  open {url}  (Ctrl-C stops; every grade is already saved; once every pair is "
        "graded, the page's finish writes them and stops this command)",
        flush=True,
    )
    if open_browser:
        webbrowser.open(url)
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    try:
        while not server.finished.wait(0.5):
            pass
        time.sleep(FINISH_GRACE_SECONDS)  # the page's finish request gets its answer before the server goes
        print(f"judge: {server.finish_message}; every pair graded: done", flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        server.server_close()
    return 0
