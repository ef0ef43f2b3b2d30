"""An :class:`~releval.measurement.metrics.Evaluation` as text: JSON, or TSV with the contract in comments."""

from __future__ import annotations

import json

from releval.measurement.metrics import Evaluation


def evaluation_json(evaluation: Evaluation, per_query: bool) -> str:
    """The evaluation's record (contract, counts, means; every query's values with ``per_query``)."""
    return json.dumps(evaluation.to_dict(per_query=per_query), indent=2, allow_nan=False) + "\n"


def evaluation_tsv(evaluation: Evaluation, per_query: bool) -> str:
    """Comment lines carry the contract and counts; then ``query_id`` rows and a final ``all`` row of means."""
    document = evaluation.to_dict(per_query=per_query)
    names = document["contract"]["metrics"]
    lines = [f"# contract {key}={json.dumps(value)}" for key, value in document["contract"].items()]
    lines += [f"# counts {key}={json.dumps(value)}" for key, value in document["counts"].items()]
    lines.append("\t".join(["query_id", *names]))
    for query_id, values in document.get("per_query", {}).items():
        lines.append("\t".join([query_id, *(_number(values[name]) for name in names)]))
    lines.append("\t".join(["all", *(_number(document["mean"][name]) for name in names)]))
    return "\n".join(lines) + "\n"


def _number(value: float) -> str:
    return repr(float(value))
