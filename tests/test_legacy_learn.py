"""``tf.contrib.learn``'s Experiment, learn_runner and RunConfig under the legacy runner.

The programs run tests/legacy_scripts/learn_experiment.py (a 2017-style Estimator program)
unchanged through ``python -m tfest_kit.legacy``; the rest checks the ports' arguments and
errors in this process, against TF 1.15's behaviour.
"""

from __future__ import annotations

import json
import os
import re

import pytest

from tests.conftest import ROOT, run_program
from tfest_kit._tf import estimator as tf_estimator
from tfest_kit.legacy._namespace import build_namespace
from tfest_kit.legacy._shim import Report
from tfest_kit.legacy.contrib import _learn_experiment, learn
from tfest_kit.legacy.contrib.training import HParams

SCRIPT = ROOT / "tests" / "legacy_scripts" / "learn_experiment.py"
_LOSS_LINE = re.compile(r"loss = ([0-9.e+-]+), step = (\d+)")
_VALIDATION = re.compile(r"Validation \(step (\d+)\): accuracy = [0-9.]+, loss = ([0-9.]+), ")


def _program(model_dir, schedule, variant="plain"):
    command = ["-m", "tfest_kit.legacy", str(SCRIPT), str(model_dir), schedule, variant]
    proc = run_program(command, timeout=240)
    return proc.stdout + proc.stderr, json.loads(proc.stdout.strip().splitlines()[-1])


def test_learn_runner_trains_validates_and_exports_as_tf115(tmp_path):
    output, summary = _program(tmp_path / "model", "train_and_evaluate")
    # min_eval_frequency's ValidationMonitor evaluates the first checkpoint (step 0) once
    # its every-50-steps look comes, as TF 1.15 did, printing the metrics as numpy does.
    validations = _VALIDATION.findall(output)
    assert validations and validations[0][0] == "50", output
    assert re.search(r"Validation \(step 50\): .*loss = 0\.\d{5,8}, global_step = 0\n", output)
    losses = [float(loss) for loss, _ in _LOSS_LINE.findall(output)]
    assert len(losses) >= 2 and losses[-1] < losses[0], output
    metrics = summary["metrics"]
    assert metrics["global_step"] == 200 and metrics["accuracy"] > 0.9
    assert metrics["loss"] < float(validations[0][1])
    # make_export_strategy's export of the final checkpoint, under export/Servo.
    (export,) = summary["exports"]
    assert os.path.dirname(export) == str(tmp_path / "model" / "export" / "Servo")
    assert os.path.isfile(os.path.join(export, "saved_model.pb"))


def test_other_schedules_and_the_output_dir_signature(tmp_path):
    model_dir = tmp_path / "model"
    output, summary = _program(model_dir, "continuous_train_and_eval")
    # train_steps_per_iteration=100 of 200: two rounds of training, evaluation and export.
    assert output.count("Training model for 100 steps") == 2, output
    assert re.search(r"Saving dict for global step 100: accuracy", output), output
    assert summary["metrics"]["global_step"] == 200
    assert len(os.listdir(model_dir / "export" / "Servo")) == 2
    # learn_runner's older experiment_fn(output_dir), on the trained model_dir.
    _, summary = _program(model_dir, "evaluate", "no_hparams")
    assert summary["metrics"]["global_step"] == 200 and summary["metrics"]["accuracy"] > 0.9


def test_a_validation_monitor_stops_training_early(tmp_path):
    output, summary = _program(tmp_path / "model", "train_and_evaluate", "early_stop")
    # Accuracy watched as a metric to minimise: step 10's is the best, 30 steps later it stops.
    assert "Stopping. Best step: 10 with accuracy = " in output, output
    assert summary["early_stopped"] == [True] and summary["best_step"] == [10]
    assert summary["metrics"]["global_step"] == 40


def test_the_driver_is_served_where_tf115_had_it():
    learn_ns = build_namespace(Report()).contrib.learn
    assert learn_ns.Experiment is _learn_experiment.Experiment
    assert learn_ns.learn_runner.run is _learn_experiment.run
    assert learn_ns.python.learn.learn_runner is learn_ns.learn_runner
    assert learn_ns.RunConfig is learn.RunConfig
    assert learn_ns.monitors.ValidationMonitor is learn.ValidationMonitor
    for utils in (learn_ns.utils, learn_ns.python.learn.utils):  # cloudml-samples' import
        export_utils = utils.saved_model_export_utils
        assert export_utils.make_export_strategy is learn.make_export_strategy
    with pytest.raises(AttributeError, match=r"monitors\.CaptureVariable is not provided"):
        _ = learn_ns.monitors.CaptureVariable
    # tensorflow/models' cifar10_estimator overrides uid() reading TF 1.15's private list.
    run_config = learn_ns.python.learn.run_config
    assert run_config is learn_ns.python.learn.estimators.run_config
    assert run_config.RunConfig is learn.RunConfig and "tf_random_seed" in (
        run_config._DEFAULT_UID_WHITE_LIST
    )
    assert run_config.Environment.CLOUD == "cloud" and run_config.TaskType.PS == "ps"
    with pytest.raises(AttributeError, match=r"estimators\.DNNClassifier is not provided"):
        learn_ns.python.learn.estimators.DNNClassifier()


