"""Inputs: corpora, query sets and judgments read from disk and validated; TREC run and qrels files."""
