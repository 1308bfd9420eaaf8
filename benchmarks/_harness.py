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
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from importlib import metadata
from typing import Any, Callable, Optional

__all__ = [
    "Metric",
    "Case",
    "Context",
    "Goal",
    "Results",
    "load_case",
    "run_benchmarks",
    "render_markdown",
    "machine_info",
    "CASE_NAMES",
]

CASE_NAMES = ("bert_tiny", "mlp", "serving", "input_pipeline", "cold_start")
RESULT_PREFIX = "BENCH_RESULT "
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclasses.dataclass(frozen=True)
class Metric:
    """One measured quantity of a case."""

    name: str
    unit: str
    higher_is_better: bool = True
    compare: bool = True  # show a ratio against the baseline variant


@dataclasses.dataclass(frozen=True)
class Context:
    """What a case's ``run`` gets: its scratch directory, quick flag, process start time."""

    workdir: str  # shared by every run of the case (set-up results can be cached here)
    quick: bool
    t0: float  # time.time() in the parent just before this process was started


@dataclasses.dataclass(frozen=True)
class Case:
    """A benchmark case: several variants measured by one ``run(variant, ctx)`` function.

    ``run`` returns ``{metric name: value}`` (metrics a variant does not have are left out).
    """

    name: str
    title: str
    variants: tuple
    baseline: str
    metrics: tuple
    run: Callable[[str, Context], dict]
    isolate: bool = False
    quick_variants: Optional[tuple] = None

    def metric(self, name: str) -> Metric:
        for metric in self.metrics:
            if metric.name == name:
                return metric
        raise KeyError(f"case {self.name!r} has no metric {name!r}; it has {self.metric_names}")

    @property
    def metric_names(self) -> list:
        return [m.name for m in self.metrics]


