"""Judging: versioned judgment sets, the blind pool for annotators, inter-annotator agreement."""
