"""The bad-input catalogue: every public entry point, fed every wrong input we could think of.

One table-driven test per entry point. Each case calls tfest_kit (or the official Estimator
through it) with one wrong input and asserts the error type and that the message names the
problem: the argument and/or the offending value. Nothing should surface as a bare traceback
from deep inside TensorFlow where tfest_kit could have said what is wrong first.

Cases get a ``ctx`` with ready-made data files, a tiny trained model_dir and its export (built
once per module), and run inside a fresh ``tf.Graph``.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import types

import numpy as np
import pytest

from tfest_kit import (
    TfestKitError,
    cluster,
    hooks,
    inputs,
    logs,
    metrics,
    model_fn,
    run_config,
    serving,
    tpu,
    training,
)
from tfest_kit._tf import estimator, tf, tf2
from tfest_kit.legacy import layer_norm
from tfest_kit.legacy import run as legacy_run
from tfest_kit.legacy._namespace import build_namespace
from tfest_kit.legacy._shim import Report

MODES = estimator.ModeKeys
X = np.random.RandomState(0).normal(size=(16, 4)).astype(np.float32)
Y = (X[:, 0] > 0).astype(np.int32)


def network(features, mode, params):
    return tf.layers.dense(features["x"], 2, name="dense")


def _good_input_fn(params=None):
    return inputs.from_arrays({"x": X}, Y, batch_size=8, num_epochs=None)(params)


def _tpu_style_input_fn(params):
    return inputs.from_arrays({"x": X}, Y, batch_size=params["batch_size"], num_epochs=None)()


def _empty_input_fn():
    return tf2.data.Dataset.from_tensor_slices(({"x": X[:0]}, Y[:0])).batch(4)


def _first_graph_build(model_fn_):
    """Calls a built model_fn as Estimator's first graph build does (TRAIN, no model_dir)."""
    features, labels = {"x": tf.constant(X)}, tf.constant(Y)
    tf.train.get_or_create_global_step()
    return model_fn_(features, labels, MODES.TRAIN, {}, None)


def _checkpoint_under_bert(c):
    with tf.Graph().as_default():
        kernel = tf.get_variable("bert/dense/kernel", [4, 2])
        tf.get_variable("bert/dense/kernel/Adam", [4, 2])  # a slot: not shown
        with tf.Session() as session:
            session.run(tf.global_variables_initializer())
            return tf.train.Saver([kernel]).save(session, os.path.join(c.root, "bert", "ckpt"))


def _file(c, name, content):
    path = os.path.join(c.root, name)
    with open(path, "wb" if isinstance(content, bytes) else "w") as f:
        f.write(content)
    return path


def _receiver():
    return serving.raw_receiver({"x": (tf.float32, [4])})


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    """Data files, one tiny trained classifier and its export, shared by every case."""
    root = tmp_path_factory.mktemp("bad_inputs")
    csv = root / "data.csv"
    csv.write_text("a,b,label\n1,2.5,0\n3,4.5,1\n")
    record = str(root / "data.tfrecord")
    inputs.write_tfrecord([{"a": 1.0, "label": 0}, {"a": 2.0, "label": 1}], record)

    model_dir = str(root / "trained")
    est = estimator.Estimator(model_fn.classifier(network, 2), model_dir=model_dir)
    est.train(_good_input_fn, steps=2)
    export = est.export_saved_model(str(root / "export"), _receiver()).decode()
    corrupt_pb = str(root / "corrupt_pb")
    shutil.copytree(export, corrupt_pb)
    (root / "corrupt_pb" / "saved_model.pb").write_bytes(b"not a protocol buffer")
    corrupt_vars = str(root / "corrupt_vars")
    shutil.copytree(export, corrupt_vars)
    (root / "corrupt_vars" / "variables" / "variables.index").write_bytes(b"truncated")
    a_file = root / "a_file"
    a_file.write_text("not a directory")
    (root / "empty_dir").mkdir()
    return types.SimpleNamespace(
        root=str(root),
        csv=str(csv),
        record=record,
        model_dir=model_dir,
        estimator=est,
        export=export,
        predictor=serving.Predictor(export),
        corrupt_pb=corrupt_pb,
        corrupt_vars=corrupt_vars,
        a_file=str(a_file),
        empty_dir=str(root / "empty_dir"),
    )


def _check(ctx, call, error, pattern):
    with tf.Graph().as_default(), pytest.raises(error) as info:
        call(ctx)
    message = str(info.value)
    assert message, f"{type(info.value).__name__} with an empty message"
    assert re.search(pattern, message, re.S), f"{pattern!r} not in: {message}"
    return info.value


def case(name, call, error, pattern):
    return pytest.param(call, error, pattern, id=name)


# ------------------------------------------------------------------------ model_fn builders


def _call_model_fn(fn, features, labels, mode=MODES.TRAIN):
    tf.train.get_or_create_global_step()
    return fn(features, labels, mode, {})


def _one_output(features, mode, params):
    return tf.layers.dense(features["x"], 1, name="dense")


def _features():
    return {"x": tf.constant(X)}


