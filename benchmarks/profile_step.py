"""``python -m benchmarks.profile_step``: where one BERT-tiny training step spends its time.

Builds the benchmark's BERT-tiny classifier (``benchmarks/cases/_bert_tiny.py``) with Adam in a
bare ``tf.compat.v1.Session`` using Estimator's default ``ConfigProto``, traces a few steps with
``RunOptions(trace_level=FULL_TRACE)`` and prints the kernel time per op type, the share that
is matmul, how busy the step kept the machine and the step's fraction of the 1024³ matmul rate.
It is how the "≥ 60 % of the matmul rate" goal was investigated (benchmarks/README.md).

Example:

    python -m benchmarks.profile_step            # 5 traced steps after 20 warm-up steps
    python -m benchmarks.profile_step --top 40 --traced 10
    python -m benchmarks.profile_step --batch 128 --hidden 256   # other shapes, same model
    python -m benchmarks.profile_step --bfloat16  # with run_config(mixed_precision="bfloat16")
"""

from __future__ import annotations

import argparse
import collections
import time
from collections.abc import Sequence
from typing import Optional

import numpy as np

from tfest_kit._checks import positive_int_arg

BATCH = 32
_MATMUL_OPS = ("MatMul", "BatchMatMul")


def _op_type(node_stats) -> str:
    # timeline_label reads "name = OpType(inputs)"; oneDNN kernels show as _Mkl… op types.
    label = node_stats.timeline_label
    return label.split("(")[0].split("=")[-1].strip() if label else node_stats.node_name


def _busy_micros(intervals: list) -> int:
    """Wall time covered by at least one running op."""
    busy, (start, end) = 0, intervals[0]
    for s, e in intervals[1:]:
        if s > end:
            busy += end - start
            start, end = s, e
        else:
            end = max(end, e)
    return busy + end - start


def profile(
    warmup: int = 20,
    timed: int = 50,
    traced: int = 5,
    batch: int = BATCH,
    hidden: int = 128,
    mixed_precision: Optional[str] = None,
) -> dict:
    """Times and traces BERT-tiny training steps; returns the measurements.

    Args:
      warmup: untimed steps first (graph optimisation, oneDNN primitive caches).
      timed: steps whose median wall time gives the step time.
      traced: steps run with a full trace for the per-op-type breakdown.
      batch: examples per step (the benchmark's is 32).
      hidden: hidden size (the benchmark's is 128); the feed-forward size stays 4 × hidden.
      mixed_precision: ``None`` or ``"bfloat16"`` (``tfest_kit.session_config``'s argument).

    Returns:
      A dict with ``step_ms``, ``examples_per_sec``, ``matmul_gflops``, ``matmul_fraction``,
      ``busy_fraction`` (share of the step with at least one op running), ``op_ms``
      (op type -> kernel milliseconds per step, summed over concurrent ops), ``op_count``,
      and what was built: ``input_shape`` and ``variable_shapes`` (name -> shape).

    Example:

        result = profile(traced=3)
        print(result["matmul_fraction"])
    """
    from benchmarks.cases import _bert_tiny, _training
    from tfest_kit._tf import tf
    from tfest_kit.config import session_config

    config = dict(_bert_tiny.CONFIG, hidden=hidden, intermediate=4 * hidden)
    gflops = _training.matmul_gflops()
    rng = np.random.RandomState(0)
    graph = tf.Graph()
    with graph.as_default():
        tf.set_random_seed(0)
        shape = (batch, config["seq_len"])
        ids = tf.constant(rng.randint(0, config["vocab_size"], shape), tf.int32)
        labels = tf.constant(rng.randint(0, 2, batch), tf.int32)
        train_op = _training.train_op(
            lambda features: _bert_tiny.encoder_logits(features["input_ids"], config),
            1e-4,
            {"input_ids": ids},
            labels,
        )
        init = tf.global_variables_initializer()
        shapes = {v.op.name: v.shape.as_list() for v in tf.trainable_variables()}
    op_micros, op_count = collections.Counter(), collections.Counter()
    busy = span = 0
    proto = session_config(mixed_precision=mixed_precision)
    with tf.Session(graph=graph, config=proto) as session:
        session.run(init)
        step = session.make_callable(train_op)
        for _ in range(warmup):
            step()
        times = []
        for _ in range(timed):
            start = time.perf_counter()
            step()
            times.append(time.perf_counter() - start)
        options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
        for _ in range(traced):
            metadata = tf.RunMetadata()
            session.run(train_op, options=options, run_metadata=metadata)
            intervals = []
            for device in metadata.step_stats.dev_stats:
                for node in device.node_stats:
                    op_micros[_op_type(node)] += node.all_end_rel_micros
                    op_count[_op_type(node)] += 1
                    start = node.all_start_micros
                    intervals.append((start, start + node.all_end_rel_micros))
            intervals.sort()
            busy += _busy_micros(intervals)
            span += max(e for _, e in intervals) - intervals[0][0]
    step_s = float(np.median(times))
    examples_per_sec = batch / step_s
    return {
        "step_ms": step_s * 1e3,
        "examples_per_sec": examples_per_sec,
        "matmul_gflops": gflops,
        "matmul_fraction": _bert_tiny.matmul_flops(config) * examples_per_sec / (gflops * 1e9),
        "busy_fraction": busy / span if span else 0.0,
        "op_ms": {k: v / traced / 1e3 for k, v in op_micros.most_common()},
        "op_count": {k: v // traced for k, v in op_count.items()},
        "input_shape": list(shape),
        "variable_shapes": shapes,
    }


def _report(result: dict, top: int) -> str:
    total = sum(result["op_ms"].values())
    matmul = sum(ms for op, ms in result["op_ms"].items() if any(m in op for m in _MATMUL_OPS))
    lines = [
        f"step {result['step_ms']:.1f} ms (median), {result['examples_per_sec']:.0f} examples/s, "
        f"{result['matmul_fraction']:.0%} of the {result['matmul_gflops']:.0f} GFLOP/s "
        "1024³ matmul rate",
        f"kernel time {total:.1f} ms per step on {result['busy_fraction']:.0%}-busy wall time "
        f"(ops overlap on the inter-op threads); matmuls {matmul / total:.0%} of it",
        "",
        f"{'op type':32s} {'ms/step':>8s} {'share':>6s} {'ops':>5s}",
    ]
    for op, ms in list(result["op_ms"].items())[:top]:
        lines.append(f"{op:32s} {ms:8.2f} {ms / total:6.1%} {result['op_count'][op]:5d}")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.profile_step",
        description="Per-op-type time of one BERT-tiny training step (bare Session).",
    )
    count = positive_int_arg
    parser.add_argument("--top", type=count, default=20, help="op types to list (default 20)")
    parser.add_argument("--traced", type=count, default=5, help="traced steps (default 5)")
    parser.add_argument(
        "--batch", type=count, default=BATCH, help=f"examples per step (default {BATCH})"
    )
    parser.add_argument(
        "--hidden", type=int, default=128, help="hidden size, a multiple of 2 heads (default 128)"
    )
    parser.add_argument(
        "--bfloat16",
        action="store_true",
        help="train with tfest_kit.session_config(mixed_precision='bfloat16')",
    )
    args = parser.parse_args(argv)
    if args.hidden < 2 or args.hidden % 2:
        parser.error(f"--hidden must be a positive even number (2 heads). Got: {args.hidden}")
    result = profile(
        traced=args.traced,
        batch=args.batch,
        hidden=args.hidden,
        mixed_precision="bfloat16" if args.bfloat16 else None,
    )
    print(_report(result, args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
