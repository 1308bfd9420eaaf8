"""The BERT-tiny benchmark model's shape and its matmul FLOPs, without TensorFlow.

Apart from :mod:`benchmarks.cases._bert_tiny` (which builds the model and imports TensorFlow)
because the harness's parent process, which never imports TensorFlow, turns examples/sec into
a share of the matmul rate with :func:`matmul_flops`.
"""

from __future__ import annotations

__all__ = ["CONFIG", "matmul_flops"]

CONFIG = {
    "vocab_size": 1000,
    "hidden": 128,
    "layers": 2,
    "heads": 2,
    "intermediate": 512,
    "seq_len": 64,
    "num_classes": 2,
}


def matmul_flops(config: dict = CONFIG, training: bool = True) -> float:
    """Float32 multiply-add FLOPs per example in the matmuls (training = 3 × forward)."""
    s, h, f = config["seq_len"], config["hidden"], config["intermediate"]
    per_layer = 4 * 2 * s * h * h + 2 * 2 * s * s * h + 2 * 2 * s * h * f
    forward = config["layers"] * per_layer + 2 * h * h + 2 * h * config["num_classes"]
    return forward * (3 if training else 1)