MODEL_FN_CASES = [
    case("num_classes=1", lambda c: model_fn.classifier(network, 1), ValueError, r"num_classes.*1"),
    case(
        "num_classes=str", lambda c: model_fn.classifier(network, "2"), ValueError, r"num_classes"
    ),
    case(
        "unknown optimizer",
        lambda c: model_fn.classifier(network, 2, optimizer="adamax"),
        ValueError,
        r"`optimizer`.*'adamax'",
    ),
    case(
        "unknown metric",
        lambda c: model_fn.classifier(network, 2, metrics=("accuracy", "f2")),
        ValueError,
        r"`metrics`.*'f2'",
    ),
    case(
        "auc with 3 classes",
        lambda c: model_fn.classifier(network, 3, metrics=("auc",)),
        ValueError,
        r"`metrics`.*'auc'",
    ),
    case(
        "unknown regressor metric",
        lambda c: model_fn.regressor(network, metrics=("accuracy",)),
        ValueError,
        r"`metrics`.*'accuracy'",
    ),
    case(
        "negative learning rate",
        lambda c: model_fn.classifier(network, 2, learning_rate=-0.1),
        ValueError,
        r"`learning_rate`.*-0.1",
    ),
    case(
        "negative warmup",
        lambda c: model_fn.classifier(network, 2, warmup_steps=-1),
        ValueError,
        r"`warmup_steps`.*-1",
    ),
    case(
        "schedule with optimizer instance",
        lambda c: model_fn.classifier(
            network, 2, optimizer=tf.train.AdamOptimizer(0.1), warmup_steps=10
        ),
        ValueError,
        r"`warmup_steps`.*Optimizer instance",
    ),
    case(
        "learning_rate 0",
        lambda c: model_fn.classifier(network, 2, learning_rate=0),
        ValueError,
        r"`learning_rate` must be > 0",
    ),
    case(
        "negative clip_norm",  # clipped nothing: -1 * min(1 / norm, -1) is 1
        lambda c: model_fn.classifier(network, 2, clip_norm=-1.0),
        ValueError,
        r"`clip_norm`.*-1",
    ),
    case(
        "clip_norm as text",  # failed in train(): "x and y must have the same dtype"
        lambda c: model_fn.regressor(network, clip_norm="1.0"),
        ValueError,
        r"`clip_norm`.*'1.0'",
    ),
    case(
        "decay before the warm-up ends",  # the rate fell to 0 at step 10
        lambda c: model_fn.classifier(network, 2, warmup_steps=10, decay_steps=5),
        ValueError,
        r"`decay_steps` \(5\).*`warmup_steps` \(10\)",
    ),
    case(
        "init_checkpoint of other variable names",  # trained from scratch, exit 0
        lambda c: _first_graph_build(
            model_fn.classifier(network, 2, init_checkpoint=_checkpoint_under_bert(c))
        ),
        ValueError,
        r"none of this model's variables.*\['dense/bias', 'dense/kernel'\].*'bert/dense/kernel'",
    ),
    case(
        "missing init_checkpoint",
        lambda c: _first_graph_build(
            model_fn.classifier(network, 2, init_checkpoint=c.root + "/nope/model.ckpt-1")
        ),
        ValueError,
        r"`init_checkpoint` does not exist.*nope",
    ),
    case(
        "init_checkpoint dir without checkpoint",
        lambda c: _first_graph_build(model_fn.classifier(network, 2, init_checkpoint=c.empty_dir)),
        ValueError,
        r"`init_checkpoint` is a directory without a checkpoint",
    ),
    case(
        "init_checkpoint not a checkpoint",
        lambda c: _first_graph_build(model_fn.classifier(network, 2, init_checkpoint=c.a_file)),
        ValueError,
        r"`init_checkpoint` could not be read",
    ),
    # When the model_fn runs (graph construction only).
    case(
        "float labels",
        lambda c: _call_model_fn(model_fn.classifier(network, 2), _features(), Y * 1.0),
        ValueError,
        r"`labels` must be integer class ids.*float",
    ),
    case(
        "string labels",
        lambda c: _call_model_fn(model_fn.classifier(network, 2), _features(), ["a"] * 16),
        ValueError,
        r"`labels` must be integer.*string",
    ),
    case(
        "one-hot labels",  # the head: "check your n_classes argument"
        lambda c: _call_model_fn(model_fn.classifier(network, 2), _features(), np.eye(2)[Y]),
        ValueError,
        r"one class id per example.*not one-hot.*tf\.argmax.*\(16, 2\)",
    ),
    case(
        "regressor with string labels",  # "Cast string to float is not supported", in train()
        lambda c: _call_model_fn(model_fn.regressor(_one_output), _features(), ["a"] * 16),
        ValueError,
        r"`labels` must be numbers.*string",
    ),
    case(
        "regressor network returning [batch]",  # "Squeeze:0 must have rank at least 2"
        lambda c: _call_model_fn(
            model_fn.regressor(lambda f, m, p: _one_output(f, m, p)[:, 0]), _features(), Y
        ),
        ValueError,
        r"network_fn must return \[batch, 1\]. Got: shape \(16,\)",
    ),
    case(
        "regressor network returning [batch, 2]",
        lambda c: _call_model_fn(model_fn.regressor(network), _features(), Y),
        ValueError,
        r"network_fn must return \[batch, 1\]. Got: shape \(16, 2\)",
    ),
    case(
        "weights of two columns",  # an op error at run time, naming no weight_key
        lambda c: _call_model_fn(
            model_fn.classifier(network, 2, weight_key="w"),
            {**_features(), "w": tf.ones([16, 2])},
            Y,
        ),
        ValueError,
        r"`weight_key` 'w' must be one number per example. Got: float32 \(16, 2\)",
    ),
    case(
        "weights as text",
        lambda c: _call_model_fn(
            model_fn.regressor(_one_output, weight_key="w"), {**_features(), "w": ["1"] * 16}, Y
        ),
        ValueError,
        r"`weight_key` 'w' must be one number per example. Got: string",
    ),
    case(
        "wrong feature key",
        lambda c: _call_model_fn(model_fn.classifier(network, 2), {"z": tf.constant(X)}, Y),
        ValueError,
        r"feature 'x'.*\['z'\]",
    ),
]


@pytest.mark.parametrize("call, error, pattern", MODEL_FN_CASES)
def test_model_fn(ctx, call, error, pattern):
    _check(ctx, call, error, pattern)


def test_init_checkpoint_may_be_a_saved_model(ctx):
    # It said "a directory without a checkpoint": its variables/variables is one.
    with tf.Graph().as_default():
        _first_graph_build(model_fn.classifier(network, 2, init_checkpoint=ctx.export))
        with tf.Session() as session:
            session.run(tf.global_variables_initializer())
            kernel = session.run(tf.global_variables("dense/kernel")[0])
    np.testing.assert_allclose(kernel, tf.train.load_variable(ctx.model_dir, "dense/kernel"))


# ---------------------------------------------------------------------------------- metrics


def _labels():
    return tf.constant([0, 1, 2])


METRICS_CASES = [
    case(
        "num_classes=1",
        lambda c: metrics.f1(_labels(), _labels(), num_classes=1),
        ValueError,
        r"`num_classes`.*1",
    ),
    case(
        "unknown average",
        lambda c: metrics.precision(_labels(), _labels(), 3, average="samples"),
        ValueError,
        r"`average`.*'samples'",
    ),
    case(
        "labels [batch, 2]",
        lambda c: metrics.recall(tf.zeros([3, 2]), _labels(), 3),
        ValueError,
        r"`labels` must have shape.*\[3, 2\]",
    ),
    case(
        "predictions rank 3",
        lambda c: metrics.f1(_labels(), tf.zeros([3, 1, 1]), 3),
        ValueError,
        r"`predictions` must have shape.*\[3, 1, 1\]",
    ),
]


@pytest.mark.parametrize("call, error, pattern", METRICS_CASES)
def test_metrics(ctx, call, error, pattern):
    _check(ctx, call, error, pattern)


# ------------------------------------------------------------------------------ TPUEstimator


def _tpu_model_fn(features, labels, mode, params):
    return model_fn.classifier(network, 2, tpu_spec=True)(features, labels, mode, params)


def _tpu(c, model_fn_=_tpu_model_fn, sub="tpu", **kw):
    kw.setdefault("use_tpu", False)
    return tpu.TPUEstimator(model_fn_, model_dir=os.path.join(c.root, sub), **kw)


def _spec_without_train_op(features, labels, mode, params):
    logits = tf.layers.dense(features["x"], 2)
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    return tpu.TPUEstimatorSpec(mode, loss=loss)


def _reads_batch_size(features, labels, mode, params):
    tf.reshape(features["x"], [params["batch_size"], 4])  # a bare KeyError when it is unset
    return _tpu_model_fn(features, labels, mode, params)


def _export_reading_batch_size(c):
    est = _tpu(c, _reads_batch_size, "batch_size_export", train_batch_size=8)
    est.train(_good_input_fn, steps=1)
    est.export_saved_model(os.path.join(c.root, "batch_size_export", "export"), _receiver())


