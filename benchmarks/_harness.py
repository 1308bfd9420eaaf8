"""The benchmark harness: run cases interleaved in fresh processes, aggregate, write the table.

A case module (``benchmarks/cases/<name>.py``) defines ``CASE`` (a :class:`Case`) and
``GOALS`` (a list of :class:`Goal`). The parent process never imports TensorFlow: every
measurement runs in a child ``python -m benchmarks._harness --worker …`` that prints one
``BENCH_RESULT {json}`` line per (case, variant) it ran.

Repetitions are interleaved so slow drifts of a shared machine hit every variant alike, and
each repetition starts one variant later (A B C, B C A, C A B, …) so that no variant always
runs first, right after another case's processes, or last. In the full run each (case,
variant) gets its own process, so graph state, thread pools and caches never leak between
variants. ``--quick`` runs one process per repetition (importing TensorFlow costs 5-15 s a
process): the ``isolate`` case (cold start) first, with only its quick variant, then every
other case's variants in turn.

Several TensorFlow stacks (``pythons``: {label: interpreter}) run side by side in one run: each
(variant, stack) pair is measured in processes of its own under that stack's interpreter,
interleaved as the variants are, and keeps its label (``tfest_kit@2.21``). Goals and ``finish``
hooks see one stack at a time under the variants' own names; :meth:`Results.stack_rows` gives
each later stack's medians against the first's.

A child's record is checked against the case's metric names (finite numbers only) before it
counts; a variant that returns something else is reported as an error. Once every process has
finished, a case's ``finish`` hook may derive metrics from the whole run (BERT-tiny's share of
the matmul rate divides by the best matmul rate measured in any of its processes).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import importlib
import itertools
import json
import math
import numbers
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Any, Callable, Optional

from benchmarks import _stacks

__all__ = [
    "Metric",
    "Case",
    "Context",
    "Goal",
    "Results",
    "metric_problem",
    "median_seconds",
    "load_case",
    "run_benchmarks",
    "render_markdown",
    "machine_info",
    "CASE_NAMES",
]

CASE_NAMES = ("bert_tiny", "mlp", "serving", "input_pipeline", "cold_start", "model_dir_reads")
RESULT_PREFIX = "BENCH_RESULT "
ROOT = _stacks.ROOT


@dataclasses.dataclass(frozen=True)
class Metric:
    """One measured quantity of a case."""

    name: str
    unit: str
    higher_is_better: bool = True
    compare: bool = True  # show a ratio against the baseline variant
    derived: bool = False  # computed by the case's ``finish`` hook in the parent, not by run()


@dataclasses.dataclass(frozen=True)
class Context:
    """What a case's ``run`` gets: its scratch directory, quick flag, process start time."""

    workdir: str  # shared by every run of the case (set-up results can be cached here)
    quick: bool
    t0: float  # time.time() in the parent just before this process was started


@dataclasses.dataclass(frozen=True)
class Case:
    """A benchmark case: several variants measured by one ``run(variant, ctx)`` function.

    ``run`` returns ``{metric name: value}`` (metrics a variant does not have are left out),
    every value a finite number. ``finish(results, key)``, if given, runs in the parent once
    every process of the run has finished: it may add the values of ``derived`` metrics and
    returns lines of notes for the report (``key`` is the name the case was run under).
    """

    name: str
    title: str
    variants: tuple
    baseline: str
    metrics: tuple
    run: Callable[[str, Context], dict]
    isolate: bool = False
    quick_variants: Optional[tuple] = None
    finish: Optional[Callable[[Results, str], list]] = None

    def metric(self, name: str) -> Metric:
        for metric in self.metrics:
            if metric.name == name:
                return metric
        raise KeyError(f"case {self.name!r} has no metric {name!r}; it has {self.metric_names}")

    @property
    def metric_names(self) -> list:
        return [m.name for m in self.metrics]


