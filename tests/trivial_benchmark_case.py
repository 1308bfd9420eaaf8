"""A trivial benchmark case for the harness tests: its children start without TensorFlow.

It lives apart from ``tests/test_benchmarks.py`` because each benchmark child imports the
case's module, and that test module imports TensorFlow (5-15 s per child).
"""

from __future__ import annotations

import os
import tempfile

from benchmarks import _harness

_THIS = __name__


def _trivial_run(variant, ctx):
    # Appends "variant:pid" so the test can see the order and the processes.
    with open(os.path.join(ctx.workdir, "order.txt"), "a") as f:
        f.write(f"{variant}:{os.getpid()}\n")
    # A temporary directory, as the training cases make for their model_dirs.
    with open(os.path.join(ctx.workdir, "temporary.txt"), "a") as f:
        f.write(tempfile.mkdtemp(prefix="model_dir_") + "\n")
    if variant == "broken":
        raise RuntimeError("deliberately broken variant")
    return {
        "speed": {"fast": 4.0, "slow": 2.0}[variant],
        "latency": {"fast": 1.0, "slow": 3.0}[variant],
    }


CASE = _harness.Case(
    name="trivial",
    title="trivial case for the harness tests",
    variants=("fast", "slow", "broken"),
    baseline="slow",
    metrics=(
        _harness.Metric("speed", "things/s"),
        _harness.Metric("latency", "s", higher_is_better=False),
    ),
    run=_trivial_run,
)

GOALS = [
    _harness.ratio_goal("fast ≥ 1.5× slow", _THIS, "speed", "fast", "slow", 1.5),
    _harness.ratio_goal("fast ≥ 10× slow", _THIS, "speed", "fast", "slow", 10.0),
    _harness.value_goal("latency of fast ≤ 0.5", _THIS, "latency", "fast", at_most=0.5),
    _harness.value_goal("never measured", _THIS, "latency", "nobody", at_most=1.0),
]