def _spec_without_predictions(features, labels, mode, params):
    return tpu.TPUEstimatorSpec(mode, loss=tf.reduce_mean(tf.layers.dense(features["x"], 1)))


def _returns_dict(features, labels, mode, params):
    return {"loss": tf.constant(1.0)}


def _model_fn_without_labels(features, mode, params):
    return _tpu_model_fn(features, None, mode, params)


_INT64 = tf.io.FixedLenFeature([], tf.int64)


def _csv_model_fn(features, labels, mode, params):
    def columns(features, mode, params):
        return tf.layers.dense(tf.cast(tf.stack([features["a"], features["x"]], 1), tf.float32), 2)

    return model_fn.classifier(columns, 2, tpu_spec=True)(features, labels, mode, params)


TPU_CASES = [
    case(
        "reserved params key batch_size",
        lambda c: _tpu(c, params={"batch_size": 8}),
        ValueError,
        r"reserved keys.*batch_size",
    ),
    case(
        "reserved params key context",
        lambda c: _tpu(c, params={"context": 1}),
        ValueError,
        r"reserved keys.*context",
    ),
    case(
        "negative train_batch_size",
        lambda c: _tpu(c, train_batch_size=-8),
        ValueError,
        r"`train_batch_size`.*-8",
    ),
    case(
        "zero eval_batch_size",
        lambda c: _tpu(c, eval_batch_size=0),
        ValueError,
        r"`eval_batch_size`.*0",
    ),
    case(
        "float predict_batch_size",
        lambda c: _tpu(c, predict_batch_size=8.0),
        ValueError,
        r"`predict_batch_size`.*8.0",
    ),
    case(
        "bool train_batch_size",
        lambda c: _tpu(c, train_batch_size=True),
        ValueError,
        r"`train_batch_size`.*True",
    ),
    case(
        "model_fn not callable",
        lambda c: tpu.TPUEstimator("model_fn", use_tpu=False),
        ValueError,
        r"`model_fn` must be a callable.*'model_fn'",
    ),
    case(
        "steps=0",
        lambda c: _tpu(c, train_batch_size=8).train(_good_input_fn, steps=0),
        ValueError,
        r"steps > 0.*0",
    ),
    case(
        "TRAIN spec without train_op",
        lambda c: _tpu(c, _spec_without_train_op, "no_op", train_batch_size=8).train(
            _good_input_fn, steps=1
        ),
        ValueError,  # Estimator's "Missing train_op.", alone
        r"model_fn's spec for mode='train': Missing train_op\. TRAIN needs loss and train_op",
    ),
    case(
        "model_fn reads params['batch_size'] without train_batch_size",
        lambda c: _tpu(c, _reads_batch_size, "batch_size").train(_good_input_fn, steps=1),
        ValueError,
        r"model_fn reads params\['batch_size'\], unset for train: pass train_batch_size=",
    ),
    case(
        "model_fn reads params['batch_size'] in an export",  # unset there, as on a TPU
        _export_reading_batch_size,
        ValueError,
        r"model_fn reads params\['batch_size'\], unset in an export.*tf\.shape",
    ),
    case(
        "PREDICT spec without predictions",
        lambda c: next(
            _tpu(c, _spec_without_predictions, "no_predictions", predict_batch_size=8).predict(
                lambda params: inputs.from_arrays({"x": X}, batch_size=8)(params)
            )
        ),
        ValueError,  # Estimator's "Missing predictions.", alone
        r"mode='infer': Missing predictions\. .*PREDICT predictions",
    ),
    case(
        "model_fn returns a dict",
        lambda c: _tpu(c, _returns_dict, "dict", train_batch_size=8).train(_good_input_fn, steps=1),
        ValueError,
        r"EstimatorSpec",
    ),
    case(
        # Estimator returned after 0 steps without a word.
        "train: input ends before the first step",
        lambda c: _tpu(c, sub="empty", train_batch_size=8).train(
            lambda params: _empty_input_fn(), max_steps=5
        ),
        ValueError,
        r"`input_fn` yielded no batch.*0 steps",
    ),
    case(
        # TensorFlow: "Expect 3 fields but have 2 in record".
        "train: CSV row with a field missing past the rows types are inferred from",
        lambda c: _tpu(c, _csv_model_fn, "csv_row", train_batch_size=8).train(
            inputs.from_csv(
                _file(c, "row.csv", "a,x,label\n" + "1,2,0\n" * 110 + "1,2\n"), label_name="label"
            ),
            max_steps=50,
        ),
        tf.errors.InvalidArgumentError,
        r"row\.csv:112: 2 fields.*no field for column 'label'",
    ),
    case(
        # TensorFlow: "corrupted record at 0 (Is this even a TFRecord file?)".
        "train: GZIP TFRecord without compression",
        lambda c: _tpu(c, sub="gzip_tfr", train_batch_size=8).train(
            inputs.from_tfrecord(
                inputs.write_tfrecord(
                    [{"x": X[0], "label": 0}], os.path.join(c.root, "g.tfr"), compression="GZIP"
                ),
                {"x": tf.io.FixedLenFeature([4], tf.float32), "label": _INT64},
                "label",
            ),
            max_steps=5,
        ),
        tf.errors.DataLossError,
        r"g\.tfr: record 0.*compression='GZIP'",
    ),
    case(
        "evaluate without eval_batch_size",  # the input_fn's bare KeyError: 'batch_size'
        lambda c: _tpu(c, sub="no_eval_size", train_batch_size=8).evaluate(
            _tpu_style_input_fn, steps=1
        ),
        ValueError,
        r"params\['batch_size'\], unset for eval: pass eval_batch_size=",
    ),
    case(
        "use_tpu as text",  # "False" (a flag's string) looked for a TPU
        lambda c: _tpu(c, use_tpu="False"),
        ValueError,
        r"`use_tpu` must be True, False or 'auto'. Got: 'False'",
    ),
    case(
        "params as an argparse Namespace",  # "'Namespace' object is not iterable"
        lambda c: _tpu(c, params=types.SimpleNamespace(lr=0.1)),
        TypeError,
        r"`params` must be a dict.*vars\(args\).*namespace\(lr=0\.1\)",
    ),
    case(
        "labels but model_fn takes none",
        lambda c: _tpu(c, _model_fn_without_labels, "no_labels", train_batch_size=8).train(
            _good_input_fn, steps=1
        ),
        ValueError,
        r"does not take labels",
    ),
]


@pytest.mark.parametrize("call, error, pattern", TPU_CASES)
def test_tpu_estimator(ctx, call, error, pattern):
    _check(ctx, call, error, pattern)


# ------------------------------------------------------------- Estimator runs on bad data / dirs


def _other_network(features, mode, params):
    hidden = tf.layers.dense(features["x"], 5, name="hidden")
    return tf.layers.dense(hidden, 2, name="dense")


def _wider_network(features, mode, params):
    return tf.layers.dense(features["x"], 3, name="dense")