def metric_problem(case: Case, metrics: Any, *, derived: bool = False) -> Optional[str]:
    """What is wrong with ``metrics`` as one measurement of ``case``, or None if nothing is.

    ``derived``: whether the case's derived metrics may be in it (only its ``finish`` hook
    adds them; a child's ``run`` must not).
    """
    names = [m.name for m in case.metrics if derived or not m.derived]
    if not isinstance(metrics, dict) or not metrics:
        return (
            f"run() must return a non-empty dict {{metric name: number}} with metrics from "
            f"{names}. Got: {metrics!r}"[:500]
        )
    unknown = [name for name in metrics if name not in names]
    if unknown:
        return f"run() returned unknown metric(s) {unknown}; case {case.name!r} measures {names}"
    bad = {
        name: value
        for name, value in metrics.items()
        if isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not math.isfinite(value)
    }
    if bad:
        return f"run() returned values that are not finite numbers: {bad!r}"[:500]
    return None


class Results:
    """All values measured, keyed by (case, metric, variant); medians and ratios on demand."""

    def __init__(self, cases: dict, stacks: tuple = ()):
        self.cases = cases
        # Stack labels; with two or more, every variant name carries its stack: "tfest_kit@2.21".
        self.stacks = tuple(stacks) or ("",)
        self.values: dict[tuple, list] = {}
        self.errors: list[dict] = []
        self.notes: list[str] = []  # shown under the table: how derived figures were made

    def add(self, case: str, variant: str, metrics: dict) -> None:
        """Records one measurement; raises ValueError if it is not valid for the case."""
        problem = metric_problem(self.cases[case], metrics, derived=True)
        if problem:
            raise ValueError(f"{case}/{variant}: {problem}")
        for name, value in metrics.items():
            self.values.setdefault((case, name, variant), []).append(float(value))

    def median(self, case: str, metric: str, variant: str) -> Optional[float]:
        values = self.values.get((case, metric, variant))
        return statistics.median(values) if values else None

    def ratio(self, case: str, metric: str, variant: str, baseline: str) -> Optional[float]:
        """How many times better ``variant`` is than ``baseline`` (> 1 = better).

        None only when either was not measured. A measured 0 is a result: it gives 0, or
        infinity on the other side of the division (nan when both are 0), and goals judge it.
        """
        value, base = self.median(case, metric, variant), self.median(case, metric, baseline)
        if value is None or base is None:
            return None
        higher = self.cases[case].metric(metric).higher_is_better
        numerator, denominator = (value, base) if higher else (base, value)
        if denominator == 0:
            return math.nan if numerator == 0 else math.copysign(math.inf, numerator)
        return numerator / denominator

    def labelled(self, variant: str, stack: str) -> str:
        """``variant``'s name in this run: ``variant@stack`` when the run has several stacks."""
        return f"{variant}@{stack}" if len(self.stacks) > 1 else variant

    def for_stack(self, stack: str) -> Results:
        """The values of one stack under the variants' own names (what goals and hooks read)."""
        if len(self.stacks) < 2:
            return self
        view = Results(self.cases)
        suffix = f"@{stack}"
        for (case, metric, variant), values in self.values.items():
            if variant.endswith(suffix):
                view.values[(case, metric, variant[: -len(suffix)])] = values
        return view

    def rows(self) -> list[dict]:
        rows = []
        for key, case in self.cases.items():
            for metric in case.metrics:
                for variant, stack in itertools.product(case.variants, self.stacks):
                    name, baseline = (
                        self.labelled(variant, stack),
                        self.labelled(case.baseline, stack),
                    )
                    values = self.values.get((key, metric.name, name))
                    if not values:
                        continue
                    ratio = None
                    if metric.compare and variant != case.baseline:
                        ratio = self.ratio(key, metric.name, name, baseline)
                    rows.append(
                        {
                            "case": key,
                            "metric": metric.name,
                            "variant": name,
                            "baseline": baseline,
                            "median": statistics.median(values),
                            "min": min(values),
                            "max": max(values),
                            "n": len(values),
                            "unit": metric.unit,
                            "higher_is_better": metric.higher_is_better,
                            "ratio_vs_baseline": ratio,
                            "values": values,
                        }
                    )
        return rows

    def stack_rows(self) -> list[dict]:
        """Each (case, metric, variant)'s median on every stack, and each later stack's ratio.

        ``ratios[stack]`` is how many times better the variant did on ``stack`` than on the
        first stack (> 1 = better; for times, first ÷ stack). Empty with fewer than 2 stacks.
        """
        if len(self.stacks) < 2:
            return []
        first, rows = self.stacks[0], []
        for key, case in self.cases.items():
            for metric, variant in itertools.product(case.metrics, case.variants):
                names = {stack: self.labelled(variant, stack) for stack in self.stacks}
                medians = {s: self.median(key, metric.name, name) for s, name in names.items()}
                if sum(m is not None for m in medians.values()) < 2:
                    continue
                ratios = {
                    stack: self.ratio(key, metric.name, names[stack], names[first])
                    for stack in self.stacks[1:]
                }
                rows.append(
                    {
                        "case": key,
                        "metric": metric.name,
                        "variant": variant,
                        "unit": metric.unit,
                        "medians": medians,
                        "ratios": ratios,
                    }
                )
        return rows


