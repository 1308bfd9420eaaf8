"""A benchmark case for the harness tests whose second variant outlives any small ``--timeout``.

Its children start without TensorFlow (see ``tests/trivial_benchmark_case.py``).
"""

from __future__ import annotations

import sys
import time

from benchmarks import _harness


def _run(variant, ctx):
    if variant == "sleepy":
        print("sleepy variant: going to sleep", file=sys.stderr, flush=True)
        time.sleep(120)
    return {"speed": 1.0}


CASE = _harness.Case(
    name="timeout",
    title="one variant that finishes, one that a timeout stops",
    variants=("done", "sleepy"),
    baseline="done",
    metrics=(_harness.Metric("speed", "things/s"),),
    run=_run,
)

GOALS = []
