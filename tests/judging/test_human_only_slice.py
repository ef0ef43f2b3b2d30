"""The human-only slice: queries no model judge labelled, reported beside every model-judged version."""

import polars as pl

from releval.judging.judgments import model_judged
from releval.judging.model_judge import human_only_queries
from releval.reporting.evaluation_report import HUMAN_ONLY_SLICE, human_only_slice

JUDGMENTS = pl.DataFrame(
    {
        "query_id": ["q1", "q1", "q2", "q3", "q3"],
        "doc_id": ["a", "b", "a", "c", "d"],
        "grade": [3, 0, 1, 2, 0],
        "annotator": ["ann", "model:qwen@0123456789ab", "ann", "bob", "ann"],
    }
)


def test_the_stage_records_which_queries_a_model_judged_and_nothing_for_human_labels():
    assert model_judged(JUDGMENTS) == {"model_judged_queries": ["q1"]}
    assert model_judged(JUDGMENTS.filter(~pl.col("annotator").str.starts_with("model:"))) == {}


def test_the_report_slice_is_the_scored_queries_no_model_touched_and_agrees_with_the_judge_module():
    meta = model_judged(JUDGMENTS)
    assert human_only_slice(meta, ["q1", "q2", "q3", "q4"]) == {HUMAN_ONLY_SLICE: ["q2", "q3", "q4"]}
    assert set(human_only_slice(meta, ["q1", "q2", "q3"])[HUMAN_ONLY_SLICE]) == set(human_only_queries(JUDGMENTS))
    assert human_only_slice({}, ["q1", "q2"]) == {}  # all human: no slice to add