@dataclasses.dataclass(frozen=True)
class Goal:
    """A stated target. ``check(results)`` returns (measured text, True/False, or None = n/a)."""

    text: str
    check: Callable[[Results], tuple]


_FORMAT = re.compile(r"(?P<before>[^{}]*)\{:\.(?P<digits>\d+)(?P<kind>[fg%])\}(?P<after>[^{}]*)")


def _parse_format(fmt: str) -> re.Match:
    match = _FORMAT.fullmatch(fmt)
    if match is None:
        raise ValueError(
            "fmt must hold exactly one field {:.Nf}, {:.Ng} or {:.N%} (text around it is "
            f"kept). Got: {fmt!r}"
        )
    return match


def _agreeing_text(value: float, fmt: re.Match, passes: Callable[[float], bool]) -> str:
    """``value`` in ``fmt``, with digits added until the shown number gets the value's verdict.

    Rounding 0.9996 to "1×" beside a "≥ 1.0×" goal, or 0.5996 to "60%" beside "≥ 60%", would
    show a passing number next to FAIL.
    """
    kind, verdict = fmt["kind"], passes(value)
    for digits in range(int(fmt["digits"]), int(fmt["digits"]) + 15):
        number = format(value, f".{digits}{kind}")
        shown = float(number.rstrip("%")) / (100 if kind == "%" else 1)
        if passes(shown) == verdict:
            break
    return f"{fmt['before']}{number}{fmt['after']}"


def ratio_goal(text, case, metric, variant, baseline, at_least) -> Goal:
    """A goal "variant is at least ``at_least`` × baseline" on one metric."""
    fmt = _parse_format("{:.3g}×")

    def check(results: Results):
        ratio = results.ratio(case, metric, variant, baseline)
        if ratio is None:
            return "not measured", None

        def passes(number):
            return number >= at_least

        return _agreeing_text(ratio, fmt, passes), passes(ratio)

    return Goal(text, check)


def value_goal(text, case, metric, variant, *, at_least=None, at_most=None, fmt="{:.3g}") -> Goal:
    """A goal on the median of one metric; ``fmt`` as ``"{:.2f} s"`` (f, g or % formats)."""
    parsed = _parse_format(fmt)

    def passes(number):
        return (at_least is None or number >= at_least) and (at_most is None or number <= at_most)

    def check(results: Results):
        value = results.median(case, metric, variant)
        if value is None:
            return "not measured", None
        return _agreeing_text(value, parsed, passes), passes(value)

    return Goal(text, check)