def _copy_trained(c, name):
    path = os.path.join(c.root, name)
    if not os.path.isdir(path):
        shutil.copytree(c.model_dir, path)
    return path


def _trained_with_sgd(c):
    model_dir = os.path.join(c.root, "sgd")
    sgd = model_fn.classifier(network, 2, optimizer="sgd")
    estimator.Estimator(sgd, model_dir=model_dir).train(_good_input_fn, steps=1)
    return model_dir


def _estimator(c, net=network, num_classes=2, model_dir=None, sub="est"):
    return estimator.Estimator(
        model_fn.classifier(net, num_classes), model_dir=model_dir or os.path.join(c.root, sub)
    )


RUN_CASES = [
    case(
        "train: wrong feature key",
        lambda c: _estimator(c).train(
            inputs.from_arrays({"z": X}, Y, batch_size=8, num_epochs=None), steps=1
        ),
        ValueError,
        r"feature 'x'.*\['z'\]",
    ),
    case(
        "train: float labels",
        lambda c: _estimator(c).train(inputs.from_arrays({"x": X}, Y * 1.0), steps=1),
        ValueError,
        r"`labels` must be integer.*float32",
    ),
    case(
        "train: steps=0",
        lambda c: _estimator(c).train(_good_input_fn, steps=0),
        ValueError,
        r"steps > 0, given: 0",
    ),
    case(
        "train: max_steps=-1",
        lambda c: _estimator(c).train(_good_input_fn, max_steps=-1),
        ValueError,
        r"max_steps > 0, given: -1",
    ),
    case(
        "evaluate: steps=0",
        lambda c: c.estimator.evaluate(_good_input_fn, steps=0),
        ValueError,
        r"steps > 0, given: 0",
    ),
    case(
        "checkpoint from a model with other variables",
        lambda c: _estimator(c, _other_network, model_dir=_copy_trained(c, "other")).train(
            _good_input_fn, steps=1
        ),
        ValueError,
        r"`model_dir`.*does not fit.*hidden/kernel",
    ),
    case(
        "checkpoint from a model with other shapes",
        lambda c: _estimator(c, _wider_network, 3, model_dir=_copy_trained(c, "wider")).train(
            _good_input_fn, steps=1
        ),
        ValueError,
        r"`model_dir`.*does not fit.*dense/kernel.*\[4, 2\].*\[4, 3\]",
    ),
    case(
        "evaluate: checkpoint_path of a model with other variables",
        lambda c: _estimator(c, _other_network, sub="no_checkpoint").evaluate(
            _good_input_fn, steps=1, checkpoint_path=tf.train.latest_checkpoint(c.model_dir)
        ),
        ValueError,
        r"model.ckpt-2.*checkpoint_path.*does not fit.*hidden/kernel",
    ),
    case(
        "export: checkpoint_path of a model with other variables",
        lambda c: _estimator(c, _other_network, sub="no_checkpoint").export_saved_model(
            os.path.join(c.root, "other_export"),
            _receiver(),
            checkpoint_path=tf.train.latest_checkpoint(c.model_dir),
        ),
        ValueError,
        r"checkpoint_path.*does not fit.*hidden/kernel",
    ),
    case(
        "export: a model_dir of a wider model",
        lambda c: _estimator(
            c, _wider_network, 3, model_dir=_copy_trained(c, "wider_export")
        ).export_saved_model(os.path.join(c.root, "wider_export_out"), _receiver()),
        ValueError,
        r"`model_dir`.*does not fit.*dense/kernel.*\[4, 2\].*\[4, 3\]",
    ),
    case(
        # Checked where Estimator restores it: the saver is handed the path.
        "predict: checkpoint_path of a model with other variables",
        lambda c: list(
            _estimator(c, _other_network, sub="no_checkpoint").predict(
                inputs.from_arrays({"x": X[:3]}),
                checkpoint_path=tf.train.latest_checkpoint(c.model_dir),
            )
        ),
        ValueError,
        r"checkpoint_path.*does not fit.*hidden/kernel",
    ),
    case(
        # Estimator's own message was "Key beta1_power not found in checkpoint".
        "checkpoint trained with another optimizer",
        lambda c: _estimator(c, model_dir=_trained_with_sgd(c)).train(_good_input_fn, steps=1),
        ValueError,
        r"another optimizer.*dense/kernel/Adam",
    ),
    case(
        # The same model given fewer feature columns: the checkpoint is not at fault.
        "evaluate: features narrower than in training",
        lambda c: c.estimator.evaluate(inputs.from_arrays({"x": X[:, :3]}, Y, batch_size=8)),
        ValueError,
        r"does not fit.*features.*input_fn.*not changed",
    ),
    case(
        "export: receiver without the network's feature",
        lambda c: c.estimator.export_saved_model(
            os.path.join(c.root, "bad_export"), serving.raw_receiver({"z": (tf.float32, [4])})
        ),
        ValueError,
        r"feature 'x'.*\['z'\]",
    ),
    case(
        "export: no checkpoint",
        lambda c: _estimator(c, sub="untrained").export_saved_model(
            os.path.join(c.root, "untrained_export"), _receiver()
        ),
        ValueError,
        r"find trained model",
    ),
]


@pytest.mark.parametrize("call, error, pattern", RUN_CASES)
def test_estimator_runs(ctx, call, error, pattern):
    _check(ctx, call, error, pattern)


def test_a_checkpoint_path_is_checked_instead_of_model_dirs_latest(ctx, tmp_path):
    # model_dir holds another model's checkpoint; evaluate / predict / export restore the
    # checkpoint_path given, which fits. The check used to read model_dir's and refuse all three.
    other = str(tmp_path / "other")
    _estimator(ctx, _other_network, model_dir=other).train(_good_input_fn, steps=1)
    est = _estimator(ctx, model_dir=other)
    checkpoint = tf.train.latest_checkpoint(ctx.model_dir)
    in_order = inputs.from_arrays({"x": X}, Y, batch_size=8, shuffle=False)
    expected = ctx.estimator.evaluate(in_order)
    assert est.evaluate(in_order, checkpoint_path=checkpoint) == pytest.approx(expected)
    rows = est.predict(lambda: inputs.from_arrays({"x": X[:3]})(), checkpoint_path=checkpoint)
    assert len(list(rows)) == 3
    export = est.export_saved_model(
        str(tmp_path / "export"), _receiver(), checkpoint_path=checkpoint
    )
    assert os.path.exists(os.path.join(export.decode(), "saved_model.pb"))


# ------------------------------------------------------------------------ train_and_evaluate


def _tae(c, est=None, train_fn=_good_input_fn, eval_fn=None, **kw):
    kw.setdefault("max_steps", 3)
    kw.setdefault("throttle_secs", 0)
    eval_fn = eval_fn or inputs.from_arrays({"x": X}, Y, shuffle=False)
    return training.train_and_evaluate(est or _estimator(c, sub="tae"), train_fn, eval_fn, **kw)


