"""Provenance: the run archive, evaluation cards, the audit that traces every number to its inputs,
and revisions (all git and dvc.lock access)."""