def test_run_config_takes_learns_arguments(tmp_path, monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    config = learn.RunConfig(model_dir=str(tmp_path), num_cores=3, gpu_memory_fraction=0.5)
    assert isinstance(config, tf_estimator.RunConfig)
    assert config.save_checkpoints_secs == 600 and config.save_checkpoints_steps is None
    assert config.tf_config.intra_op_parallelism_threads == 3
    assert config.tf_config.gpu_options.per_process_gpu_memory_fraction == 0.5
    assert config.session_config is None and config.environment == "local"
    by_steps = learn.RunConfig(model_dir=str(tmp_path), save_checkpoints_steps=10)
    assert (by_steps.save_checkpoints_secs, by_steps.save_checkpoints_steps) == (None, 10)
    # uid() leaves out what a user may change (the seed, intervals), not the model_dir.
    seeded = learn.RunConfig(model_dir=str(tmp_path), tf_random_seed=7)
    assert seeded.uid() == by_steps.uid()
    assert learn.RunConfig(model_dir=str(tmp_path / "other")).uid() != by_steps.uid()
    monkeypatch.setenv("TF_CONFIG", json.dumps({"task": {"type": "worker", "index": 2}}))
    assert learn.RunConfig.get_task_id() == 2


def _experiment_fn(run_config, hparams):
    estimator = tf_estimator.Estimator(lambda features, labels, mode: None, config=run_config)
    return _learn_experiment.Experiment(estimator, None, None)


def test_learn_runner_says_what_is_wrong_before_training(tmp_path):
    run, config = _learn_experiment.run, learn.RunConfig(model_dir=str(tmp_path))
    with pytest.raises(ValueError, match=r"non-existent task trian.*train_and_evaluate"):
        run(_experiment_fn, run_config=config, schedule="trian", hparams=HParams(a=1))
    with pytest.raises(TypeError, match="non-callable member estimator"):
        run(_experiment_fn, run_config=config, schedule="estimator")
    with pytest.raises(ValueError, match="Cannot provide both"):
        run(_experiment_fn, output_dir=str(tmp_path), run_config=config)
    with pytest.raises(ValueError, match="must be `tf.contrib.learn.RunConfig`"):
        run(_experiment_fn, run_config=tf_estimator.RunConfig(model_dir=str(tmp_path)))
    with pytest.raises(ValueError, match="`hparams` must be `HParams`"):
        run(_experiment_fn, run_config=config, hparams={"a": 1})
    with pytest.raises(TypeError, match="did not return an Experiment"):
        run(lambda run_config, hparams: None, run_config=config)
    with pytest.raises(ValueError, match="Must specify a model directory"):
        run(_experiment_fn, run_config=learn.RunConfig())

    def own_config(run_config, hparams):  # the Estimator is not given run_config
        return _experiment_fn(tf_estimator.RunConfig(model_dir=run_config.model_dir), hparams)

    with pytest.raises(RuntimeError, match="Pass `run_config` argument of the `experiment_fn`"):
        run(own_config, run_config=config)
    assert os.listdir(tmp_path) == []


def test_experiment_and_monitor_refuse_what_only_learns_estimators_took(tmp_path):
    estimator = tf_estimator.Estimator(lambda features, labels, mode: None, str(tmp_path))
    experiment = _learn_experiment.Experiment
    with pytest.raises(ValueError, match="must be a tf.estimator.Estimator, got dict"):
        experiment({}, None, None)
    with pytest.raises(ValueError, match="`eval_metrics` must be `None`"):
        experiment(estimator, None, None, eval_metrics={"a": None})
    with pytest.raises(ValueError, match="`export_strategies` must be an ExportStrategy"):
        experiment(estimator, None, None, export_strategies=["Servo"])
    with pytest.raises(ValueError, match="x, y, batch_size, metrics"):
        learn.ValidationMonitor(x=[1.0], input_fn=lambda: None)
    with pytest.raises(ValueError, match="input_fn"):
        learn.ValidationMonitor()
    strategy = learn.ExportStrategy("mine", lambda estimator, path, eval_result: path)
    with pytest.raises(ValueError, match="must also accept checkpoint_path"):
        strategy.export(estimator, "path")
