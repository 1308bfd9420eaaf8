"""The benchmark harness on trivial cases (``tests/trivial_benchmark_case.py`` and
``tests/bench_*_case.py``, whose benchmark children start without TensorFlow).

Times are never asserted on; the tests check the machinery: fresh processes, interleaving,
aggregation, ratios, the Markdown/JSON report, goals and error reporting, timeouts, checks of
the command line and of what a case returns, and BERT-tiny's share of the matmul rate. The
last tests run the step profiler (``benchmarks.profile_step``) on the real BERT-tiny model.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from benchmarks import __main__ as bench_main
from benchmarks import _harness
from tests import bench_bad_metrics_case as bad_case
from tests import bench_timeout_case as timeout_case
from tests import trivial_benchmark_case as trivial_case
from tests.conftest import ROOT, bfloat16_is_emulated, run_program
from tfest_kit._tf import KERAS_PACKAGE, TF_VERSION

_THIS = trivial_case.__name__
_TIMEOUT = timeout_case.__name__
_BAD = bad_case.__name__
GOALS = trivial_case.GOALS


def _order(workdir):
    with open(os.path.join(workdir, _THIS, "order.txt")) as f:
        return [line.split(":") for line in f.read().split()]


def test_full_mode_interleaves_variants_in_fresh_processes(tmp_path):
    lines = []
    results = _harness.run_benchmarks(
        [_THIS], repeats=3, quick=False, workdir=str(tmp_path), log=lines.append
    )
    order = _order(tmp_path)
    # Interleaved, and each repetition starts one variant later: none always runs first.
    assert [v for v, _ in order] == ["fast", "slow", "broken", "slow", "broken", "fast"] + [
        "broken",
        "fast",
        "slow",
    ]
    assert len({pid for _, pid in order}) == 9  # one process per (repeat, variant)
    assert results.values[(_THIS, "speed", "fast")] == [4.0, 4.0, 4.0]
    assert results.ratio(_THIS, "speed", "fast", "slow") == pytest.approx(2.0)
    assert results.ratio(_THIS, "latency", "fast", "slow") == pytest.approx(3.0)  # lower=better
    assert len(results.errors) == 3
    assert "deliberately broken variant" in results.errors[0]["error"]
    assert any("RuntimeError" in line for line in lines)  # the child's traceback is shown
    # Each child's temporary files went under the workdir and were removed when it exited.
    with open(tmp_path / _THIS / "temporary.txt") as f:
        temporary = f.read().split()
    assert len(temporary) == 9
    assert all(path.startswith(str(tmp_path)) and not os.path.exists(path) for path in temporary)

    machine = _harness.machine_info()
    # Read from the package metadata (the parent never imports TensorFlow): the one that runs,
    # and the Keras 2 that tf.keras is (keras 2.15, or tf-keras from TensorFlow 2.16 on).
    (stack,) = machine["stacks"].values()
    assert machine["cores"] == os.cpu_count() and stack["tensorflow"] == TF_VERSION
    assert stack["keras_package"].replace("-", "_") == KERAS_PACKAGE
    settings = {"command": " --x", "repeats": 3, "quick": False, "seconds": 1.0, "cases": [_THIS]}
    md_path, json_path = _harness.write_report(
        results, GOALS, machine, settings, str(tmp_path / "out"), "latest"
    )
    with open(md_path) as f:
        text = f.read()
    assert "| case | metric | variant | median | min | max | n | unit | ratio vs baseline |" in text
    assert f"| {_THIS} | speed | fast | 4 | 4 | 4 | 3 | things/s | 2× |" in text
    assert f"| {_THIS} | speed | slow (baseline) | 2 |" in text
    assert "| fast ≥ 1.5× slow | 2× | PASS |" in text
    assert "| fast ≥ 10× slow | 2× | FAIL |" in text
    assert "| never measured | not measured | N/A |" in text
    assert "## Errors" in text and f"{os.cpu_count()} cores" in text
    with open(json_path) as f:
        report = json.load(f)
    assert {g["status"] for g in report["goals"]} == {"PASS", "FAIL", "N/A"}
    row = next(r for r in report["results"] if r["variant"] == "fast" and r["metric"] == "speed")
    assert row["n"] == 3 and row["median"] == 4.0 and row["ratio_vs_baseline"] == 2.0


def test_quick_mode_runs_one_process_per_repetition(tmp_path):
    lines = []
    _harness.run_benchmarks([_THIS], repeats=2, quick=True, workdir=str(tmp_path), log=lines.append)
    order = _order(tmp_path)
    assert [v for v, _ in order] == ["fast", "slow", "broken", "slow", "broken", "fast"]
    assert len({pid for _, pid in order}) == 2
    # Only the first variant of each process carries the process's set-up in its wall time.
    timed = [line.strip() for line in lines if " s wall" in line]
    assert [line.split(":")[0] for line in timed if "set-up" in line] == [
        f"{_THIS}/fast",
        f"{_THIS}/slow",
    ]
    assert len(timed) == 6


def test_plan_puts_isolated_cases_first_in_quick_mode():
    cold = _harness.load_case("cold_start").CASE
    mlp = _harness.load_case("mlp").CASE
    cases = {"mlp": mlp, "cold_start": cold}
    assert _harness._plan(cases, quick=True) == [
        ("", [("cold_start", ["tfest_kit"]), ("mlp", list(mlp.quick_variants))])
    ]
    full = _harness._plan(cases, quick=False)
    assert len(full) == len(mlp.variants) + len(cold.variants)
    assert all(len(jobs) == 1 and len(jobs[0][1]) == 1 for _, jobs in full)
    # Over len(variants) repetitions every variant runs first once.
    repeats = range(len(mlp.variants))
    firsts = [_harness._plan(cases, quick=False, repeat=r)[0][1][0][1][0] for r in repeats]
    assert sorted(firsts) == sorted(mlp.variants)
    # Two stacks: one process per (variant, stack), a variant's stacks one after the other;
    # in quick mode one process per stack, the stacks' order rotating too.
    two = _harness._plan({"mlp": mlp}, quick=False, stacks=("2.15", "2.21"))
    assert [(stack, jobs[0][1][0]) for stack, jobs in two[:3]] == [
        ("2.15", "tfest_kit"),
        ("2.21", "tfest_kit"),
        ("2.15", mlp.variants[1]),
    ]
    assert len(two) == 2 * len(mlp.variants)
    quick = _harness._plan(cases, quick=True, repeat=1, stacks=("2.15", "2.21"))
    assert [stack for stack, _ in quick] == ["2.21", "2.15"]
    second = _harness._plan({"mlp": mlp}, quick=False, repeat=1, stacks=("2.15", "2.21"))
    assert [(stack, jobs[0][1][0]) for stack, jobs in second[:2]] == [
        ("2.21", mlp.variants[1]),
        ("2.15", mlp.variants[1]),
    ]


def test_every_case_module_declares_a_case_and_goals():
    for name in _harness.CASE_NAMES:
        module = _harness.load_case(name)
        assert module.CASE.name == name
        assert module.CASE.baseline in module.CASE.variants
        assert isinstance(module.GOALS, list)
    with pytest.raises(ValueError, match="Unknown case 'nope'"):
        _harness.load_case("nope")


def test_cli_checks_its_arguments(capsys):
    with pytest.raises(SystemExit):
        bench_main.build_parser().parse_args(["--cases", "mlp,nope"])
    assert "unknown case(s) ['nope']" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench_main.build_parser().parse_args(["--repeats", "0"])
    args = bench_main.build_parser().parse_args(["--quick", "--cases", "mlp,serving"])
    assert args.cases == ["mlp", "serving"] and args.repeats == 3 and args.quick


def test_cli_help_runs_as_a_program():
    proc = run_program(["-m", "benchmarks", "--help"], timeout=60)
    assert "--quick" in proc.stdout and "--repeats" in proc.stdout


_FAKE_PYTHON = """#!/bin/sh
case "$*" in
*list_physical_devices*) echo 2.15.1; echo "$FAKE_GPUS" ;;
*version_info*) echo 3.11 ;;
esac
"""


@pytest.mark.parametrize(
    ("gpus", "nvidia_smi", "make", "allow_no_gpu", "exit_code"),
    [
        ("[]", 9, 0, "1", 0),  # the documented dry run on a CPU machine
        ("[]", 9, 0, "0", 2),  # no GPU, no dry run asked for
        ("[]", 9, 1, "1", 1),  # a dry run whose demo fails
        ("[PhysicalDevice(name='/physical_device:GPU:0')]", 9, 0, "0", 1),  # nvidia-smi fails
        ("[PhysicalDevice(name='/physical_device:GPU:0')]", 0, 0, "0", 0),
    ],
)
def test_gpu_check_exit_status(tmp_path, gpus, nvidia_smi, make, allow_no_gpu, exit_code):
    # `SKIP_INSTALL=1 ALLOW_NO_GPU=1 bash benchmarks/gpu_check.sh`, docs/gpu.md's dry run, always
    # exited 1: nvidia-smi fails without a GPU. The script runs on a copy of its directory with
    # a fake venv python, make and nvidia-smi (nothing installed, trained or downloaded).
    (tmp_path / "benchmarks").mkdir()
    shutil.copy(os.path.join(ROOT, "benchmarks", "gpu_check.sh"), tmp_path / "benchmarks")
    fakes = {
        ".venv-2.15/bin/python": _FAKE_PYTHON,
        "bin/make": f"#!/bin/sh\nexit {make}\n",
        "bin/nvidia-smi": f"#!/bin/sh\necho nvidia-smi: no driver\nexit {nvidia_smi}\n",
    }
    for name, text in fakes.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
        (tmp_path / name).chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "FAKE_GPUS": gpus,
        "SKIP_INSTALL": "1",
        "ALLOW_NO_GPU": allow_no_gpu,
        "OUT": str(tmp_path / "out"),
    }
    script = str(tmp_path / "benchmarks" / "gpu_check.sh")
    proc = subprocess.run(["bash", script], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == exit_code, proc.stderr
    dry_run = gpus == "[]" and exit_code != 2
    assert ("dry run" in proc.stderr) == dry_run, proc.stderr
    if exit_code != 2:
        summary = (tmp_path / "out" / "summary.md").read_text()
        assert ("dry run" in summary.splitlines()[0]) == dry_run, summary


def _results_of(case_module, values: dict) -> _harness.Results:
    """``Results`` for ``case_module`` holding ``{(metric, variant): [values]}``."""
    key = case_module.__name__
    results = _harness.Results({key: case_module.CASE})
    for (metric, variant), numbers in values.items():
        results.values[(key, metric, variant)] = list(numbers)
    return results


def _results_check(goal, values: dict):
    """``goal.check`` on the trivial case with one value per ``{(metric, variant): value}``."""
    return goal.check(_results_of(trivial_case, {key: [v] for key, v in values.items()}))


def test_bert_tiny_share_divides_by_the_best_matmul_rate_of_the_run():
    from benchmarks.cases import _bert_tiny_shape, bert_tiny

    results = _harness.Results({"bert_tiny": bert_tiny.CASE})
    # The tfest_kit process measured its matmul while the machine was busy (100 GFLOP/s).
    for variant, examples_per_sec, gflops in (
        ("tfest_kit", 700.0, 100.0),
        ("session", 700.0, 200.0),
        ("keras", 600.0, 190.0),
    ):
        results.add("bert_tiny", variant, {"examples_per_sec": examples_per_sec})
        results.add("bert_tiny", variant, {"matmul_gflops": gflops})
    # cpu_replicas' process runs its ops on one thread each: it measures no matmul rate.
    results.add("bert_tiny", "tfest_kit_replicas", {"examples_per_sec": 840.0})
    notes = bert_tiny.finish(results, "bert_tiny")
    share = _bert_tiny_shape.matmul_flops() * 700.0 / 200e9
    # Every process against the run's best rate: the busy one gains nothing from its load.
    assert results.values[("bert_tiny", "matmul_fraction", "tfest_kit")] == [pytest.approx(share)]
    assert results.values[("bert_tiny", "matmul_fraction", "session")] == [pytest.approx(share)]
    assert notes == [
        "matmul rate: max of 3 measurements in this run, 200 GFLOP/s (min 100); matmul_fraction "
        "divides by it (each measurement is the faster of one just before and one just after a "
        "variant's training)"
    ]
    replicas_share = _bert_tiny_shape.matmul_flops() * 840.0 / 200e9
    assert results.values[("bert_tiny", "matmul_fraction", "tfest_kit_replicas")] == [
        pytest.approx(replicas_share)
    ]
    one_copy, replicas = (goal for goal in bert_tiny.GOALS if "matmul rate" in goal.text)
    assert "cpu_replicas" not in one_copy.text and "cpu_replicas" in replicas.text
    assert one_copy.check(results) == (f"{share:.0%}", share >= 0.6)
    assert replicas.check(results) == (
        f"{replicas_share:.0%}",
        replicas_share >= 0.6,
    )
    # A child may not report the share itself: only the parent knows the whole run's rates.
    problem = _harness.metric_problem(
        bert_tiny.CASE, {"examples_per_sec": 700.0, "matmul_fraction": 0.9}
    )
    assert "unknown metric(s) ['matmul_fraction']" in problem
    # The parent computes the share without TensorFlow (it never imports it).
    program = (
        "import sys; from benchmarks import _harness; from benchmarks.cases import bert_tiny; "
        "r = _harness.Results({'bert_tiny': bert_tiny.CASE}); "
        "r.add('bert_tiny', 'session', {'examples_per_sec': 1.0, 'matmul_gflops': 2.0}); "
        "print(bert_tiny.finish(r, 'bert_tiny')); assert 'tensorflow' not in sys.modules"
    )
    assert "max of 1 measurements" in run_program(["-c", program], timeout=60).stdout


def test_the_harness_runs_the_finish_hook_and_reports_its_notes(tmp_path):
    results = _harness.run_benchmarks(
        [_BAD], repeats=1, quick=True, workdir=str(tmp_path), log=lambda line: None
    )
    assert results.values[(_BAD, "doubled", "good")] == [4.0]
    assert results.notes == [f"{_BAD}: doubled 1 good speed(s)"]
    machine = _harness.machine_info()
    settings = {"command": "", "repeats": 1, "quick": True, "seconds": 1.0, "cases": [_BAD]}
    md_path, json_path = _harness.write_report(
        results, [], machine, settings, str(tmp_path / "out"), "x"
    )
    with open(md_path) as f:
        assert f"\n- {_BAD}: doubled 1 good speed(s)\n" in f.read()
    with open(json_path) as f:
        assert json.load(f)["notes"] == results.notes


def test_a_measured_zero_is_judged_not_reported_as_not_measured():
    results = _results_of(
        trivial_case,
        {
            ("speed", "fast"): [0.0],
            ("speed", "slow"): [2.0],
            ("latency", "fast"): [0.0],
            ("latency", "slow"): [3.0],
        },
    )
    assert results.ratio(_THIS, "speed", "fast", "slow") == 0.0
    assert results.ratio(_THIS, "speed", "slow", "fast") == float("inf")
    # Lower is better: a latency of 0 s beats any other.
    assert results.ratio(_THIS, "latency", "fast", "slow") == float("inf")
    assert GOALS[0].check(results) == ("0×", False)  # fast ≥ 1.5× slow
    evaluated = _harness.evaluate_goals(results, GOALS)
    assert [g["status"] for g in evaluated] == ["FAIL", "FAIL", "PASS", "N/A"]
    both_zero = _results_of(trivial_case, {("speed", "fast"): [0.0], ("speed", "slow"): [0.0]})
    assert GOALS[0].check(both_zero) == ("nan×", False)
    # Only a value that is missing is "not measured".
    assert GOALS[0].check(_results_of(trivial_case, {("speed", "slow"): [2.0]})) == (
        "not measured",
        None,
    )


def test_shown_numbers_agree_with_the_verdict():
    ratio_goal = _harness.ratio_goal("fast ≥ 1.0× slow", _THIS, "speed", "fast", "slow", 1.0)
    share_goal = _harness.value_goal(
        "share ≥ 60%", _THIS, "speed", "fast", at_least=0.6, fmt="{:.0%}"
    )
    time_goal = _harness.value_goal(
        "latency ≤ 0.5 s", _THIS, "latency", "fast", at_most=0.5, fmt="{:.2f} s"
    )

    def speeds(fast, slow=1.0):
        return {("speed", "fast"): fast, ("speed", "slow"): slow}

    # Rounded to 3 digits these would read "1×", "60%" and "0.50 s" beside FAIL.
    assert _results_check(ratio_goal, speeds(0.9996)) == ("0.9996×", False)
    assert _results_check(share_goal, speeds(0.5996)) == ("59.96%", False)
    assert _results_check(time_goal, {("latency", "fast"): 0.5004}) == ("0.5004 s", False)
    # Numbers that already agree with their verdict keep their usual digits.
    assert _results_check(ratio_goal, speeds(1.0004)) == ("1×", True)
    assert _results_check(ratio_goal, speeds(0.9)) == ("0.9×", False)
    assert _results_check(share_goal, speeds(0.6)) == ("60%", True)
    assert _results_check(share_goal, speeds(0.6049)) == ("60%", True)
    assert _results_check(time_goal, {("latency", "fast"): 0.4996}) == ("0.50 s", True)
    with pytest.raises(ValueError, match=r"fmt must hold exactly one field .* Got: '\{\} s'"):
        _harness.value_goal("bad", _THIS, "latency", "fast", at_most=1.0, fmt="{} s")


def test_a_timeout_keeps_the_variants_that_finished(tmp_path):
    lines = []
    results = _harness.run_benchmarks(
        [_TIMEOUT], repeats=1, quick=True, workdir=str(tmp_path), timeout=3, log=lines.append
    )
    assert results.values[(_TIMEOUT, "speed", "done")] == [1.0]
    assert [(e["variant"], e["error"]) for e in results.errors] == [
        ("sleepy", "timed out: the child was stopped after 3 s (--timeout)")
    ]
    log = "\n".join(lines)
    assert "sleepy variant: going to sleep" in log  # the stderr tail of the stopped child
    assert f"{_TIMEOUT}/done: " in log and f"{_TIMEOUT}/sleepy: 0.0 s wall" not in log
    assert not [line for line in lines if "sleepy" in line and " s wall" in line]


def test_invalid_metric_records_become_errors(tmp_path):
    lines = []
    results = _harness.run_benchmarks(
        [_BAD], repeats=1, quick=True, workdir=str(tmp_path), log=lines.append
    )
    assert results.values[(_BAD, "speed", "good")] == [2.0]
    assert {key[2] for key in results.values} == {"good"}
    errors = {e["variant"]: e["error"] for e in results.errors}
    assert set(errors) == set(bad_case.RETURNS) - {"good"}
    assert "run() must return a non-empty dict {metric name: number}" in errors["empty"]
    assert "Got: {}" in errors["empty"] and "Got: [2.0]" in errors["not_a_dict"]
    for variant in ("none", "nan", "infinite", "text"):
        assert "not finite numbers" in errors[variant], variant
    assert "unknown metric(s) ['sped']; case 'bad_metrics' measures ['speed']" in errors["unknown"]
    assert "unknown metric(s) ['doubled']" in errors["derived"]
    assert any(line.startswith(f"  ERROR {_BAD}/none: ") for line in lines)
    # The parent checks too, whatever a child printed: a None used to crash the whole run.
    record = {"case": _BAD, "variant": "none", "metrics": {"speed": None}, "seconds": 0.1}
    _harness._take(results, record, 0, first=False, log=lines.append)
    assert "not finite numbers: {'speed': None}" in results.errors[-1]["error"]
    with pytest.raises(ValueError, match="not finite numbers"):
        results.add(_BAD, "good", {"speed": float("nan")})


def test_timeout_must_be_a_positive_finite_number(capsys):
    parser = bench_main.build_parser()
    for text in ("0", "-1", "nan", "inf", "-inf", "soon", ""):
        with pytest.raises(SystemExit):
            parser.parse_args([f"--timeout={text}"])
        err = capsys.readouterr().err
        assert f"--timeout must be a positive, finite number of seconds. Got: {text!r}" in err
    assert parser.parse_args(["--timeout", "2.5"]).timeout == 2.5


def _fake_runs(monkeypatch, errors=()):
    """Replaces the measurements in ``bench_main.main`` with an empty run; returns its calls."""
    calls = []

    def run_benchmarks(case_names, **kwargs):
        calls.append(list(case_names))
        results = _harness.Results({n: _harness.load_case(n).CASE for n in case_names})
        results.errors += list(errors)
        return results

    monkeypatch.setattr(_harness, "run_benchmarks", run_benchmarks)
    return calls


def test_out_dir_is_checked_before_the_run(tmp_path, monkeypatch, capsys):
    calls = _fake_runs(monkeypatch)
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    for out_dir, message in (
        (a_file, f"--out-dir {str(a_file)!r} is a file, not a directory"),
        (a_file / "sub", f"--out-dir {str(a_file / 'sub')!r} cannot be created or written to"),
    ):
        with pytest.raises(SystemExit) as info:
            bench_main.main(["--cases", "mlp", "--out-dir", str(out_dir)])
        assert info.value.code == 2
        assert message in capsys.readouterr().err
    assert calls == []  # nothing was measured
    # A directory that does not exist yet is created.
    assert bench_main.main(["--cases", "mlp", "--out-dir", str(tmp_path / "new" / "dir")]) == 0
    assert (tmp_path / "new" / "dir" / "partial.md").is_file()


def test_only_a_complete_run_without_errors_writes_latest(tmp_path, monkeypatch, capsys):
    _fake_runs(monkeypatch)
    out = tmp_path / "out"
    assert bench_main.main(["--cases", "mlp,serving", "--out-dir", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out / 'partial.md'} and {out / 'partial.json'}" in printed
    assert "a run of some cases only writes partial.*" in printed
    assert sorted(os.listdir(out)) == ["partial.json", "partial.md"]
    assert bench_main.main(["--out-dir", str(out)]) == 0
    assert f"wrote {out / 'latest.md'}" in capsys.readouterr().out
    assert bench_main.main(["--quick", "--cases", "mlp", "--out-dir", str(out)]) == 0
    assert (out / "quick.md").is_file()
    assert bench_main.main(["--cases", "mlp", "--stem", "mine", "--out-dir", str(out)]) == 0
    assert (out / "mine.md").is_file()
    # Every case, but a variant failed: not the results to replace latest.* with. Exit 1.
    os.remove(out / "partial.md")
    _fake_runs(monkeypatch, errors=[{"case": "mlp", "variant": "keras", "error": "x", "repeat": 0}])
    assert bench_main.main(["--out-dir", str(out)]) == 1
    assert "a run with errors writes partial.*" in capsys.readouterr().out
    assert (out / "partial.md").is_file()


def test_repeated_case_names_run_and_list_goals_once(tmp_path, monkeypatch, capsys):
    parser = bench_main.build_parser()
    assert parser.parse_args(["--cases", "mlp,serving,mlp"]).cases == ["mlp", "serving"]
    calls = _fake_runs(monkeypatch)
    assert bench_main.main(["--cases", "mlp,mlp", "--out-dir", str(tmp_path)]) == 0
    assert calls == [["mlp"]]
    with open(tmp_path / "partial.md") as f:
        text = f.read()
    for goal in _harness.load_case("mlp").GOALS:
        assert text.count(f"| {goal.text} |") == 1


def test_profile_step_breaks_a_bert_tiny_step_down_by_op_type():
    from benchmarks import profile_step

    result = profile_step.profile(warmup=2, timed=3, traced=1)
    assert result["examples_per_sec"] > 0
    assert 0 < result["busy_fraction"] <= 1
    assert 0 < result["matmul_fraction"] < 2
    # The model's dense layers and attention are matmuls, and they dominate the kernel time.
    matmul_ms = sum(ms for op, ms in result["op_ms"].items() if "MatMul" in op)
    assert matmul_ms > 0.3 * sum(result["op_ms"].values())
    assert "ResourceApplyAdam" in result["op_ms"]
    report = profile_step._report(result, top=5)
    assert len(report.splitlines()) == 4 + 5
    assert "of the" in report and "matmuls" in report


def test_profile_step_measures_other_shapes_and_rejects_bad_ones(capsys):
    from benchmarks import profile_step

    result = profile_step.profile(warmup=1, timed=2, traced=1, batch=8, hidden=64)
    # The model really had that shape, and the rate counts 8 examples a step.
    assert result["input_shape"] == [8, 64]
    assert result["variable_shapes"]["bert/layer_0/query/kernel"] == [64, 64]
    assert result["variable_shapes"]["bert/layer_0/intermediate/kernel"] == [64, 256]
    assert result["examples_per_sec"] * result["step_ms"] / 1e3 == pytest.approx(8)
    for argv, message in (
        (["--hidden", "63"], "--hidden must be a positive even number"),
        (["--batch", "0"], "argument --batch: must be a positive integer. Got: '0'"),
    ):
        with pytest.raises(SystemExit):
            profile_step.main(argv)
        assert message in capsys.readouterr().err


@pytest.mark.skipif(
    bfloat16_is_emulated(),
    reason="oneDNN off or no bfloat16 instructions on this CPU",
)
def test_profile_step_and_the_training_case_run_bfloat16():
    from benchmarks import profile_step
    from benchmarks.cases import bert_tiny

    small = {"warmup": 1, "timed": 2, "traced": 1, "batch": 8, "hidden": 64}
    float32 = profile_step.profile(**small)
    bfloat16 = profile_step.profile(**small, mixed_precision="bfloat16")
    # The rewrite casts into and out of bfloat16 around the matmuls.
    assert bfloat16["op_count"].get("Cast", 0) > float32["op_count"].get("Cast", 0) + 10
    assert "tfest_kit_bf16" in bert_tiny.CASE.variants
    assert _small_bert_tiny_throughput("tfest_kit_bf16") > 0


def _small_bert_tiny_throughput(variant: str) -> float:
    """``variant``'s examples/sec over a few BERT-tiny steps of batch 4 (that it trains)."""
    from benchmarks.cases import _bert_tiny, _training, bert_tiny

    return _training.train_throughput(
        variant,
        logits_fn=lambda features: _bert_tiny.encoder_logits(features["input_ids"]),
        keras_fn=_bert_tiny.keras_model,
        features_fn=bert_tiny._features,
        batch_size=4,
        warmup=2,
        steps=3,
    )