TRAINING_CASES = [
    case(
        "estimator is a string",
        lambda c: training.train_and_evaluate("est", _good_input_fn, _good_input_fn, max_steps=1),
        TypeError,
        r"`estimator`.*'est'",
    ),
    case(
        "train_input_fn is a dataset",
        lambda c: _tae(c, train_fn=_empty_input_fn()),
        TypeError,
        r"`input_fn` must be callable",
    ),
    case("max_steps=0", lambda c: _tae(c, max_steps=0), ValueError, r"max_steps > 0.*0"),
    case("eval_steps=-1", lambda c: _tae(c, eval_steps=-1), ValueError, r"steps > 0.*-1"),
    case(
        "negative throttle_secs",
        lambda c: _tae(c, throttle_secs=-5),
        ValueError,
        r"throttle_secs >= 0.*-5",
    ),
    case(
        "hook of the wrong type",
        lambda c: _tae(c, hooks=["progress"]),
        TypeError,
        r"SessionRunHook.*progress",
    ),
    case(
        "exporter of the wrong type",
        lambda c: _tae(c, exporters=[_receiver()]),
        TypeError,
        r"Exporter",
    ),
    case(
        "empty training set",
        lambda c: _tae(c, train_fn=_empty_input_fn),
        ValueError,
        r"`train_input_fn`.*no batch",
    ),
    case(
        "empty evaluation set",
        lambda c: _tae(c, _estimator(c, sub="tae_empty_eval"), eval_fn=_empty_input_fn),
        ValueError,
        r"`eval_input_fn`.*no batch",
    ),
]


@pytest.mark.parametrize("call, error, pattern", TRAINING_CASES)
def test_train_and_evaluate(ctx, call, error, pattern):
    _check(ctx, call, error, pattern)


# -------------------------------------------------------------------------------------- hooks


HOOK_CASES = [
    case(
        "ProgressHook every_n_steps=0",
        lambda c: hooks.ProgressHook(every_n_steps=0),
        ValueError,
        r"`every_n_steps`.*0",
    ),
    case(
        "ProgressHook negative total_steps",
        lambda c: hooks.ProgressHook(total_steps=-10),
        ValueError,
        r"`total_steps`.*-10",
    ),
    case(
        "ProgressHook batch_size float",
        lambda c: hooks.ProgressHook(batch_size=3.5),
        ValueError,
        r"`batch_size`.*3.5",
    ),
    case(
        "early_stopping without estimator",
        lambda c: hooks.early_stopping("est", patience_steps=10),
        TypeError,
        r"`estimator`.*str",
    ),
    case(
        "early_stopping patience 0",
        lambda c: hooks.early_stopping(c.estimator, patience_steps=0),
        ValueError,
        r"`patience_steps`.*0",
    ),
    case(
        "early_stopping bad mode",
        lambda c: hooks.early_stopping(c.estimator, mode="lowest", patience_steps=10),
        ValueError,
        r"`mode`.*'lowest'",
    ),
    case(
        "early_stopping negative min_delta",
        lambda c: hooks.early_stopping(c.estimator, min_delta=-0.1, patience_steps=10),
        ValueError,
        r"`min_delta`.*-0.1",
    ),
    case(
        "early_stopping empty monitor",
        lambda c: hooks.early_stopping(c.estimator, "", patience_steps=10),
        ValueError,
        r"`monitor`",
    ),
    case(
        "early_stopping no interval",
        lambda c: hooks.early_stopping(c.estimator, patience_steps=10, run_every_secs=None),
        ValueError,
        r"`run_every_secs` must be .*run_every_steps",
    ),
    case(
        "early_stopping run_every_steps=0",
        lambda c: hooks.early_stopping(c.estimator, patience_steps=10, run_every_steps=0),
        ValueError,
        r"`run_every_steps`.*0",
    ),
    case(
        "early_stopping unknown metric",
        lambda c: _train_with_early_stopping(c, "accuracy_top9"),
        ValueError,
        r"'accuracy_top9' is not among the eval metrics.*Available: \[.*'loss'",
    ),
    case(
        "PreemptionHook unknown signal",
        lambda c: hooks.PreemptionHook(signals=[9999]),
        ValueError,
        r"9999",
    ),
]


def _train_with_early_stopping(c, monitor):
    est = _estimator(c, sub=f"early_{monitor}")
    # The shared estimator's eval results, this one's training.
    hook = hooks.early_stopping(c.estimator, monitor, patience_steps=1, run_every_steps=1)
    est.train(_good_input_fn, steps=2, hooks=[hook])


def _evaluated(ctx):
    """The shared estimator with one evaluation written, so eval metrics exist."""
    if not os.path.isdir(ctx.estimator.eval_dir()) or not os.listdir(ctx.estimator.eval_dir()):
        ctx.estimator.evaluate(inputs.from_arrays({"x": X}, Y, shuffle=False))


@pytest.mark.parametrize("call, error, pattern", HOOK_CASES)
def test_hooks(ctx, call, error, pattern):
    _evaluated(ctx)
    _check(ctx, call, error, pattern)


# --------------------------------------------------------------------------------- serving


SERVING_CASES = [
    case("raw_receiver empty spec", lambda c: serving.raw_receiver({}), TypeError, r"`spec`"),
    case(
        "raw_receiver scalar value",
        lambda c: serving.raw_receiver({"x": 3.0}),
        TypeError,
        r"`spec\['x'\]`.*3.0",
    ),
    case(
        "bert_receiver max_seq_length=0",
        lambda c: serving.bert_receiver(0),
        ValueError,
        r"`max_seq_length`.*0",
    ),
    case(
        "image_bytes_receiver bad size",
        lambda c: serving.image_bytes_receiver((160, 160, 3)),
        ValueError,
        r"`image_size`.*\(160, 160, 3\)",
    ),
    case(
        "best_exporter bad mode",
        lambda c: serving.best_exporter(_receiver(), mode="best"),
        ValueError,
        r"`mode`.*'best'",
    ),
    case(
        "best_exporter given the receiver's builder",  # failed after the first evaluation
        lambda c: serving.best_exporter(serving.raw_receiver, "accuracy"),
        TypeError,
        r"`serving_input_receiver_fn` must be a function without arguments.*raw_receiver",
    ),
    case(
        "best_exporter given a spec",
        lambda c: serving.best_exporter({"x": (tf.float32, [4])}, "accuracy"),
        TypeError,
        r"`serving_input_receiver_fn`.*\{'x'",
    ),
    case(
        "best_exporter exports_to_keep=0",
        lambda c: serving.best_exporter(_receiver(), exports_to_keep=0),
        ValueError,
        r"`exports_to_keep`.*0",
    ),
    case(
        "best_exporter monitor not evaluated",
        lambda c: serving.best_exporter(_receiver(), monitor="auc").export(
            c.estimator, os.path.join(c.root, "best"), None, {"loss": 1.0}, False
        ),
        ValueError,
        r"monitor 'auc' is not in the evaluation result.*\['loss'\]",
    ),
    case(
        "latest_export of a missing dir",
        lambda c: serving.latest_export(os.path.join(c.root, "missing")),
        serving.ExportNotFoundError,
        r"No complete export.*missing",
    ),
    case(
        "latest_export of an empty dir",
        lambda c: serving.latest_export(c.empty_dir),
        serving.ExportNotFoundError,
        r"No complete export.*export_saved_model",
    ),
    case(
        "export_and_check sample with wrong key",
        lambda c: serving.export_and_check(
            c.estimator, _receiver(), {"y": X}, os.path.join(c.root, "checked")
        ),
        serving.PredictorInputError,
        r"missing: \['x'\], unknown: \['y'\]",
    ),
]