def median_seconds(fn: Callable[[], Any], calls: int, warmup: int = 3) -> float:
    """Median seconds per call of ``fn`` over ``calls`` calls, after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def load_case(name: str):
    """Imports ``benchmarks.cases.<name>`` (cheap: case modules import TensorFlow lazily).

    A dotted name is imported as a module path as is (how the tests plug in a trivial case).
    """
    if "." in name:
        return importlib.import_module(name)
    if name not in CASE_NAMES:
        raise ValueError(f"Unknown case {name!r}. Cases: {', '.join(CASE_NAMES)}")
    return importlib.import_module(f"benchmarks.cases.{name}")


# ----------------------------------------------------------------------------- child side


def _worker(argv: list) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks worker")
    parser.add_argument("--worker", required=True, help="case:variant[,variant…][;case:…]")
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--t0", type=float, required=True)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    for item in args.worker.split(";"):
        case_name, variants = item.split(":")
        case = load_case(case_name).CASE
        workdir = os.path.join(args.workdir, case_name)
        os.makedirs(workdir, exist_ok=True)
        ctx = Context(workdir=workdir, quick=args.quick, t0=args.t0)
        for variant in variants.split(","):
            record: dict[str, Any] = {"case": case_name, "variant": variant}
            start = time.perf_counter()
            try:
                metrics = case.run(variant, ctx)
            except Exception as e:  # noqa: BLE001 - one broken variant must not hide the rest
                traceback.print_exc()
                record["error"] = f"{type(e).__name__}: {e}"[:500]
            else:
                # Checked here as well as in the parent: a NumPy float32 or an object would
                # otherwise break json.dumps and lose the records of the variants after it.
                problem = metric_problem(case, metrics)
                if problem:
                    record["error"] = problem
                else:
                    record["metrics"] = {name: float(value) for name, value in metrics.items()}
            record["seconds"] = time.perf_counter() - start
            print(RESULT_PREFIX + json.dumps(record), flush=True)
    return 0


# ---------------------------------------------------------------------------- parent side


def machine_info(stacks: Optional[dict] = None) -> dict:
    """Cores, CPU model, date, load and ``stacks`` ({label: :func:`_stacks.stack_versions`}).

    ``stacks`` defaults to the running interpreter under its :func:`_stacks.stack_label`.
    """
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    if stacks is None:
        versions = _stacks.stack_versions()
        stacks = {_stacks.stack_label(versions) or "": versions}
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "cores": os.cpu_count(),
        "cpu": cpu or "unknown",
        "stacks": stacks,
        "platform": platform.platform(),
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "load_average_at_start": [round(x, 2) for x in load] if load else None,
    }


def _spawn(jobs: list, workdir: str, quick: bool, timeout: float, log, python: str) -> list[dict]:
    """Runs one child of ``python`` for ``jobs`` = [(case, [variants])]; returns its records."""
    spec = ";".join(f"{case}:{','.join(variants)}" for case, variants in jobs)
    env = _stacks.child_env()
    cmd = [python, "-m", "benchmarks._harness", "--worker", spec, "--workdir", workdir]
    cmd += ["--quick"] if quick else []
    t0 = time.time()
    cmd += ["--t0", repr(t0)]
    # The child's temporary files (each variant's model_dir: up to 19 MB of BERT-tiny
    # checkpoints) go to a directory of its own that is removed when it exits; a full run
    # used to leave some 50 of them in /tmp.
    scratch = tempfile.mkdtemp(prefix="child_", dir=workdir)
    env["TMPDIR"] = scratch
    try:
        proc = subprocess.run(
            cmd,
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        stdout, stderr = proc.stdout, proc.stderr
        ended = f"child exited {proc.returncode}"
        failed = proc.returncode != 0
    except subprocess.TimeoutExpired as e:
        # The variants that finished before the timeout printed their records: keep them.
        stdout, stderr = _text(e.stdout), _text(e.stderr)
        ended = f"timed out: the child was stopped after {timeout:g} s (--timeout)"
        failed = True
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    records = _records(stdout)
    done = {(r["case"], r["variant"]) for r in records}
    missing = [(c, v) for c, vs in jobs for v in vs if (c, v) not in done]
    if failed or missing or any("error" in r for r in records):
        log(f"  {ended}; stderr tail:\n{stderr[-3000:]}")
    for case, variant in missing:
        records.append({"case": case, "variant": variant, "error": ended})
    return records


def _text(output) -> str:
    """A child's partial output from ``TimeoutExpired``: bytes, text or None."""
    if output is None:
        return ""
    return output.decode(errors="replace") if isinstance(output, bytes) else output