def test_the_mlp_cases_loop_variants_train(tf_thread_pools_made):
    from benchmarks.cases import _training, bert_tiny, mlp

    # threads=(0, 1) sets the process's pools: in a process of its own, never in --quick's.
    intra1 = "tfest_kit_intra1_loop100"
    assert intra1 in mlp.CASE.variants and intra1 not in mlp.CASE.quick_variants
    assert intra1 not in bert_tiny.CASE.variants
    loops = ("tfest_kit_loop10", "session_loop100", "keras_spe10", "keras_estimator_loop10")
    for variant in (*loops, intra1):
        rate = _training.train_throughput(
            variant,
            logits_fn=mlp._logits,
            keras_fn=mlp._keras,
            features_fn=mlp._features,
            batch_size=8,
            warmup=2,
            steps=3,
        )
        assert rate > 0, variant


def test_the_training_case_runs_cpu_replicas_outside_quick_mode(tf_thread_pools_made):
    from benchmarks.cases import bert_tiny

    assert "tfest_kit_replicas" in bert_tiny.CASE.variants
    # --quick runs every variant in one process; this one would set the others' threads.
    assert "tfest_kit_replicas" not in bert_tiny.CASE.quick_variants
    assert _small_bert_tiny_throughput("tfest_kit_replicas") > 0