@pytest.mark.parametrize("call, error, pattern", SERVING_CASES)
def test_serving(ctx, call, error, pattern):
    _check(ctx, call, error, pattern)


PREDICTOR_CASES = [
    case(
        "unknown input name",
        lambda c: c.predictor({"z": X}),
        serving.PredictorInputError,
        r"inputs \[x: float32 \[None, 4\]\].*missing: \['x'\], unknown: \['z'\]",
    ),
    case(
        "extra input name",
        lambda c: c.predictor({"x": X, "extra": X}),
        serving.PredictorInputError,
        r"unknown: \['extra'\]",
    ),
    case(
        "strings for a float input",
        lambda c: c.predictor({"x": [["a", "b", "c", "d"]]}),
        serving.PredictorInputError,
        r"Input 'x' has dtype <U1.*float32",
    ),
    case(
        "ragged rows",
        lambda c: c.predictor({"x": [[1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0]]}),
        serving.PredictorInputError,
        r"Input 'x' is ragged.*x: float32 \[None, 4\]",
    ),
    case(
        "wrong width",
        lambda c: c.predictor({"x": X[:, :3]}),
        serving.PredictorInputError,
        r"Input 'x' has shape \[16, 3\].*\[None, 4\]",
    ),
    case(
        "no batch dimension",
        lambda c: c.predictor({"x": X[0]}),
        serving.PredictorInputError,
        r"Input 'x' has shape \[4\]",
    ),
    case(
        "not a dict",
        lambda c: c.predictor(X),
        TypeError,
        r"`features` must be a dict",
    ),
    case(
        "batch_size=0 per call",
        lambda c: c.predictor({"x": X}, batch_size=0),
        ValueError,
        r"`batch_size`.*0",
    ),
    case(
        "unknown signature",
        lambda c: serving.Predictor(c.export, signature="classify"),
        ValueError,
        r"'classify'.*Available signatures: \[",
    ),
    case(
        "unknown tag",
        lambda c: serving.Predictor(c.export, tags=("gpu",)),
        ValueError,
        r"`tags` \['gpu'\] name no MetaGraph.*it has: \[\['serve'\]\]",
    ),
    case(
        "read_signatures: unknown tag",
        lambda c: serving.read_signatures(c.export, tags=("gpu",)),
        ValueError,
        r"`tags` \['gpu'\] name no MetaGraph.*it has: \[\['serve'\]\]",
    ),
    case(
        "read_signatures: corrupt saved_model.pb",
        lambda c: serving.read_signatures(c.corrupt_pb),
        serving.ExportLoadError,
        r"corrupt_pb could not be read: saved_model.pb is corrupt or incomplete",
    ),
    case(
        "path is not a string",
        lambda c: serving.Predictor(3),
        TypeError,
        r"`export_dir_or_base`.*3",
    ),
    case(
        "missing export dir",
        lambda c: serving.Predictor(os.path.join(c.root, "nowhere")),
        serving.ExportNotFoundError,
        r"nowhere.*not a directory",
    ),
    case(
        "directory without exports",
        lambda c: serving.Predictor(c.empty_dir),
        serving.ExportNotFoundError,
        r"No complete export",
    ),
    case(
        "corrupt saved_model.pb",
        lambda c: serving.Predictor(c.corrupt_pb),
        serving.ExportLoadError,
        r"corrupt_pb could not be read: saved_model.pb is corrupt or incomplete",
    ),
    case(
        "corrupt variables",
        lambda c: serving.Predictor(c.corrupt_vars),
        TfestKitError,
        r"corrupt_vars could not be loaded.*DataLossError",
    ),
]


@pytest.mark.parametrize("call, error, pattern", PREDICTOR_CASES)
def test_predictor(ctx, call, error, pattern):
    _check(ctx, call, error, pattern)


# ------------------------------------------------------------------------------ input builders


