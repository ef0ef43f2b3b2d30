"""`releval init-dataset NAME --corpus PATH`: a new dataset's configs, templates and empty first judgments.

    releval init-dataset NAME --corpus PATH [--format jsonl|folder|beir|smart]
                         [--queries PATH [--queries-format releval|jsonl|beir|smart]]
                         [--annotator NAME ...] [--scale 0=...,1=...] [--date YYYY-MM-DD] [--root DIR]

The corpus (and the queries, when given) is read by the readers the pipeline's stages use: a bad
file is refused, naming its file, line and field, and nothing is written. Then, under the project
root (``--root``, default the working directory):

* ``conf/dataset/NAME.yaml``: the corpus and queries (paths relative to the root), its defaults
  naming ``conf/judgments/NAME-v1.yaml``;
* ``conf/judgments/NAME-v1.yaml``: version v1 at ``data/NAME/judgments/v1``;
* ``data/NAME/queries.jsonl`` when ``--queries`` is not given: three template rows in releval's
  queries format (``query_id``, ``text``, ``split`` dev/holdout, optional ``slices`` and
  ``must_never_break``), each with a ``TEMPLATE`` key that validation refuses (``field
  'TEMPLATE': unknown field``) until the row is replaced by a real query;
* ``data/NAME/judgments/RUBRIC.md``: the headings and grade table of data/judgments/RUBRIC.md with
  fill-in prompts;
* ``data/NAME/judgments/v1/``: an empty first judgment version (``judgments.jsonl`` of 0 bytes, a
  sealed manifest: ``parent: null``, the scale (``--scale``, default 0-3 as the pydocs rubric),
  ``rubric: ../RUBRIC.md``, the ``--annotator`` names (default: your login name)).

Nothing that exists is overwritten: when any of these exists the command names it and writes
nothing. It ends by printing the next commands.
"""

from __future__ import annotations

import argparse
import getpass

from releval.errors import InputError
from releval.judging.completeness import KINDS
from releval.judging.scaffold import CORPUS_FORMATS, QUERY_FORMATS, Scaffold, init_dataset, parse_scale


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="NAME", help="the dataset's name: letters, digits, '-', '_'")
    parser.add_argument(
        "--corpus", required=True, help="the corpus: a JSONL file (.gz too), a folder, a BEIR dir, SMART"
    )
    parser.add_argument(
        "--format",
        dest="corpus_format",
        choices=CORPUS_FORMATS,
        help="the corpus's format (default: beir for a folder holding corpus.jsonl, folder for another folder, "
        "else jsonl)",
    )
    parser.add_argument("--queries", help="existing queries (default: a template data/NAME/queries.jsonl)")
    parser.add_argument("--queries-format", default="releval", choices=QUERY_FORMATS, help="default: releval")
    parser.add_argument(
        "--qrels",
        metavar="FILE",
        help="labels you already have (TREC qrels, a BEIR qrels .tsv; graded or binary): they become the first "
        "judgment version instead of an empty one (needs --queries); your own judgments go on top as revisions",
    )
    parser.add_argument(
        "--completeness",
        choices=KINDS,
        help="what --qrels declares: positives-only (unlisted documents non-relevant, the BEIR/MTEB convention) or "
        "pooled (non-relevant judgments recorded); default: positives-only unless a row has grade 0",
    )
    parser.add_argument(
        "--annotator",
        action="append",
        dest="annotators",
        metavar="NAME",
        help="a name the first version declares (repeatable; default: your login name); imports add others",
    )
    parser.add_argument("--scale", help="grades and labels, e.g. '0=not relevant,1=partial,2=relevant' (default 0-3)")
    parser.add_argument("--date", help="the first version's date, YYYY-MM-DD (default today)")
    parser.add_argument("--root", default=".", help="the project root holding conf/ and data/ (default: .)")


def run(args: argparse.Namespace) -> int:
    annotators = tuple(args.annotators or (_login_name(),))
    result = init_dataset(
        args.name,
        args.corpus,
        root=args.root,
        corpus_format=args.corpus_format,
        queries=args.queries,
        queries_format=args.queries_format,
        annotators=annotators,
        scale=parse_scale(args.scale) if args.scale else None,
        date=args.date,
        qrels=args.qrels,
        completeness=args.completeness,
    )
    print(summary(result, args.corpus))
    return 0


def _login_name() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        raise InputError("no login name to declare as annotator; pass --annotator NAME", field="annotator") from None


def summary(result: Scaffold, corpus: str) -> str:
    """What was written, then the next commands."""
    files, name = result.files, result.files.name
    first_set = files.first_set.as_posix()
    lines = [f"corpus {corpus}: {result.documents} documents"]
    if result.queries is not None:
        lines.append(f"queries: {result.queries.height}")
    lines.append("wrote:")
    lines += [f"  {path.as_posix()}" for path in result.written]
    manifest = result.manifest
    held = "empty" if manifest.imported_from is None else f"the labels of {manifest.imported_from['file']}"
    lines.append(
        f"  (judgments {first_set}: {held}, declared {manifest.completeness.text()}, scale "
        f"{_scale_text(manifest.scale)}, annotators {', '.join(manifest.annotators)})"
    )
    lines.append("next:")
    if manifest.imported_from is not None:
        revision = files.first_set.parent / "v2"
        lines.append(f"  1. fill in {files.rubric.as_posix()} (what each grade means)")
        lines.append(
            f"  2. releval params dataset={name} && dvc repro    # every configuration scored under your labels"
        )
        lines.append(
            f"  3. to judge what the grid retrieves on top of them: releval judge {revision.as_posix()} "
            f"--annotator YOU --parent {first_set}, then releval params judgments.version=v2 "
            f"judgments.path={revision.as_posix()} && dvc repro"
        )
        return "\n".join(lines)
    step = 1
    if result.queries is None:
        lines.append(
            f"  {step}. write your queries into {files.queries.as_posix()} (replace the TEMPLATE rows), fill in "
            f"{files.rubric.as_posix()}, then check: releval validate {files.data_dir.as_posix()}"
        )
    else:
        lines.append(f"  {step}. fill in {files.rubric.as_posix()}, then check: releval validate {first_set}")
    step += 1
    lines.append(
        f"  {step}. releval params dataset={name} && dvc repro --keep-going    # every configuration's run; "
        "score stops ('there are no judgments') while v1 is empty"
    )
    step += 1
    lines.append(
        f"  {step}. releval pool --missing --out pool.csv    # the pairs to judge, blind; grade them in the "
        f"browser (releval judge {first_set} --annotator YOU) or in pool.csv's grade column"
    )
    step += 1
    lines.append(f"  {step}. releval pool --import pool.csv --into {first_set} --annotator YOU && dvc repro")
    return "\n".join(lines)


def _scale_text(scale: dict[int, str]) -> str:
    return "{" + ", ".join(f"{g}: {label}" for g, label in sorted(scale.items())) + "}"