def test_python_runs_the_variants_under_a_second_stack_and_compares_them(
    tmp_path, monkeypatch, capsys
):
    # This interpreter a second time, labelled "other": runs on either stack, in seconds.
    monkeypatch.setattr(_harness, "CASE_NAMES", (*_harness.CASE_NAMES, _THIS))
    argv = ["--cases", _THIS, "--repeats", "2", "--out-dir", str(tmp_path / "out")]
    argv += ["--workdir", str(tmp_path / "work"), "--python", f"other={sys.executable}"]
    assert bench_main.main(argv) == 1  # the broken variant, on both stacks
    own = "%d.%d" % tuple(int(part) for part in TF_VERSION.split(".")[:2])
    # Each (variant, stack) in processes of its own, the stacks' children in their own workdirs.
    for stack in (own, "other"):
        assert [v for v, _ in _order(tmp_path / "work" / stack)] == [
            "fast",
            "slow",
            "broken",
            "slow",
            "broken",
            "fast",
        ]
    with open(tmp_path / "out" / "partial.md") as f:
        text = f.read()
    assert f"- versions of {own} (`{sys.executable}`): Python " in text
    assert f"- versions of other (`{sys.executable}`): Python " in text
    assert f"| {_THIS} | speed | fast@other | 4 | 4 | 4 | 2 | things/s | 2× |" in text
    assert f"| {_THIS} | speed | slow@{own} (baseline) | 2 |" in text
    assert f"## other vs {own}" in text
    assert f"| {_THIS} | latency | fast | s | 1 | 1 | 1× |" in text
    # Goals judged per stack; errors keep their stack.
    assert f"| {own} | fast ≥ 1.5× slow | 2× | PASS |" in text
    assert "| other | fast ≥ 1.5× slow | 2× | PASS |" in text
    assert f"{_THIS}/broken@other: RuntimeError" in text
    with open(tmp_path / "out" / "partial.json") as f:
        report = json.load(f)
    assert list(report["machine"]["stacks"]) == [own, "other"]
    assert report["settings"]["stacks"] == [own, "other"]
    (row,) = (
        r for r in report["stack_comparison"] if r["metric"] == "speed" and r["variant"] == "fast"
    )
    assert row["medians"] == {own: 4.0, "other": 4.0} and row["ratios"] == {"other": 1.0}
    assert "other: " in capsys.readouterr().out  # progress lines name the stack