def _records(stdout: str) -> list[dict]:
    records = []
    for line in stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            # A line cut short by the timeout's kill: that variant counts as missing.
            with contextlib.suppress(json.JSONDecodeError):
                records.append(json.loads(line[len(RESULT_PREFIX) :]))
    return records


def _plan(cases: dict, quick: bool, repeat: int = 0, stacks: tuple = ("",)) -> list[tuple]:
    """The child processes of one repetition, in order: each (stack, [(case, [variants])]).

    Full mode: one process per (case, variant, stack), a variant's stacks one after the other.
    Quick mode: one process per stack for everything, with the ``isolate`` cases' quick
    variants first (they measure the process's own start-up). Repetition ``repeat`` rotates
    each case's variants, and the stacks, by ``repeat`` places, so in as many repetitions as a
    case has variants, each of them runs once in every place (and each stack first by turns).
    """

    def rotated(items) -> list:
        items = list(items)
        shift = repeat % len(items)
        return items[shift:] + items[:shift]

    if not quick:
        return [
            (stack, [(key, [variant])])
            for key, case in cases.items()
            for variant, stack in itertools.product(rotated(case.variants), rotated(stacks))
        ]
    ordered = sorted(cases.items(), key=lambda item: not item[1].isolate)
    jobs = [(key, rotated(case.quick_variants or case.variants)) for key, case in ordered]
    return [(stack, jobs) for stack in rotated(stacks)]


def run_benchmarks(
    case_names: list,
    *,
    repeats: int,
    quick: bool,
    workdir: str,
    timeout: float = 900.0,
    log: Callable[[str], None] = print,
    pythons: Optional[dict] = None,
) -> Results:
    """Runs the cases ``repeats`` times, interleaved; returns all measured values.

    Args:
      case_names: names from :data:`CASE_NAMES`.
      repeats: repetitions of every (case, variant); at least 1.
      quick: fewer steps and variants, one process per repetition (see the module docstring).
      workdir: scratch directory (set-up data, model_dirs).
      timeout: seconds allowed per child process.
      log: where progress lines go.
      pythons: {stack label: interpreter}, the first the stack the others are compared with;
        default: this interpreter alone. With several, each stack's children get a workdir of
        their own (``workdir/<label>``) and its variants are named ``variant@label``.

    Returns:
      A :class:`Results`.
    """
    pythons = pythons or {"": sys.executable}
    cases = {name: load_case(name).CASE for name in case_names}
    results = Results(cases, tuple(pythons))
    for repeat in range(repeats):
        for stack, jobs in _plan(cases, quick, repeat, results.stacks):
            label = "; ".join(f"{c}: {', '.join(vs)}" for c, vs in jobs)
            stack_dir = os.path.join(workdir, stack) if len(pythons) > 1 else workdir
            os.makedirs(stack_dir, exist_ok=True)
            start = time.time()
            records = _spawn(jobs, stack_dir, quick, timeout, log, pythons[stack])
            where = f"{stack}: " if len(pythons) > 1 else ""
            log(f"[{repeat + 1}/{repeats}] {where}{label} ({time.time() - start:.1f} s)")
            for i, record in enumerate(records):
                record["variant"] = results.labelled(record["variant"], stack)
                _take(results, record, repeat, first=i == 0 and len(records) > 1, log=log)
    for (key, case), stack in itertools.product(cases.items(), results.stacks):
        if case.finish is not None:
            _finish(results, key, case, stack, log)
    return results