INPUT_CASES = [
    case(
        "from_arrays negative batch_size",
        lambda c: inputs.from_arrays({"x": X}, Y, batch_size=-1),
        ValueError,
        r"`batch_size`.*-1",
    ),
    case(
        "from_arrays num_epochs=0",
        lambda c: inputs.from_arrays({"x": X}, Y, num_epochs=0),
        ValueError,
        r"`num_epochs`.*0",
    ),
    case(
        "from_arrays label column missing",
        lambda c: inputs.from_arrays({"x": X}, "label"),
        ValueError,
        r"'label'.*\['x'\]",
    ),
    case(
        "from_arrays rows differ",
        lambda c: inputs.from_arrays({"x": X}, Y[:5]),
        ValueError,
        r"same number.*'x': 16.*'<labels>': 5",
    ),
    case(
        "from_arrays empty dataset",
        lambda c: inputs.from_arrays({"x": X[:0]}, Y[:0]),
        ValueError,
        r"same number \(>= 1\) of rows",
    ),
    case(
        "from_arrays empty dict",
        lambda c: inputs.from_arrays({}),
        ValueError,
        r"`features` must not be an empty dict",
    ),
    case(
        "from_arrays of a set",
        lambda c: inputs.from_arrays({1, 2}),
        TypeError,
        r"`features`.*set",
    ),
    case(
        "from_arrays ragged feature",  # NumPy: "an inhomogeneous shape after 1 dimensions"
        lambda c: inputs.from_arrays({"x": [[1.0, 2.0], [3.0]]}, [0, 1]),
        ValueError,
        r"Feature 'x' is ragged",
    ),
    case(
        "from_arrays datetime column",  # "Cannot convert ... to a TensorFlow DType"
        lambda c: inputs.from_arrays({"when": np.array(["2026-01-01"], "datetime64[D]")}),
        TypeError,
        r"Feature 'when' holds datetime64\[D\]: convert it",
    ),
    case(
        "from_arrays labels given as an int column name",  # "rows per key: {..., '<labels>': -1}"
        lambda c: inputs.from_arrays({"0": X[:, 0], "4": Y}, 4),
        ValueError,
        r"`labels` must be an array or a str of \['0', '4'\]. Got: 4",
    ),
    case(
        "from_arrays object column",
        lambda c: inputs.from_arrays({"x": np.array([1, "a", None], dtype=object)}),
        TypeError,
        r"Feature 'x' holds Python objects",
    ),
    case(
        "from_csv label column missing",
        lambda c: inputs.from_csv(c.csv, label_name="target")(),
        ValueError,
        r"`label_name`.*\['a', 'b', 'label'\].*target",
    ),
    case(
        "from_csv header only",
        lambda c: inputs.from_csv(_file(c, "header.csv", "a,b,label\n"), label_name="label")(),
        ValueError,
        r"header\.csv: no rows after the header line",
    ),
    case(
        "from_csv short row among the rows types are inferred from",
        lambda c: inputs.from_csv(_file(c, "short.csv", "a,b,label\n1,2,0\n1,2\n"))(),
        ValueError,
        r"short\.csv:3: 2 fields.*no field for column 'label'",
    ),
    case(
        "from_csv GZIP file without compression",
        lambda c: inputs.from_csv(_file(c, "data.csv.gz", gzip.compress(b"a,b\n1,2\n")))(),
        ValueError,
        r"data\.csv\.gz is GZIP-compressed.*compression='GZIP'",
    ),
    case(
        "from_csv of a directory",  # make_csv_dataset: "Is it an empty file?"
        lambda c: inputs.from_csv(c.empty_dir, label_name="label"),
        IsADirectoryError,
        r"`file_pattern` .*empty_dir' is a directory: pass '.*empty_dir/\*'",
    ),
    case(
        "from_tfrecord of a directory",  # a FailedPreconditionError in training
        lambda c: inputs.from_tfrecord([c.record, c.empty_dir], {}),
        IsADirectoryError,
        r"empty_dir' is a directory",
    ),
    case(
        "from_tfrecord of an empty file",  # Estimator: 0 steps, "yielded no batch" named no file
        lambda c: inputs.from_tfrecord(_file(c, "empty.tfrecord", b""), {}, num_epochs=None)(),
        ValueError,
        r"matches only empty files: .*empty\.tfrecord\. Point it at the data",
    ),
    case(
        "from_tfrecord of a file that does not exist",  # list_files' assertion, ~100 lines
        lambda c: inputs.from_tfrecord(os.path.join(c.root, "nothing.tfrecord"), {})(),
        ValueError,
        r"`file_pattern` '.*nothing\.tfrecord' matches no file\. Point it at the data",
    ),
    case(
        "from_tfrecord compression 'gz'",  # failed at a read error, in the error's scan
        lambda c: inputs.from_tfrecord(c.record, {}, compression="gz"),
        ValueError,
        r"`compression` must be None, 'GZIP' or 'ZLIB'. Got: 'gz'",
    ),
    case(
        "from_csv header=False on a file with a header",  # "labels must be integer class ids"
        lambda c: inputs.from_csv(c.csv, ["a", "b", "label"], "label", header=False),
        ValueError,
        r"data\.csv starts with a header line.*header=False.*leave `header` True",
    ),
    case(
        "from_tfrecord label_key not in spec",
        lambda c: inputs.from_tfrecord(
            c.record, {"a": tf.io.FixedLenFeature([], tf.float32)}, "label"
        )(),
        ValueError,
        r"`label_key`.*label",
    ),
    case(
        "write_tfrecord num_shards=0",
        lambda c: inputs.write_tfrecord(
            [{"a": 1}], os.path.join(c.root, "o.tfrecord"), num_shards=0
        ),
        ValueError,
        r"`num_shards`.*0",
    ),
    case(
        "write_tfrecord row not a dict",
        lambda c: inputs.write_tfrecord([[1, 2]], os.path.join(c.root, "o.tfrecord")),
        TypeError,
        r"`rows` must hold dicts.*Row 0",
    ),
    case(
        "write_tfrecord unsupported value",
        lambda c: inputs.write_tfrecord([{"a": {"b": 1}}], os.path.join(c.root, "o.tfrecord")),
        TypeError,
        r"'a'",
    ),
]


@pytest.mark.parametrize("call, error, pattern", INPUT_CASES)
def test_inputs(ctx, call, error, pattern):
    _check(ctx, call, error, pattern)


# ---------------------------------------------------------------------------------- keras


def _keras_model(compiled=True):
    model = tf2.keras.Sequential([tf2.keras.layers.Dense(2, input_shape=(4,))])
    if compiled:
        model.compile("adam", "sparse_categorical_crossentropy")
    return model


def _to_estimator(*args, **kw):
    from tfest_kit import keras_bridge

    return keras_bridge.to_estimator(*args, **kw)


KERAS_CASES = [
    case(
        "uncompiled model",
        lambda c: _to_estimator(_keras_model(compiled=False)),
        ValueError,
        r"has not been compiled.*model.compile",
    ),
    case(
        "unknown checkpoint_format",
        lambda c: _to_estimator(_keras_model(), checkpoint_format="h5"),
        ValueError,
        r"[Cc]heckpoint format.*h5",
    ),
    case(
        "a saved model's path",  # "'str' object has no attribute 'submodules'"
        lambda c: _to_estimator("model.h5"),
        TypeError,
        r"`keras_model` is 'model\.h5'; .*Keras 2 models only.*tf\.keras\.models\.load_model",
    ),
]


@pytest.mark.parametrize("call, error, pattern", KERAS_CASES)
def test_keras_bridge(ctx, call, error, pattern):
    _check(ctx, call, error, pattern)


# ------------------------------------------------------------------------------- TF_CONFIG


def _tf_config(**parts):
    config = {"cluster": {"chief": ["localhost:2222"], "worker": ["localhost:2223"]}}
    config["task"] = {"type": "worker", "index": 0}
    config.update(parts)
    return json.dumps(config)