def test_a_bad_python_is_one_error_naming_the_flag_and_the_path(tmp_path):
    # A Python without TensorFlow: this one without its site-packages.
    no_tf = tmp_path / "python-no-tf"
    no_tf.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    no_tf.chmod(0o755)
    missing = tmp_path / "missing" / "python"
    for value, message in (
        (f"2.21={missing}", f"--python 2.21={missing}: {missing} is not an executable file"),
        (f"x={no_tf}", f"--python x={no_tf}: {no_tf} has no TensorFlow"),
        ("x=/bin/false", "--python x=/bin/false: /bin/false is not a Python that can run"),
        (str(no_tf), "--python must be LABEL=PATH"),
    ):
        proc = run_program(["-m", "benchmarks", "--python", value], timeout=60, check_exit=2)
        assert message in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr and len(proc.stderr.splitlines()) <= 5
    argv = ["--python", f"a={sys.executable}", "--python", f"a={sys.executable}"]
    proc = run_program(["-m", "benchmarks", *argv], timeout=60, check_exit=2)
    assert "the label 'a' is given twice" in proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["estimator", "tfest_kit"])
def test_cold_start_measures_both_variants_on_this_stack(tmp_path, variant):
    # TensorFlow 2.16+ has no tf.estimator: the estimator variant raised AttributeError on 2.21;
    # the fallback's two steps per run (iterations_per_loop) were taken for a lost step.
    argv = ["-m", "benchmarks._harness", "--worker", f"cold_start:{variant}"]
    argv += ["--workdir", str(tmp_path), "--quick", "--t0", "0"]
    (record,) = _harness._records(run_program(argv, timeout=120).stdout)
    assert "error" not in record, record
    assert record["metrics"]["train_return_s"] >= 0


def test_benchmarks_use_keras_2_through_tf_keras_never_bare_keras():
    # On the 2.21 stack a bare `import keras` is Keras 3, which Estimator cannot use.
    import ast
    import pathlib

    for path in pathlib.Path(_harness.ROOT, "benchmarks").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]  # `from tensorflow import keras` is tf.keras
            else:
                continue
            assert not [m for m in modules if m.split(".")[0] == "keras"], (path, modules)