def _finish(results: Results, key: str, case: Case, stack: str, log) -> None:
    """Runs ``case.finish`` on one stack's values; keeps its notes and derived values."""
    view = results.for_stack(stack)
    where = results.labelled(key, stack)
    try:
        notes = case.finish(view, key)
    except Exception as e:  # noqa: BLE001 - the measurements themselves are still good
        log(f"  ERROR {where}: finish hook failed:\n{traceback.format_exc()}")
        error = f"finish hook: {type(e).__name__}: {e}"[:500]
        results.errors.append(
            {"case": key, "variant": results.labelled("(all)", stack), "error": error}
        )
        return
    results.notes += [f"{where}: {note}" for note in notes]
    if view is not results:  # the derived values the hook added
        for (name, metric, variant), values in view.values.items():
            results.values.setdefault((name, metric, results.labelled(variant, stack)), values)


def _take(results: Results, record: dict, repeat: int, *, first: bool, log) -> None:
    """Logs one child record and adds its metrics to ``results``, or its error."""
    case, variant = record["case"], record["variant"]
    if "seconds" in record:  # a variant a timeout stopped has no time of its own
        # The first variant in a process also pays its one-time set-up (imports, Keras and
        # TensorFlow initialisation): its wall time is not the variant's speed.
        setup = " (with the process's set-up)" if first else ""
        log(f"    {case}/{variant}: {record['seconds']:.1f} s wall{setup}")
    error = record.get("error")
    if error is None:
        error = metric_problem(results.cases[case], record.get("metrics"))
    if error:
        log(f"  ERROR {case}/{variant}: {error}")
        results.errors.append({**record, "error": error, "repeat": repeat})
    else:
        results.add(case, variant, record["metrics"])


def _fmt(value: Optional[float]) -> str:
    if value is None:
        return ""
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 1:
        return f"{value:.3g}" if magnitude < 100 else f"{value:.0f}"
    return f"{value:.3g}"


def evaluate_goals(results: Results, goals: list) -> list[dict]:
    """Each goal judged on each stack's values (with several stacks, each entry names its own)."""
    evaluated = []
    for goal, stack in itertools.product(goals, results.stacks):
        measured, ok = goal.check(results.for_stack(stack))
        status = "N/A" if ok is None else ("PASS" if ok else "FAIL")
        entry = {"goal": goal.text, "measured": measured, "status": status}
        evaluated.append({**entry, "stack": stack} if len(results.stacks) > 1 else entry)
    return evaluated


