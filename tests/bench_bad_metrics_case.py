"""A benchmark case for the harness tests whose variants return every kind of bad metrics.

Its children start without TensorFlow (see ``tests/trivial_benchmark_case.py``). The
``finish`` hook counts the good values, to show the harness calls it after the run.
"""

from __future__ import annotations

from benchmarks import _harness

RETURNS = {
    "good": {"speed": 2.0},
    "empty": {},
    "none": {"speed": None},
    "nan": {"speed": float("nan")},
    "infinite": {"speed": float("inf")},
    "unknown": {"sped": 2.0},
    "text": {"speed": "fast"},
    "not_a_dict": [2.0],
    "derived": {"speed": 2.0, "doubled": 4.0},  # only the finish hook may set "doubled"
}


def _run(variant, ctx):
    return RETURNS[variant]


def _finish(results, key):
    speeds = results.values.get((key, "speed", "good"), [])
    for speed in speeds:
        results.add(key, "good", {"doubled": 2 * speed})
    return [f"doubled {len(speeds)} good speed(s)"]


CASE = _harness.Case(
    name="bad_metrics",
    title="variants returning bad metrics",
    variants=tuple(RETURNS),
    baseline="good",
    metrics=(
        _harness.Metric("speed", "things/s"),
        _harness.Metric("doubled", "things/s", derived=True),
    ),
    run=_run,
    finish=_finish,
)

GOALS = []
