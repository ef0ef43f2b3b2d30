"""Provenance: the run archive, evaluation cards and the audit that traces every number to its inputs."""