def render_markdown(results: Results, goals: list[dict], machine: dict, settings: dict) -> str:
    """The Markdown report: header, one table of all rows, goals with PASS/FAIL, errors.

    With several stacks, also a table of each later stack's medians against the first's.
    """
    several = len(results.stacks) > 1
    lines = [
        "# tfest_kit benchmarks",
        "",
        f"- machine: {machine['cores']} cores, {machine['cpu']}, {machine['platform']}",
    ]
    for stack, v in machine["stacks"].items():
        where = f" of {stack} (`{v['executable']}`)" if several else ""
        lines.append(
            f"- versions{where}: Python {v['python']}, TensorFlow {v['tensorflow']}, "
            f"tensorflow-estimator {v['tensorflow_estimator']}, "
            f"Keras 2: {v['keras_package']} {v['keras']}"
        )
    lines += [
        f"- date: {machine['date']}; load average at start: {machine['load_average_at_start']}",
        f"- run: `python -m benchmarks{settings['command']}` — repeats {settings['repeats']}, "
        f"{'quick' if settings['quick'] else 'full'} mode, {settings['seconds']:.0f} s",
        "- ratio = how many times better than the case's baseline variant (> 1 is better; "
        "for times it is baseline ÷ variant)",
        "",
        "| case | metric | variant | median | min | max | n | unit | ratio vs baseline |",
        "|---|---|---|---:|---:|---:|---:|---|---:|",
    ]
    for row in results.rows():
        variant = row["variant"] + (" (baseline)" if row["variant"] == row["baseline"] else "")
        ratio = "" if row["ratio_vs_baseline"] is None else f"{row['ratio_vs_baseline']:.3g}×"
        lines.append(
            f"| {row['case']} | {row['metric']} | {variant} | {_fmt(row['median'])} | "
            f"{_fmt(row['min'])} | {_fmt(row['max'])} | {row['n']} | {row['unit']} | {ratio} |"
        )
    if results.notes:
        lines += [""] + [f"- {note}" for note in results.notes]
    if several:
        lines += _stack_table(results)
    stack_column = ("| stack ", "|---") if several else ("", "")
    lines += ["", "## Goals", "", f"{stack_column[0]}| goal | measured | status |"]
    lines += [f"{stack_column[1]}|---|---:|---|"]
    lines += [
        ("| " + g["stack"] + " " if several else "")
        + f"| {g['goal']} | {g['measured']} | {g['status']} |"
        for g in goals
    ]
    if results.errors:
        lines += ["", "## Errors", ""]
        lines += [f"- {_when(e)}, {e['case']}/{e['variant']}: {e['error']}" for e in results.errors]
    return "\n".join(lines) + "\n"


def _stack_table(results: Results) -> list:
    first, later = results.stacks[0], results.stacks[1:]
    vs = " / ".join(later)
    lines = [
        "",
        f"## {vs} vs {first}",
        "",
        f"How many times better each variant did on {vs} than on {first}: the ratio of the "
        f"medians (> 1: faster on {vs}; for times it is the median on {first} ÷ the other).",
        "",
        "| case | metric | variant | unit | "
        + " | ".join(f"median {stack}" for stack in results.stacks)
        + " | "
        + " | ".join(f"{stack} vs {first}" for stack in later)
        + " |",
        "|---|---|---|---|" + "---:|" * (len(results.stacks) + len(later)),
    ]
    for row in results.stack_rows():
        medians = " | ".join(_fmt(row["medians"][stack]) for stack in results.stacks)
        ratios = " | ".join(
            "" if row["ratios"][stack] is None else f"{row['ratios'][stack]:.3g}×"
            for stack in later
        )
        lines.append(
            f"| {row['case']} | {row['metric']} | {row['variant']} | {row['unit']} | "
            f"{medians} | {ratios} |"
        )
    return lines


def _when(error: dict) -> str:
    repeat = error.get("repeat")
    return "after the run" if repeat is None else f"repeat {repeat + 1}"


def write_report(
    results: Results, goals: list, machine: dict, settings: dict, out_dir: str, stem: str
) -> tuple[str, str]:
    """Writes ``<stem>.md`` and ``<stem>.json`` into ``out_dir``; returns both paths."""
    os.makedirs(out_dir, exist_ok=True)
    evaluated = evaluate_goals(results, goals)
    md_path = os.path.join(out_dir, f"{stem}.md")
    json_path = os.path.join(out_dir, f"{stem}.json")
    with open(md_path, "w") as f:
        f.write(render_markdown(results, evaluated, machine, settings))
    with open(json_path, "w") as f:
        json.dump(
            {
                "machine": machine,
                "settings": settings,
                "results": results.rows(),
                "stack_comparison": results.stack_rows(),
                "notes": results.notes,
                "goals": evaluated,
                "errors": results.errors,
            },
            f,
            indent=1,
        )
    return md_path, json_path


if __name__ == "__main__":
    sys.exit(_worker(sys.argv[1:]))