class Results:
    """All values measured, keyed by (case, metric, variant); medians and ratios on demand."""

    def __init__(self, cases: dict):
        self.cases = cases
        self.values: dict[tuple, list] = {}
        self.errors: list[dict] = []

    def add(self, case: str, variant: str, metrics: dict) -> None:
        for name, value in metrics.items():
            self.values.setdefault((case, name, variant), []).append(float(value))

    def median(self, case: str, metric: str, variant: str) -> Optional[float]:
        values = self.values.get((case, metric, variant))
        return statistics.median(values) if values else None

    def ratio(self, case: str, metric: str, variant: str, baseline: str) -> Optional[float]:
        """How many times better ``variant`` is than ``baseline`` (> 1 = better)."""
        value, base = self.median(case, metric, variant), self.median(case, metric, baseline)
        if value is None or base is None or value == 0 or base == 0:
            return None
        higher = self.cases[case].metric(metric).higher_is_better
        return value / base if higher else base / value

    def rows(self) -> list[dict]:
        rows = []
        for key, case in self.cases.items():
            for metric in case.metrics:
                for variant in case.variants:
                    values = self.values.get((key, metric.name, variant))
                    if not values:
                        continue
                    ratio = None
                    if metric.compare and variant != case.baseline:
                        ratio = self.ratio(key, metric.name, variant, case.baseline)
                    rows.append(
                        {
                            "case": key,
                            "metric": metric.name,
                            "variant": variant,
                            "baseline": case.baseline,
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


@dataclasses.dataclass(frozen=True)
class Goal:
    """A stated target. ``check(results)`` returns (measured text, True/False, or None = n/a)."""

    text: str
    check: Callable[[Results], tuple]


def ratio_goal(text, case, metric, variant, baseline, at_least) -> Goal:
    """A goal "variant is at least ``at_least`` × baseline" on one metric."""

    def check(results: Results):
        ratio = results.ratio(case, metric, variant, baseline)
        if ratio is None:
            return "not measured", None
        return f"{ratio:.3g}×", ratio >= at_least

    return Goal(text, check)


def value_goal(text, case, metric, variant, *, at_least=None, at_most=None, fmt="{:.3g}") -> Goal:
    """A goal on the median of one metric."""

    def check(results: Results):
        value = results.median(case, metric, variant)
        if value is None:
            return "not measured", None
        ok = (at_least is None or value >= at_least) and (at_most is None or value <= at_most)
        return fmt.format(value), ok

    return Goal(text, check)


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
                record["metrics"] = case.run(variant, ctx)
            except Exception as e:  # noqa: BLE001 - one broken variant must not hide the rest
                traceback.print_exc()
                record["error"] = f"{type(e).__name__}: {e}"[:500]
            record["seconds"] = time.perf_counter() - start
            print(RESULT_PREFIX + json.dumps(record), flush=True)
    return 0


# ---------------------------------------------------------------------------- parent side


def machine_info() -> dict:
    """Cores, CPU model, versions, date and load (without importing TensorFlow)."""
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass

    def version(package):
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            return "not installed"

    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "cores": os.cpu_count(),
        "cpu": cpu or "unknown",
        "python": platform.python_version(),
        "tensorflow": version("tensorflow"),
        "tensorflow_estimator": version("tensorflow-estimator"),
        "keras": version("keras"),
        "platform": platform.platform(),
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "load_average_at_start": [round(x, 2) for x in load] if load else None,
    }


def _spawn(jobs: list, workdir: str, quick: bool, timeout: float, log) -> list[dict]:
    """Runs one child for ``jobs`` = [(case, [variants])]; returns its result records."""
    spec = ";".join(f"{case}:{','.join(variants)}" for case, variants in jobs)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [ROOT] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    env["CUDA_VISIBLE_DEVICES"] = env.get("CUDA_VISIBLE_DEVICES", "")
    cmd = [sys.executable, "-m", "benchmarks._harness", "--worker", spec, "--workdir", workdir]
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
    except subprocess.TimeoutExpired as e:
        return [
            {"case": c, "variant": v, "error": f"timed out after {timeout:.0f} s ({e.cmd[-6:]})"}
            for c, vs in jobs
            for v in vs
        ]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    records = [
        json.loads(line[len(RESULT_PREFIX) :])
        for line in proc.stdout.splitlines()
        if line.startswith(RESULT_PREFIX)
    ]
    done = {(r["case"], r["variant"]) for r in records}
    missing = [(c, v) for c, vs in jobs for v in vs if (c, v) not in done]
    if proc.returncode != 0 or missing or any("error" in r for r in records):
        log(f"  child exited {proc.returncode}; stderr tail:\n{proc.stderr[-3000:]}")
    for case, variant in missing:
        records.append(
            {"case": case, "variant": variant, "error": f"child exited {proc.returncode}"}
        )
    return records


def _plan(cases: dict, quick: bool, repeat: int = 0) -> list[list]:
    """The child processes of one repetition, in order: each a list of (case, [variants]).

    Full mode: one process per (case, variant). Quick mode: one process for everything, with
    the ``isolate`` cases' quick variants first (they measure the process's own start-up).
    Repetition ``repeat`` rotates each case's variants by ``repeat`` places, so in as many
    repetitions as a case has variants, each of them runs once in every place.
    """

    def rotated(variants) -> list:
        variants = list(variants)
        shift = repeat % len(variants)
        return variants[shift:] + variants[:shift]

    if not quick:
        return [
            [(key, [variant])] for key, case in cases.items() for variant in rotated(case.variants)
        ]
    ordered = sorted(cases.items(), key=lambda item: not item[1].isolate)
    return [[(key, rotated(case.quick_variants or case.variants)) for key, case in ordered]]


def run_benchmarks(
    case_names: list,
    *,
    repeats: int,
    quick: bool,
    workdir: str,
    timeout: float = 900.0,
    log: Callable[[str], None] = print,
) -> Results:
    """Runs the cases ``repeats`` times, interleaved; returns all measured values.

    Args:
      case_names: names from :data:`CASE_NAMES`.
      repeats: repetitions of every (case, variant); at least 1.
      quick: fewer steps and variants, one process per repetition (see the module docstring).
      workdir: scratch directory (set-up data, model_dirs).
      timeout: seconds allowed per child process.
      log: where progress lines go.

    Returns:
      A :class:`Results`.
    """
    cases = {name: load_case(name).CASE for name in case_names}
    results = Results(cases)
    for repeat in range(repeats):
        for jobs in _plan(cases, quick, repeat):
            label = "; ".join(f"{c}: {', '.join(vs)}" for c, vs in jobs)
            start = time.time()
            records = _spawn(jobs, workdir, quick, timeout, log)
            log(f"[{repeat + 1}/{repeats}] {label} ({time.time() - start:.1f} s)")
            for i, record in enumerate(records):
                # The first variant in a process also pays its one-time set-up (imports, Keras
                # and TensorFlow initialisation): its wall time is not the variant's speed.
                first = " (with the process's set-up)" if i == 0 and len(records) > 1 else ""
                seconds = record.get("seconds", 0)
                log(f"    {record['case']}/{record['variant']}: {seconds:.1f} s wall{first}")
                if "error" in record:
                    log(f"  ERROR {record['case']}/{record['variant']}: {record['error']}")
                    results.errors.append({**record, "repeat": repeat})
                else:
                    results.add(record["case"], record["variant"], record["metrics"])
    return results


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
    evaluated = []
    for goal in goals:
        measured, ok = goal.check(results)
        status = "N/A" if ok is None else ("PASS" if ok else "FAIL")
        evaluated.append({"goal": goal.text, "measured": measured, "status": status})
    return evaluated


def render_markdown(results: Results, goals: list[dict], machine: dict, settings: dict) -> str:
    """The Markdown report: header, one table of all rows, goals with PASS/FAIL, errors."""
    lines = [
        "# tfest_kit benchmarks",
        "",
        f"- machine: {machine['cores']} cores, {machine['cpu']}, {machine['platform']}",
        f"- versions: Python {machine['python']}, TensorFlow {machine['tensorflow']}, "
        f"tensorflow-estimator {machine['tensorflow_estimator']}, Keras {machine['keras']}",
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
    lines += ["", "## Goals", "", "| goal | measured | status |", "|---|---:|---|"]
    lines += [f"| {g['goal']} | {g['measured']} | {g['status']} |" for g in goals]
    if results.errors:
        lines += ["", "## Errors", ""]
        lines += [
            f"- repeat {e['repeat'] + 1}, {e['case']}/{e['variant']}: {e['error']}"
            for e in results.errors
        ]
    return "\n".join(lines) + "\n"


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
                "goals": evaluated,
                "errors": results.errors,
            },
            f,
            indent=1,
        )
    return md_path, json_path


if __name__ == "__main__":
    sys.exit(_worker(sys.argv[1:]))
