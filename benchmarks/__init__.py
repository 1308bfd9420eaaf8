"""Side-by-side measurements of tfest_kit against the official APIs it wraps.

Run ``python -m benchmarks [--quick] [--cases a,b] [--repeats N] [--python LABEL=PATH]``; see
``benchmarks/_harness.py`` for how cases are run and ``benchmarks/cases/`` for what each one
measures. Results go to ``benchmarks/results/latest.md`` and ``latest.json`` from a run of every
case without errors, ``quick.*`` for ``--quick`` and ``partial.*`` for any other run.
"""
