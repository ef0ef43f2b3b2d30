"""Measurement: the metric engine under a contract, the one scoring path, the sealed holdout,
paired statistics and comparisons."""