CLUSTER_CASES = [
    case(
        "malformed JSON",
        lambda c: cluster.validate_tf_config('{"cluster": {"chief": ["h:1"]}'),
        ValueError,
        r"TF_CONFIG is not valid JSON",
    ),
    case(
        "JSON list",
        lambda c: cluster.validate_tf_config("[1, 2]"),
        ValueError,
        r"JSON object.*\[1, 2\]",
    ),
    case(
        "unknown task type in cluster",
        lambda c: cluster.validate_tf_config(
            _tf_config(cluster={"chief": ["h:1"], "wrker": ["h:2"]})
        ),
        ValueError,
        r"task type 'wrker'",
    ),
    case(
        "index out of range",
        lambda c: cluster.validate_tf_config(_tf_config(task={"type": "worker", "index": 3})),
        ValueError,
        r"task.index must be an index into cluster.worker, which has 1.*Got: 3",
    ),
    case(
        "negative index",
        lambda c: cluster.validate_tf_config(_tf_config(task={"type": "worker", "index": -1})),
        ValueError,
        r"task.index.*Got: -1",
    ),
    case(
        "missing chief",
        lambda c: cluster.validate_tf_config(_tf_config(cluster={"worker": ["h:1", "h:2"]})),
        ValueError,
        r"exactly one 'chief'",
    ),
    case(
        "two chiefs",
        lambda c: cluster.validate_tf_config(_tf_config(cluster={"chief": ["h:1", "h:2"]})),
        ValueError,
        r"exactly one 'chief'",
    ),
    case(
        "port not a number",
        lambda c: cluster.validate_tf_config(_tf_config(cluster={"chief": ["h:http"]})),
        ValueError,
        r"cluster.chief must hold.*h:http",
    ),
    case(
        "address used twice",
        lambda c: cluster.validate_tf_config(
            _tf_config(cluster={"chief": ["h:1"], "worker": ["h:1"]})
        ),
        ValueError,
        r"one address to two tasks",
    ),
    case(
        "evaluator in the cluster",
        lambda c: cluster.validate_tf_config(
            _tf_config(cluster={"chief": ["h:1"], "evaluator": ["h:2"]})
        ),
        ValueError,
        r"task type 'evaluator'",
    ),
    case(
        "cluster without task",
        lambda c: cluster.validate_tf_config(json.dumps({"cluster": {"chief": ["h:1"]}})),
        ValueError,
        r"'cluster' but no 'task'",
    ),
    case(
        "task type not in cluster",
        lambda c: cluster.validate_tf_config(_tf_config(task={"type": "ps", "index": 0})),
        ValueError,
        r"task.type must be one of.*Got: ps",
    ),
    case(
        "unknown top-level key",
        lambda c: cluster.validate_tf_config(_tf_config(tsk={"type": "worker"})),
        ValueError,
        r"unknown top-level keys \['tsk'\]",
    ),
    case(
        "TF_CONFIG of the wrong type",
        lambda c: cluster.validate_tf_config(42),
        TypeError,
        r"`tf_config`.*int 42",
    ),
    case(
        "cluster_spec negative workers",
        lambda c: cluster.cluster_spec(workers=-1),
        ValueError,
        r"`workers`.*-1",
    ),
    case(
        "cluster_spec ps as str",
        lambda c: cluster.cluster_spec(ps="1"),
        ValueError,
        r"`ps`.*'1'",
    ),
    case(
        "tf_config of a task outside the cluster",
        lambda c: cluster.tf_config(cluster.cluster_spec(workers=1), "worker", 2),
        ValueError,
        r"task.index must be an index into cluster.worker.*Got: 2",
    ),
    case(
        "free_ports negative",
        lambda c: cluster.free_ports(-1),
        ValueError,
        r"`count`.*-1",
    ),
    case(
        "launcher --workers -1",
        lambda c: cluster.main(["--workers", "-1", "--", "python", "-c", "pass"]),
        SystemExit,
        r"2",
    ),
    case(
        "launcher --chief 2",
        lambda c: cluster.main(["--chief", "2", "--", "python", "-c", "pass"]),
        SystemExit,
        r"2",
    ),
    case(
        "launcher without a program",
        lambda c: cluster.main(["--workers", "1"]),
        SystemExit,
        r"2",
    ),
    case(
        "launcher with a program that is not there",
        lambda c: cluster.main(["--", "no_such_program_here", "train.py"]),
        SystemExit,
        r"2",
    ),
]


LAUNCHER_MESSAGES = {
    "launcher --workers -1": r"`workers` must be an int >= 0\. Got: -1",
    "launcher --chief 2": r"--chief: invalid choice: 2",
    "launcher without a program": r"give the program to run after `--`",
    "launcher with a program that is not there": r"'no_such_program_here' is not a program",
}


@pytest.mark.parametrize("call, error, pattern", CLUSTER_CASES)
def test_cluster(ctx, call, error, pattern, request, capsys, monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    _check(ctx, call, error, pattern)
    name = request.node.callspec.id
    if name in LAUNCHER_MESSAGES:  # argparse exits 2 and says why on stderr
        assert re.search(LAUNCHER_MESSAGES[name], capsys.readouterr().err)


def test_tpu_estimator_names_malformed_tf_config(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {"chief": ["h:1"]}')
    with pytest.raises(ValueError, match=r"TF_CONFIG is not valid JSON.*Got: \{\"cluster"):
        tpu.TPUEstimator(_tpu_model_fn, use_tpu=False)
    # RunConfig's own errors: a bare JSONDecodeError, and 'must have one "chief" node'.
    monkeypatch.setenv("TF_CONFIG", "")
    with pytest.raises(ValueError, match=r"TF_CONFIG is set but empty"):
        tpu.RunConfig()
    workers = {"cluster": {"worker": ["h:1"]}, "task": {"type": "worker", "index": 3}}
    monkeypatch.setenv("TF_CONFIG", json.dumps(workers))
    with pytest.raises(ValueError, match=r"TF_CONFIG task.index must be an index into cl"):
        tpu.RunConfig()


def test_malformed_tf_config_in_the_environment_is_named(monkeypatch):
    monkeypatch.setenv(
        "TF_CONFIG", '{"cluster": {"chief": ["h:1"]}, "task": {"type": "chef", "index": 0}}'
    )
    with pytest.raises(ValueError, match=r"task.type must be one of.*Got: chef"):
        cluster.validate_tf_config()
    with pytest.raises(ValueError, match=r"TF_CONFIG task.type.*chef"):
        cluster.multi_worker_strategy()


# ----------------------------------------------------------------- run_config, logs, legacy


MISC_CASES = [
    case("run_config threads=0", lambda c: run_config(threads=0), ValueError, r"`threads`.*0"),
    case(
        "run_config threads triple",
        lambda c: run_config(threads=(1, 2, 3)),
        ValueError,
        r"`threads`.*\(1, 2, 3\)",
    ),
    case("run_config xla str", lambda c: run_config(xla="yes"), TypeError, r"`xla`.*'yes'"),
    case(
        "run_config negative seed",
        lambda c: run_config(seed=-1),
        ValueError,
        r"`seed`.*-1",
    ),
    case(
        "run_config steps and secs",
        lambda c: run_config(save_checkpoints_steps=10, save_checkpoints_secs=60),
        ValueError,
        r"`save_checkpoints_steps` or `save_checkpoints_secs`, not both",
    ),
    case(
        "run_config unknown keyword",
        lambda c: run_config(save_every=10),
        TypeError,
        r"save_every",
    ),
    case(
        "run_config session_config not a proto",
        lambda c: run_config(session_config={"threads": 2}),
        TypeError,
        r"`session_config`.*dict",
    ),
    case(
        "logs.setup unknown level",
        lambda c: logs.setup("verbose"),
        ValueError,
        r"`verbosity`.*'verbose'",
    ),
    case(
        "legacy.run missing script",
        lambda c: legacy_run(os.path.join(c.root, "run_classifier.py")),
        ValueError,
        r"`script` must be an existing .py file.*run_classifier.py",
    ),
    case(
        "legacy symbol without stand-in",
        lambda c: build_namespace(Report()).contrib.learn.DNNClassifier(),
        AttributeError,
        r"tf.contrib.learn.DNNClassifier is not provided by the legacy runner",
    ),
    case(
        "legacy layer_norm axis out of range",
        lambda c: layer_norm(tf.zeros([2, 3]), begin_norm_axis=5),
        ValueError,
        r"begin_norm_axis",
    ),
]


@pytest.mark.parametrize("call, error, pattern", MISC_CASES)
def test_misc(ctx, call, error, pattern):
    _check(ctx, call, error, pattern)
