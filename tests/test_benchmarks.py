"""The benchmark harness on a trivial case (``tests/trivial_benchmark_case.py``, whose benchmark
children start without TensorFlow).

Times are never asserted on; the tests check the machinery: fresh processes, interleaving,
aggregation, ratios, the Markdown/JSON report, goals and error reporting. The last test runs
the step profiler (``benchmarks.profile_step``) on the real BERT-tiny model.
"""

from __future__ import annotations

import json
import os

import pytest

from benchmarks import __main__ as bench_main
from benchmarks import _harness
from tests import trivial_benchmark_case as trivial_case
from tests.conftest import run_program
from tfest_kit import _run_config
from tfest_kit._tf import TF_VERSION

_THIS = trivial_case.__name__
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
    # Read from the package metadata (the parent never imports TensorFlow): the one that runs.
    assert machine["cores"] == os.cpu_count() and machine["tensorflow"] == TF_VERSION
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
        [("cold_start", ["tfest_kit"]), ("mlp", list(mlp.variants))]
    ]
    full = _harness._plan(cases, quick=False)
    assert len(full) == len(mlp.variants) + len(cold.variants)
    assert all(len(jobs) == 1 and len(jobs[0][1]) == 1 for jobs in full)
    # Over len(variants) repetitions every variant runs first once.
    firsts = [_harness._plan(cases, quick=False, repeat=r)[0][0][1][0] for r in range(6)]
    assert sorted(firsts[: len(mlp.variants)]) == sorted(mlp.variants)


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
    _run_config._bfloat16_problem() is not None,
    reason="oneDNN off or no bfloat16 instructions on this CPU",
)
def test_profile_step_and_the_training_case_run_bfloat16():
    from benchmarks import profile_step
    from benchmarks.cases import _bert_tiny, _training, bert_tiny

    small = {"warmup": 1, "timed": 2, "traced": 1, "batch": 8, "hidden": 64}
    float32 = profile_step.profile(**small)
    bfloat16 = profile_step.profile(**small, mixed_precision="bfloat16")
    # The rewrite casts into and out of bfloat16 around the matmuls.
    assert bfloat16["op_count"].get("Cast", 0) > float32["op_count"].get("Cast", 0) + 10
    assert "tfest_kit_bf16" in bert_tiny.CASE.variants
    rate = _training.train_throughput(
        "tfest_kit_bf16",
        logits_fn=lambda features: _bert_tiny.encoder_logits(features["input_ids"]),
        keras_fn=_bert_tiny.keras_model,
        features_fn=bert_tiny._features,
        batch_size=4,
        warmup=2,
        steps=3,
    )
    assert rate > 0
