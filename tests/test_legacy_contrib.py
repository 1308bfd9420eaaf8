"""Tests for tf.contrib as TF 1.15 had it: whole modules measured, refusals at use, the early list.

- TF 1.15's public names per served package (tfest_kit/legacy/contrib_tf115.json, taken from
  the 1.15 sources) against what the stand-in serves: the counts docs/compatibility.md gives;
- a tf.contrib module or name TF 1.15 had and the runner does not serve imports, and its first
  use raises naming its TensorFlow 2 home, or saying there is none;
- ``--report`` lists, before the script runs, the refused names its project reaches.

In-process tests never call ``legacy.run``; scripts run through ``python -m tfest_kit.legacy``
in subprocesses.
"""

from __future__ import annotations

import importlib
import inspect
import re
import traceback

import numpy as np
import pytest

from tests.conftest import ROOT, on_sys_path, run_program, write_module
from tfest_kit._tf import TF_VERSION, tf
from tfest_kit.legacy._contrib import build_contrib
from tfest_kit.legacy._importer import Scope
from tfest_kit.legacy._namespace import build_namespace
from tfest_kit.legacy._refused import CONTRIB_REPLACEMENTS, Refused, refused_in_project, tf115
from tfest_kit.legacy._shim import MISSING, SHIM, Report

# TF 1.15's public names per package, served / all (docs/compatibility.md gives the same).
SERVED_COUNTS = {
    "cluster_resolver": (7, 8),
    "compiler": (1, 2),
    "crf": (8, 11),
    "data": (34, 40),
    "distribute": (12, 27),
    "estimator": (19, 34),
    "factorization": (6, 11),
    "framework": (43, 71),
    "framework.nest": (19, 19),
    "image": (8, 16),
    "keras": (15, 16),
    "layers": (68, 98),
    "learn": (13, 69),
    "legacy_seq2seq": (5, 13),
    "lookup": (23, 23),
    "losses": (15, 15),
    "metrics": (52, 57),
    "opt": (6, 28),
    "predictor": (2, 3),
    "rnn": (22, 50),
    "seq2seq": (28, 29),
    "signal": (9, 9),
    "slim": (125, 186),
    "stateless": (4, 4),
    "summary": (16, 20),
    "tpu": (16, 36),
    "training": (15, 28),
    "util": (3, 5),
}


def _package(ns, key):
    module = ns.contrib
    for part in key.split("."):
        module = getattr(module, part)
    return module


# --- TF 1.15's names, measured ----------------------------------------------------------------


def test_tf115_lists_name_their_source_and_cover_every_served_package():
    data = tf115()
    assert re.search(r"\b[0-9a-f]{40}\b", data["source"]) and "1.15" in data["source"]
    assert len(data["packages"]) == 89 and "graph_editor" in data["packages"]
    for key, names in data["names"].items():
        assert names == sorted(set(names)), key
        assert key.partition(".")[0] in data["packages"], key
    ns = build_namespace(Report())
    served = {n for n in data["packages"] if not isinstance(getattr(ns.contrib, n), Refused)}
    assert served == {key for key in data["names"] if "." not in key}
    # TF 1.15's framework/__init__.py kept 19 names in nest (its _nest_allowed_symbols).
    assert len(data["names"]["framework.nest"]) == 19


def test_served_and_refused_counts_per_package_match_the_docs():
    ns = build_namespace(Report())
    counts = {}
    for key, names in tf115()["names"].items():
        package = _package(ns, key)
        refused = [n for n in names if isinstance(getattr(package, n), Refused)]
        counts[key] = (len(names) - len(refused), len(names))
    want = dict(SERVED_COUNTS)
    if tuple(int(part) for part in TF_VERSION.split(".")[:2]) >= (2, 16):
        # TensorFlow 2.16 dropped tf.data.experimental.CheckpointInputPipelineHook.
        want["data"] = (33, 40)
    assert counts == want
    docs = (ROOT / "docs" / "compatibility.md").read_text()
    for key, (served, total) in SERVED_COUNTS.items():  # the docs give TensorFlow 2.15's
        row = rf"\|\s*`tf\.contrib\.{re.escape(key)}`\s*\|\s*{served}\s*\|\s*{total - served}\s*\|"
        assert re.search(row, docs), f"docs/compatibility.md has no row for {key}: {served}/{total}"


def test_every_tf115_package_is_served_or_names_its_replacement():
    ns = build_namespace(Report())
    for package in tf115()["packages"]:
        value = getattr(ns.contrib, package)
        if isinstance(value, Refused):
            assert package in CONTRIB_REPLACEMENTS, package
    for text in CONTRIB_REPLACEMENTS.values():
        # Every tf.… replacement is there for a TF1 script (whose tf is tf.compat.v1).
        for target in re.findall(r"\btf(?:\.\w+)+", text or ""):
            if target.startswith("tf.contrib."):
                continue
            value = tf
            for part in target.split(".")[1:]:
                value = getattr(value, part)
    with pytest.raises(AttributeError, match="no equivalent of tf.contrib.graph_editor"):
        _ = ns.contrib.graph_editor.connect
    with pytest.raises(AttributeError, match=r"Replace it in the script with tf\.nn\.$"):
        ns.contrib.nn.alpha_dropout([1.0], 0.5)


def test_contrib_image_rotates_and_translates_as_tf115_did():
    # Augmentation code's tf.contrib.image.rotate / translate / transform: contrib's
    # ImageProjectiveTransformV2 kernel, in TensorFlow's core since 2.x.
    image = build_namespace(Report()).contrib.image
    picture = np.arange(1, 26, dtype=np.uint8).reshape(5, 5)
    batch = np.stack([picture, picture.T])[..., None].astype(np.float32)
    with tf.Graph().as_default():
        angle = tf.placeholder(tf.float32, [])
        rotated = image.rotate(picture, np.pi / 2)  # HW in, HW out; counterclockwise
        per_image = image.rotate(batch, [np.pi / 2, 0.0], interpolation="BILINEAR")
        shifted = image.translate(batch[0], [1.0, 2.0])  # dx, dy
        twice = image.transform(
            batch[0], image.compose_transforms(*[[1.0, 0, -1, 0, 1, 0, 0, 0]] * 2)
        )
        grads = tf.gradients(tf.reduce_sum(image.rotate(tf.constant(batch), angle)), angle)
        pixels = tf.constant(batch)
        loss = tf.reduce_sum(image.rotate(pixels, 0.3, interpolation="BILINEAR"))
        image_grads = tf.gradients(loss, pixels)
        with tf.Session() as sess:
            got = sess.run([rotated, per_image, shifted, twice, image_grads], {angle: 0.5})
    rotated, per_image, shifted, twice, image_grads = got
    assert rotated.dtype == np.uint8 and rotated.shape == (5, 5)
    np.testing.assert_array_equal(rotated, np.rot90(picture))
    np.testing.assert_allclose(per_image[0, ..., 0], np.rot90(picture), atol=1e-4)
    np.testing.assert_array_equal(per_image[1], batch[1])  # angle 0: unchanged
    want = np.zeros_like(batch[0])
    want[2:, 1:] = batch[0][:-2, :-1]  # moved right by 1 and down by 2, zeros behind
    np.testing.assert_array_equal(shifted, want)
    np.testing.assert_array_equal(twice[:, 2:], batch[0][:, :-2])
    assert not twice[:, :2].any()
    assert grads == [None]  # no gradient into the transform, as TF 1.15 said
    assert image_grads[0].shape == batch.shape and np.abs(image_grads[0]).sum() > 0
    with pytest.raises(TypeError, match="Invalid dtype"):
        image.rotate(tf.constant([["a"]]), 0.1)
    with pytest.raises(TypeError, match="rank between 2 and 4"):
        image.rotate(np.zeros([2], np.float32), 0.1)
    with pytest.raises(AttributeError, match=r"tfa\.image\.dense_image_warp"):
        image.dense_image_warp(batch, batch)


def test_core_rnn_cells_private_linear_keeps_tf115s_variables(tmp_path):
    # Attention decoders of the time: `from …core_rnn_cell import _linear`.
    write_module(
        tmp_path / "legacy_linear_user.py",
        """
        import tensorflow as tf
        from tensorflow.contrib.rnn.python.ops.core_rnn_cell import _linear

        def scores(query, state):
            with tf.variable_scope("attention"):
                return _linear([query, state], 3, True)
        """,
    )
    with on_sys_path(tmp_path), Scope(str(tmp_path), build_namespace(Report())):
        user = importlib.import_module("legacy_linear_user")
    query, state = np.ones([2, 4], np.float32), np.full([2, 5], 2.0, np.float32)
    with tf.Graph().as_default():
        out = user.scores(tf.constant(query), tf.constant(state))
        variables = {v.op.name: v for v in tf.global_variables()}
        shapes = {name: v.shape.as_list() for name, v in variables.items()}
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            got, kernel = sess.run([out, variables["attention/kernel"]])
        with pytest.raises(ValueError, match="2D arguments"):
            user.scores(tf.zeros([2, 4, 1]), tf.zeros([2, 5]))
    assert shapes == {"attention/kernel": [9, 3], "attention/bias": [3]}
    np.testing.assert_allclose(got, np.concatenate([query, state], 1) @ kernel, rtol=1e-5)


def test_output_projection_wrapper_projects_in_its_own_scope():
    # conversation-tensorflow's seq2seq decoder projects its GRU to the vocabulary with it.
    rnn = build_namespace(Report()).contrib.rnn
    inputs = np.random.RandomState(0).rand(2, 5, 3).astype(np.float32)
    with tf.Graph().as_default():
        cell = rnn.OutputProjectionWrapper(tf.nn.rnn_cell.GRUCell(4), 6)
        outputs, state = tf.nn.dynamic_rnn(cell, tf.constant(inputs), dtype=tf.float32)
        variables = {v.op.name: v.shape.as_list() for v in tf.global_variables()}
        kernel, bias = tf.global_variables()[-2:]
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            got, last_state, kernel, bias = sess.run([outputs, state, kernel, bias])
        with pytest.raises(ValueError, match="output_size must be > 0"):
            rnn.OutputProjectionWrapper(tf.nn.rnn_cell.GRUCell(4), 0)
    assert variables["rnn/output_projection_wrapper/kernel"] == [4, 6]
    assert variables["rnn/output_projection_wrapper/bias"] == [6]
    assert "rnn/output_projection_wrapper/gru_cell/gates/kernel" in variables, variables
    assert got.shape == (2, 5, 6) and last_state.shape == (2, 4)
    # A GRU's output is its state: the last output is that state, projected.
    np.testing.assert_allclose(got[:, -1], last_state @ kernel + bias, rtol=1e-5)


def test_factorization_kmeans_is_tensorflows_own_and_clusters():
    # aymericdamien's kmeans.py: KMeans(inputs, …).training_graph(), 6 tensors in TF 1.15.
    factorization = build_namespace(Report()).contrib.factorization
    rng = np.random.RandomState(0)
    points = np.concatenate([rng.randn(50, 2) + 5, rng.randn(50, 2) - 5]).astype(np.float32)
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 2])
        kmeans = factorization.KMeans(
            inputs=x, num_clusters=2, distance_metric=factorization.SQUARED_EUCLIDEAN_DISTANCE
        )
        graph = kmeans.training_graph()
        _, cluster_idx, scores, _, init_op, train_op = graph
        avg_distance = tf.reduce_mean(scores)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(init_op, {x: points})
            first = sess.run(avg_distance, {x: points})
            for _ in range(5):
                _, last, idx = sess.run([train_op, avg_distance, cluster_idx], {x: points})
    assert len(graph) == 6 and last < first and last < 3.0
    assert len(set(idx[0][:50])) == 1 and set(idx[0][:50]) != set(idx[0][50:])
    assert issubclass(factorization.KMeansClustering, tf.estimator.Estimator)
    assert factorization.KMeansClustering.train is not tf.estimator.Estimator.train  # guarded
    with pytest.raises(AttributeError, match=r"factorization\.GMM is not provided.*1\.15"):
        factorization.GMM()


def test_contrib_losses_take_tf10s_argument_order_and_weights():
    # TF 1.0-era scripts: tf.contrib.losses.softmax_cross_entropy(logits, onehot_labels), the
    # order tf.losses reversed; a weight per example scales the sum over its time steps.
    losses = build_namespace(Report()).contrib.losses
    rng = np.random.RandomState(3)
    logits, labels = rng.randn(4, 3).astype(np.float32), np.array([0, 2, 1, 2])
    onehot = np.eye(3, dtype=np.float32)[labels]
    steps = rng.rand(4, 5).astype(np.float32)  # per-token losses
    weights = np.array([1.0, 0.0, 2.0, 1.0], np.float32)
    with tf.Graph().as_default():
        got = {
            "softmax": losses.softmax_cross_entropy(tf.constant(logits), tf.constant(onehot)),
            "official": tf.losses.softmax_cross_entropy(onehot, logits),
            "sparse": losses.sparse_softmax_cross_entropy(tf.constant(logits), labels[:, None]),
            "weighted": losses.compute_weighted_loss(steps, weights),
            "hinge": losses.hinge_loss(tf.constant(logits), tf.constant(onehot)),
            "pairwise": losses.mean_pairwise_squared_error(tf.constant(steps), tf.zeros([4, 5])),
        }
        collected = len(tf.get_collection(tf.GraphKeys.LOSSES))
        got["total"] = losses.get_total_loss()
        with pytest.raises(ValueError, match="must specify 'axis'"):
            losses.cosine_distance(tf.constant(logits), tf.constant(onehot))
        with tf.Session() as sess:
            got = sess.run(got)
    np.testing.assert_allclose(got["softmax"], got["official"], rtol=1e-6)
    np.testing.assert_allclose(got["sparse"], got["official"], rtol=1e-6)
    want = (steps.sum(1) * weights).sum() / (3 * 5)  # the zero-weighted example not counted
    np.testing.assert_allclose(got["weighted"], want, rtol=1e-6)
    assert got["hinge"].shape == (4, 3)  # not reduced, as contrib's
    np.testing.assert_allclose(got["hinge"], np.maximum(0, 1 - (2 * onehot - 1) * logits))
    # contrib's formula (n, not tf.losses' n - 1), summed over the batch.
    pairwise = 2 * (steps**2).sum(1) / 5 - 2 * steps.sum(1) ** 2 / 25
    np.testing.assert_allclose(got["pairwise"], pairwise.sum(), rtol=1e-5)
    # contrib's losses and tf.losses' share GraphKeys.LOSSES, as in TF 1.15.
    assert collected == 5
    total = got["softmax"] + got["official"] + got["sparse"] + got["weighted"] + got["pairwise"]
    np.testing.assert_allclose(got["total"], total, rtol=1e-6)


def test_contrib_signal_stateless_and_util_are_tensorflows_own_functions():
    contrib = build_namespace(Report()).contrib
    assert contrib.signal.stft is tf.signal.stft and contrib.signal.frame is tf.signal.frame
    assert contrib.stateless.stateless_random_uniform is tf.random.stateless_uniform
    proto = contrib.util.make_tensor_proto(np.arange(6, dtype=np.float32), shape=[2, 3])
    np.testing.assert_array_equal(contrib.util.make_ndarray(proto), np.arange(6).reshape(2, 3))
    with tf.Graph().as_default():
        assert contrib.util.constant_value(tf.shape(tf.zeros([2, 3]))).tolist() == [2, 3]
    with pytest.raises(AttributeError, match="meta_graph.ops_used_by_graph_def"):
        contrib.util.ops_used_by_graph_def(None)


def test_contrib_keras_is_the_scripts_tf_keras_as_tf115s_was_an_alias_of_it():
    # TF 1.15's contrib/keras/__init__.py: "This module an alias for `tf.keras`".
    ns = build_namespace(Report())
    assert ns.contrib.keras.layers.Dense is tf.keras.layers.Dense
    padded = ns.contrib.keras.preprocessing.sequence.pad_sequences([[1, 2], [3]], maxlen=3)
    assert padded.tolist() == [[0, 1, 2], [0, 0, 3]]
    with pytest.raises(AttributeError, match="scikeras"):
        _ = ns.contrib.keras.wrappers.scikit_learn


def test_nest_is_tf115s_whole():
    report = Report()
    nest = build_namespace(report).contrib.framework.nest
    for name in tf115()["names"]["framework.nest"]:
        assert callable(getattr(nest, name)), name
    assert nest.is_sequence([1]) and nest.is_sequence({"a": 1}) and not nest.is_sequence("ab")
    assert nest.flatten_up_to([1, 2], [1, [2, 3]]) == [1, [2, 3]]
    assert nest.map_structure_up_to((0, 0), lambda x: x * 2, (1, [2])) == (2, [2, 2])
    assert list(nest.yield_flat_paths({"a": [1, 2]})) == [("a", 0), ("a", 1)]
    assert nest.flatten_with_joined_string_paths({"a": (1,)}) == [("a/0", 1)]
    with pytest.raises((TypeError, ValueError)):
        nest.assert_shallow_structure([1, 2, 3], [1, 2])
    assert nest.flatten is tf.nest.flatten
    assert "tf.contrib.framework.nest.flatten_up_to" in report.names(SHIM)
    assert not report.names(MISSING)


def test_framework_serves_tf115s_tensor_helpers_from_tf_compat_v1():
    framework = build_namespace(Report()).contrib.framework
    for name in ("assert_same_float_dtype", "assert_scalar", "convert_to_tensor_or_sparse_tensor"):
        assert getattr(framework, name) is getattr(tf, name)
    assert framework.TensorSpec([2], tf.float32) == tf.TensorSpec([2], tf.float32)
    with tf.Graph().as_default():
        assert framework.assert_same_float_dtype([tf.constant(1.0)]) == tf.float32
    with pytest.raises(AttributeError, match=r"framework\.smart_cond is not provided"):
        framework.smart_cond(True, lambda: 1, lambda: 2)


def test_training_evaluates_a_checkpoint_as_tf115_did(tmp_path):
    with tf.Graph().as_default():
        tf.Variable(3.0, name="v")
        tf.train.get_or_create_global_step()
        with tf.Session() as session:
            session.run(tf.global_variables_initializer())
            tf.train.Saver().save(session, str(tmp_path / "model.ckpt"), global_step=7)
    training = build_namespace(Report()).contrib.training
    with tf.Graph().as_default():
        v = tf.Variable(0.0, name="v")
        tf.train.get_or_create_global_step()
        mean, update = tf.metrics.mean(v * 2)
        got = training.evaluate_repeatedly(
            str(tmp_path),
            eval_ops=update,
            final_ops={"mean": mean},
            hooks=[
                training.StopAfterNEvalsHook(2),
                training.SummaryAtEndHook(log_dir=str(tmp_path / "eval")),
            ],
            max_number_of_evaluations=1,
            eval_interval_secs=0,
        )
        assert training.get_or_create_eval_step().op.name == "eval_step"
    assert got == {"mean": 6.0}
    assert list((tmp_path / "eval").glob("events.out.tfevents.*"))


def test_learn_serves_its_constants_and_refuses_its_estimators():
    learn = build_namespace(Report()).contrib.learn
    keys = learn.ModeKeys
    assert (keys.TRAIN, keys.EVAL, keys.INFER) == ("train", "eval", "infer")
    assert keys.INFER == tf.estimator.ModeKeys.PREDICT
    keys.validate("infer")
    with pytest.raises(ValueError, match="Invalid mode predict"):
        keys.validate("predict")
    assert learn.PredictionKey.PROBABILITIES == "probabilities"
    assert learn.ProblemType.CLASSIFICATION == 1 and learn.TaskType.PS == "ps"
    for name in ("Estimator", "DNNClassifier", "LinearRegressor", "SKCompat"):
        with pytest.raises(AttributeError, match=r"not provided.*tf\.estimator\.Estimator"):
            getattr(learn, name)()
    with pytest.raises(AttributeError, match=r"learn\.Estimator\.fit is not provided"):
        _ = learn.Estimator.fit
    # The driver of tf.estimator Estimators is served: tests/test_legacy_learn.py.
    assert callable(learn.Experiment) and callable(learn.learn_runner.run)
    assert callable(learn.datasets.mnist.read_data_sets)  # a port: tests/test_legacy_mnist.py
    with pytest.raises(AttributeError, match=r"tf\.keras\.datasets"):
        learn.datasets.load_dataset("iris")
    with pytest.raises(AttributeError, match="is not provided"):
        _ = learn.not_a_tf115_name  # never in tf.contrib.learn: at once


def test_learn_vocabulary_processor_gives_tf115_ids_and_restores_from_its_pickle(tmp_path):
    # A text classifier in the TF1 style: word ids from learn.preprocessing, the processor
    # pickled beside the checkpoints and restored by the evaluation script.
    write_module(
        tmp_path / "legacy_text_ids.py",
        """
        import numpy as np
        import tensorflow as tf
        from tensorflow.contrib import learn

        def ids(texts, max_len, path, min_frequency=0):
            processor = learn.preprocessing.VocabularyProcessor(max_len, min_frequency)
            fitted = np.array(list(processor.fit_transform(texts)))
            processor.save(path)
            restored = learn.preprocessing.VocabularyProcessor.restore(path)
            return processor, fitted, restored
        """,
    )
    report = Report()
    with on_sys_path(tmp_path), Scope(str(tmp_path), build_namespace(report), report):
        module = importlib.import_module("legacy_text_ids")
        texts = ["The movie was GOOD", "the movie wasn't good-ish"]
        processor, fitted, restored = module.ids(texts, 4, str(tmp_path / "vocab"))
        # TF 1.15's tokenizer: case kept, apostrophes and hyphens inside words, "Mc|Donald".
        np.testing.assert_array_equal(fitted, [[1, 2, 3, 4], [5, 2, 6, 7]])
        unseen = list(restored.transform(["McDonald movie was unseen"]))
        np.testing.assert_array_equal(unseen, [[0, 0, 2, 3]])  # frozen: new words are 0
        assert unseen[0].dtype == np.int64 and len(restored.vocabulary_) == 8
        assert list(processor.reverse([[5, 2, 0]])) == ["the movie <UNK>"]
        # min_frequency: ids renumbered by frequency, then alphabetically; the rare dropped.
        _, trimmed, _ = module.ids(["b a a", "c a b"], 3, str(tmp_path / "v2"), min_frequency=1)
        np.testing.assert_array_equal(trimmed, [[2, 1, 1], [0, 1, 2]])
        with pytest.raises(AttributeError, match="OrdinalEncoder"):
            module.learn.preprocessing.CategoricalProcessor()
    assert "tf.contrib.learn.preprocessing.VocabularyProcessor" in report.names(SHIM)


# --- refused at use, not at import ------------------------------------------------------------


def test_refused_modules_and_names_import_and_refuse_at_first_use(tmp_path):
    write_module(
        tmp_path / "legacy_refusing_a.py",
        """
        import tensorflow as tf
        import tensorflow.contrib.graph_editor as ge
        from tensorflow.contrib import graph_editor
        from tensorflow.contrib.graph_editor import util as ge_util
        from tensorflow.contrib.learn import DNNClassifier, ModeKeys
        from tensorflow.contrib.tpu.python.tpu import tpu_feed
        from tensorflow.contrib.learn.python.learn.estimators import dnn
        import tensorflow.contrib.learn.python.learn.estimators.estimator

        MODE = ModeKeys.INFER
        GE = tf.contrib.graph_editor
        """,
    )
    report = Report()
    with on_sys_path(tmp_path), Scope(str(tmp_path), build_namespace(report), report):
        module = importlib.import_module("legacy_refusing_a")
    assert module.MODE == "infer"
    assert isinstance(module.ge, Refused) and isinstance(module.GE, Refused)
    uses = [
        (lambda: module.ge.connect, r"^tf\.contrib\.graph_editor\.connect is not provided"),
        (lambda: module.graph_editor.sgv(), "TensorFlow 2 has no equivalent"),
        (lambda: module.ge_util.make_list_of_op(), r"graph_editor\.util.*no equivalent"),
        (lambda: module.DNNClassifier([10], None), r"tf\.estimator\.DNNClassifier"),
        (lambda: module.tpu_feed.InfeedQueue, r"tpu_feed\.InfeedQueue is not provided"),
        (lambda: module.dnn.DNNClassifier(), r"tf\.estimator"),
    ]
    for use, message in uses:
        with pytest.raises(AttributeError, match=message):
            use()
    with pytest.raises(AttributeError, match="learn.DNNClassifier"):

        class Mine(module.DNNClassifier):  # subclassing is a use too
            pass

    refused = report.names(MISSING)
    assert refused[:2] == ["tf.contrib.graph_editor", "tf.contrib.graph_editor.util"]
    assert "tf.contrib.learn.DNNClassifier" in refused
    assert "tf.contrib.tpu.python.tpu.tpu_feed" in refused


def test_names_tf115_never_had_still_fail_at_import(tmp_path):
    write_module(
        tmp_path / "legacy_refusing_b.py", "from tensorflow.contrib.layers import no_layer\n"
    )
    write_module(tmp_path / "legacy_refusing_c.py", "import tensorflow.contrib.no_package\n")
    with on_sys_path(tmp_path), Scope(str(tmp_path), build_namespace(Report())):
        with pytest.raises(ImportError, match=r"^tf\.contrib\.layers\.no_layer is not provided"):
            importlib.import_module("legacy_refusing_b")
        with pytest.raises(ModuleNotFoundError, match=r"^tf\.contrib\.no_package is not"):
            importlib.import_module("legacy_refusing_c")


def test_a_refused_use_prints_its_message_once():
    ns = build_namespace(Report())
    with pytest.raises(AttributeError) as info:
        ns.contrib.learn.Estimator(model_dir="/tmp/x")
    error = info.value  # format_exception(error) alone is Python 3.10+
    printed = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    assert printed.count("is not provided by the legacy runner") == 1, printed


# --- what cannot be served, said once and early -----------------------------------------------


def test_scan_finds_the_refused_names_a_project_reaches(tmp_path):
    write_module(
        tmp_path / "train.py",
        """
        import tensorflow.compat.v1 as tf
        from tensorflow import contrib
        from tensorflow.contrib import slim, learn as tflearn
        # tf.contrib.gan in a comment is no reference
        TEXT = "tf.contrib.quantize in a string neither"
        net = slim.conv2d
        estimator = tflearn.Estimator
        mode = tflearn.ModeKeys.TRAIN
        col = tf.contrib.layers.real_valued_column("x")
        gan = contrib.gan.estimator
        """,
    )
    write_module(tmp_path / "lib" / "model.py", "import tensorflow.contrib.graph_editor as ge\n")
    write_module(tmp_path / "lib" / "broken.py", "print 'python 2'\n")
    skipped = "import tensorflow.contrib.bayesflow\n"
    write_module(tmp_path / ".venv" / "lib" / "site-packages" / "dep.py", skipped)
    write_module(tmp_path / "build" / "site-packages" / "dep.py", skipped)
    found = {
        name: (where, text)
        for name, where, text in refused_in_project(str(tmp_path), build_contrib(Report()))
    }
    assert set(found) == {
        "tf.contrib.graph_editor",
        "tf.contrib.learn.Estimator",
        "tf.contrib.layers.real_valued_column",
        "tf.contrib.gan",
    }, found
    assert found["tf.contrib.graph_editor"] == ("lib/model.py:1", "none in TensorFlow 2")
    assert found["tf.contrib.learn.Estimator"][0] == "train.py:8"
    assert found["tf.contrib.layers.real_valued_column"][1] == "tf.feature_column.numeric_column"
    assert found["tf.contrib.gan"] == ("train.py:11", "tensorflow-gan")


@pytest.fixture(scope="module")
def refusing_project(tmp_path_factory):
    project = tmp_path_factory.mktemp("refusing_project")
    write_module(
        project / "train.py",
        """
        import sys
        import tensorflow as tf
        import tensorflow.contrib.graph_editor as ge
        import model

        with tf.Session() as session:
            print("TRAINED", session.run(model.loss()))
        if "--edit_graph" in sys.argv:
            ge.reroute_ts([], [])
        """,
    )
    write_module(
        project / "model.py",
        """
        import tensorflow as tf

        def loss():
            if tf.contrib.learn.ModeKeys.INFER != "infer":
                return tf.contrib.learn.DNNClassifier([10], None)
            return tf.reduce_sum(tf.constant([1.0, 2.0]))
        """,
    )
    return project


def test_report_lists_what_the_project_will_be_refused_before_it_runs(refusing_project):
    script = str(refusing_project / "train.py")
    proc = run_program(["-m", "tfest_kit.legacy", "--report", script], timeout=120)
    out = proc.stdout
    assert "TRAINED 3.0" in out, out + proc.stderr
    early, _, after = out.partition("TRAINED 3.0")
    assert "reaches 2 tf.contrib name(s) the runner does not serve" in early, out
    assert re.search(r"tf\.contrib\.graph_editor \(train\.py:4\) +->  none in TensorFlow 2", early)
    assert re.search(r"tf\.contrib\.learn\.DNNClassifier \(model\.py:6\) +->  tf\.estimator", early)
    # The end-of-run report lists what the script did reach: the module it imported.
    assert "tf.contrib.graph_editor" in after and "tf.contrib.learn.DNNClassifier" not in after
    # Without --report, nothing is listed.
    proc = run_program(["-m", "tfest_kit.legacy", script], timeout=120)
    assert "does not serve" not in proc.stdout and "TRAINED 3.0" in proc.stdout


def test_a_refused_module_stops_the_script_where_it_is_used(refusing_project):
    script = str(refusing_project / "train.py")
    proc = run_program(
        ["-m", "tfest_kit.legacy", script, "--edit_graph"], timeout=120, check_exit=1
    )
    assert "TRAINED 3.0" in proc.stdout, proc.stdout + proc.stderr
    assert proc.stderr.count("is not provided by the legacy runner") == 1, proc.stderr
    assert "tf.contrib.graph_editor.reroute_ts is not provided" in proc.stderr, proc.stderr
    assert "TensorFlow 2 has no equivalent of tf.contrib.graph_editor" in proc.stderr


def test_legacy_seq2seq_rnn_decoder_and_losses_as_tf115(tmp_path):
    # A character language model in the TF1 style: a list of per-step inputs through
    # legacy_seq2seq.rnn_decoder under an "rnnlm" scope, sampled with a loop_function.
    write_module(
        tmp_path / "legacy_char_lm.py",
        """
        import tensorflow as tf
        from tensorflow.contrib import legacy_seq2seq, rnn

        def build(inputs, state, cell, loop=None):
            return legacy_seq2seq.rnn_decoder(inputs, state, cell, loop_function=loop,
                                              scope="rnnlm")
        """,
    )
    rng = np.random.RandomState(3)
    steps = [rng.randn(2, 4).astype(np.float32) for _ in range(3)]
    with on_sys_path(tmp_path), Scope(str(tmp_path), build_namespace(Report()), Report()):
        module = importlib.import_module("legacy_char_lm")
        seq2seq = module.legacy_seq2seq
        with tf.Graph().as_default():
            steps = [tf.constant(x) for x in steps]
            cell = module.rnn.LSTMCell(4)
            state = cell.zero_state(2, tf.float32)
            outputs, _ = module.build(steps, state, cell)
            with tf.variable_scope("rnnlm", reuse=True):  # the same variables
                unrolled, _ = tf.nn.static_rnn(cell, steps, initial_state=state)
                fed, prev, s = [], None, state
                for x in steps:
                    out, s = cell(x if prev is None else prev, s)
                    fed.append(out)
                    prev = out
            # Sampling: each output fed back as the next input, with the cell's own variables.
            looped, _ = module.build(steps, state, cell, loop=lambda prev, i: prev)
            names = sorted(v.op.name for v in tf.global_variables() if v.op.name.startswith("r"))
            logits = [tf.constant(rng.randn(2, 5).astype(np.float32)) for _ in range(3)]
            targets = [tf.constant([1, 4]), tf.constant([[0], [2]]), tf.constant([3, 3])]
            weights = [tf.constant([1.0, 0.0])] * 3
            by_example = seq2seq.sequence_loss_by_example(logits, targets, weights)
            mean = seq2seq.sequence_loss(logits, targets, weights)
            with tf.Session() as sess:
                sess.run(tf.global_variables_initializer())
                got, want = sess.run([outputs, unrolled])
                np.testing.assert_allclose(got, want, rtol=1e-5)
                np.testing.assert_allclose(*sess.run([looped, fed]), rtol=1e-5)
                loss, loss_mean, logit_values = sess.run([by_example, mean, logits])
            with pytest.raises(ValueError, match="Lengths of logits, weights, and targets"):
                seq2seq.sequence_loss(logits, targets[:2], weights)
    assert names == ["rnnlm/lstm_cell/bias", "rnnlm/lstm_cell/kernel"]  # TF 1.15's
    log_probs = [v - np.log(np.exp(v).sum(1, keepdims=True)) for v in logit_values]
    first = -(log_probs[0][0, 1] + log_probs[1][0, 0] + log_probs[2][0, 3]) / 3
    np.testing.assert_allclose(loss, [first, 0.0], rtol=1e-5)  # the second weighs 0
    np.testing.assert_allclose(loss_mean, first / 2, rtol=1e-5)
    with pytest.raises(AttributeError, match=r"legacy_seq2seq\.embedding_attention_seq2seq"):
        seq2seq.embedding_attention_seq2seq([], [], None, 10, 10, 8)  # not served: at use


def test_legacy_seq2seq_models_keep_tf115_variable_names():
    ns = build_namespace(Report())
    seq2seq, rnn = ns.contrib.legacy_seq2seq, ns.contrib.rnn
    with tf.Graph().as_default():
        enc = [tf.ones([2, 3]) * i for i in range(3)]
        dec = [tf.ones([2, 3]) * i for i in range(2)]
        basic, _ = seq2seq.basic_rnn_seq2seq(enc, dec, rnn.GRUCell(4))
        tied, _ = seq2seq.tied_rnn_seq2seq(enc, dec, rnn.GRUCell(4))
        names = {v.op.name.rsplit("/gru_cell/", 1)[0] for v in tf.global_variables()}
    # The encoder copies the cell (its own variables); the tied model shares one set.
    assert names == {
        "basic_rnn_seq2seq/rnn",
        "basic_rnn_seq2seq/rnn_decoder",
        "combined_tied_rnn_seq2seq/tied_rnn_seq2seq",
    }
    assert len(basic) == len(tied) == 2 and basic[0].shape.as_list() == [2, 4]


# --- contrib's implementation-module paths, as surveyed projects import them ---------------------


def test_a_library_the_script_puts_on_sys_path_gets_tf1_and_the_batch_norm_port(tmp_path):
    # A DeepFM-style project: example/main.py appends ".." to sys.path and imports the model
    # from there; the model imports batch_norm from contrib's implementation path.
    write_module(
        tmp_path / "fm_model.py",
        """
        import numpy as np
        import tensorflow as tf
        from tensorflow.contrib.layers.python.layers import batch_norm as batch_norm


        class Model(object):
            def __init__(self):
                self.graph = tf.Graph()
                with self.graph.as_default():
                    tf.set_random_seed(1)
                    self.x = tf.placeholder(tf.float32, [None, 4])
                    self.y = tf.placeholder(tf.float32, [None, 1])
                    self.train_phase = tf.placeholder(tf.bool)
                    h = tf.layers.dense(self.x, 8)
                    bn_train = batch_norm(h, decay=0.9, updates_collections=None,
                                          is_training=True, reuse=None, scope="bn_0")
                    bn_infer = batch_norm(h, decay=0.9, updates_collections=None,
                                          is_training=False, reuse=True, scope="bn_0")
                    h = tf.cond(self.train_phase, lambda: bn_train, lambda: bn_infer)
                    out = tf.layers.dense(tf.nn.relu(h), 1)
                    self.loss = tf.losses.mean_squared_error(self.y, out)
                    self.opt = tf.train.AdamOptimizer(0.05).minimize(self.loss)
                    self.sess = tf.Session()
                    self.sess.run(tf.global_variables_initializer())

            def fit(self, x, y, epochs):
                for epoch in range(epochs):
                    feed = {self.x: x, self.y: y, self.train_phase: True}
                    loss, _ = self.sess.run((self.loss, self.opt), feed_dict=feed)
                    if epoch % 10 == 0:
                        print("[%d] train-loss=%.4f" % (epoch + 1, loss))
                feed = {self.x: x, self.y: y, self.train_phase: False}
                return self.sess.run(self.loss, feed_dict=feed)
        """,
    )
    write_module(
        tmp_path / "example" / "main.py",
        """
        import sys
        import numpy as np
        sys.path.append("..")
        from fm_model import Model

        rng = np.random.RandomState(0)
        x = rng.rand(64, 4).astype(np.float32)
        y = x.sum(axis=1, keepdims=True)
        print("eval-loss=%.4f" % Model().fit(x, y, 60))
        """,
    )
    proc = run_program(["-m", "tfest_kit.legacy", "main.py"], cwd=tmp_path / "example")
    losses = [float(v) for v in re.findall(r"train-loss=([\d.]+)", proc.stdout)]
    assert len(losses) == 6 and losses[-1] < losses[0] / 4, proc.stdout
    assert float(re.search(r"eval-loss=([\d.]+)", proc.stdout).group(1)) < losses[0], proc.stdout


def test_contrib_layers_python_layers_serves_the_ports():
    ns = build_namespace(Report())
    python_layers = ns.contrib.layers.python.layers
    assert python_layers.batch_norm is ns.contrib.layers.batch_norm
    assert python_layers.layers.batch_norm is ns.contrib.layers.batch_norm
    assert python_layers.layer_norm is ns.contrib.layers.layer_norm
    assert python_layers.initializers.xavier_initializer is ns.contrib.layers.xavier_initializer


def test_slims_implementation_modules_read_a_detection_dataset(tmp_path):
    # An SSD-style reader: images as JPEG in tf.train.Example, read through slim's dataset
    # provider from contrib's implementation paths.
    with tf.Graph().as_default(), tf.Session() as session:
        jpeg = session.run(tf.image.encode_jpeg(tf.fill([6, 8, 3], tf.constant(200, tf.uint8))))
    with tf.io.TFRecordWriter(str(tmp_path / "voc_000.tfrecord")) as writer:
        for label in (3, 5):
            feature = {
                "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[jpeg])),
                "image/format": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"JPEG"])),
                "image/object/bbox/label": tf.train.Feature(
                    int64_list=tf.train.Int64List(value=[label])
                ),
            }
            example = tf.train.Example(features=tf.train.Features(feature=feature))
            writer.write(example.SerializeToString())
    write_module(
        tmp_path / "legacy_ssd_reader.py",
        """
        import tensorflow as tf
        from tensorflow.contrib.framework.python.ops import variables
        from tensorflow.contrib.slim.python.slim.data import parallel_reader
        slim = tf.contrib.slim


        def files(pattern):
            return parallel_reader.get_data_files(pattern)


        def read(pattern):
            keys = {
                "image/encoded": tf.FixedLenFeature((), tf.string, default_value=""),
                "image/format": tf.FixedLenFeature((), tf.string, default_value="jpeg"),
                "image/object/bbox/label": tf.VarLenFeature(dtype=tf.int64),
                "image/object/class/label": tf.VarLenFeature(dtype=tf.int64),
            }
            handlers = {
                "image": slim.tfexample_decoder.Image("image/encoded", "image/format"),
                "label": slim.tfexample_decoder.BackupHandler(
                    slim.tfexample_decoder.Tensor("image/object/class/label"),  # absent
                    slim.tfexample_decoder.Tensor("image/object/bbox/label"),
                ),
            }
            dataset = slim.dataset.Dataset(
                data_sources=pattern, reader=tf.TFRecordReader, num_samples=2,
                decoder=slim.tfexample_decoder.TFExampleDecoder(keys, handlers),
                items_to_descriptions={},
            )
            provider = slim.dataset_data_provider.DatasetDataProvider(
                dataset, num_readers=1, shuffle=False)
            return provider.get(["image", "label"])


        def gamma():
            return variables.model_variable("gamma", shape=[3], initializer=tf.ones_initializer())
        """,
    )
    pattern = str(tmp_path / "voc_*.tfrecord")
    report = Report()
    with on_sys_path(tmp_path), Scope(str(tmp_path), build_namespace(report), report):
        module = importlib.import_module("legacy_ssd_reader")
        assert module.files(pattern) == [str(tmp_path / "voc_000.tfrecord")]
        with tf.Graph().as_default():
            image, label = module.read(pattern)
            gamma = module.gamma()
            assert image.shape.as_list() == [None, None, 3]
            assert gamma in tf.model_variables()
            with tf.Session() as session:
                session.run(tf.global_variables_initializer())
                coordinator = tf.train.Coordinator()
                threads = tf.train.start_queue_runners(session, coordinator)
                got = sorted(int(session.run(label)[0]) for _ in range(2))
                pixels = session.run(image)
                coordinator.request_stop()
                coordinator.join(threads)
    assert got == [3, 5]
    assert pixels.shape == (6, 8, 3) and abs(float(pixels.mean()) - 200) < 3
    served = report.names(SHIM)
    assert "tf.contrib.slim.python.slim.data.parallel_reader.get_data_files" in served
    assert "tf.contrib.slim.tfexample_decoder.Image" in served
    assert "tf.contrib.framework.python.ops.variables" in served


def test_local_and_global_variables_are_made_as_tf115_made_them(tmp_path):
    # tf_cnn_benchmarks' synthetic input is a local_variable: tf_slim's calls the
    # variable_scope.variable TensorFlow 2 dropped (AttributeError), for every model.
    write_module(
        tmp_path / "legacy_local_variables.py",
        """
        import tensorflow as tf
        from tensorflow.contrib.framework.python.ops import variables
        slim = tf.contrib.slim

        def build():
            return [
                tf.contrib.framework.local_variable(tf.zeros([2, 3]), name="images"),
                slim.local_variable(7, name="count"),
                variables.local_variable(1.5, name="scale"),
                tf.contrib.framework.global_variable(tf.ones([2]), name="seen"),
            ]
        """,
    )
    report = Report()
    with on_sys_path(tmp_path), Scope(str(tmp_path), build_namespace(report), report):
        module = importlib.import_module("legacy_local_variables")
        with tf.Graph().as_default():
            made = module.build()
            assert [v.op.name for v in tf.local_variables()] == ["images", "count", "scale"]
            assert [v.op.name for v in tf.global_variables()] == ["seen"]
            assert not tf.trainable_variables()
            with tf.Session() as session:
                session.run([tf.local_variables_initializer(), tf.global_variables_initializer()])
                values = session.run(made)
    assert values[0].shape == (2, 3) and values[1:3] == [7, 1.5] and list(values[3]) == [1, 1]
    assert "tf.contrib.framework.local_variable" in report.names(SHIM)


def test_a_modules_namespace_holds_every_name_it_serves():
    # google/seq2seq's rnn_cell.py collects every RNNCell class from tf.contrib.rnn.__dict__.
    report = Report()
    rnn = build_namespace(report).contrib.rnn
    cells = {
        value.__name__
        for value in rnn.__dict__.values()
        if inspect.isclass(value) and issubclass(value, rnn.RNNCell)
    }
    assert {"GRUCell", "LSTMCell", "MultiRNNCell", "LayerNormBasicLSTMCell"} <= cells, cells
    assert "tf.contrib.rnn.GRUCell" in report.names()
    # Refused names stay out: the script read the namespace, it used none of them.
    assert "tf.contrib.rnn.GridLSTMCell" not in report.names(MISSING)
    assert vars(rnn) is rnn.__dict__
    # cloudml-samples' census trainer: tf.logging.set_verbosity(tf.logging.__dict__['INFO']).
    ns = build_namespace(Report())
    assert ns.logging.__dict__["INFO"] == tf.logging.INFO


def test_contrib_rnns_implementation_modules_serve_its_names(tmp_path):
    # TF 1.15's `from tensorflow.contrib.rnn.python.ops import rnn` and its siblings.
    write_module(
        tmp_path / "rnn_paths.py",
        """
        import tensorflow as tf
        from tensorflow.contrib.rnn.python.ops import core_rnn_cell, rnn
        from tensorflow.contrib.rnn.python.ops.rnn_cell import LayerNormBasicLSTMCell

        x = tf.placeholder(tf.float32, [2, 5, 3])
        fw, bw = [tf.contrib.rnn.LSTMCell(4)], [tf.contrib.rnn.LSTMCell(4)]
        out, _, _ = rnn.stack_bidirectional_dynamic_rnn(fw, bw, x, dtype=tf.float32)
        print(out.shape, LayerNormBasicLSTMCell is tf.contrib.rnn.LayerNormBasicLSTMCell)
        print(sorted(v.name for v in tf.global_variables())[1])
        try:
            core_rnn_cell._Linear
        except AttributeError as e:
            print(e)
        """,
    )
    proc = run_program(["-m", "tfest_kit.legacy", str(tmp_path / "rnn_paths.py")])
    assert "(2, 5, 8) True" in proc.stdout, proc.stdout + proc.stderr
    assert "stack_bidirectional_rnn/cell_0/bidirectional_rnn/bw/lstm_cell/kernel:0" in proc.stdout
    assert "core_rnn_cell._Linear is not provided" in proc.stdout


def test_contrib_audio_ops_are_tensorflows_own_as_speech_commands_imports_them(tmp_path):
    # TF 1.x's speech_commands/input_data.py (ML-KWS-for-MCU and its forks): TF 1.15's module
    # star-imported gen_audio_ops.
    write_module(
        tmp_path / "audio_features.py",
        """
        import numpy as np
        import tensorflow as tf
        from tensorflow.contrib.framework.python.ops import audio_ops as contrib_audio

        wav = tf.placeholder(tf.float32, [16000, 1])
        decoded = contrib_audio.decode_wav(contrib_audio.encode_wav(wav, 16000), desired_channels=1)
        spectrogram = contrib_audio.audio_spectrogram(
            decoded.audio, window_size=640, stride=640, magnitude_squared=True)
        mfcc = contrib_audio.mfcc(spectrogram, decoded.sample_rate, dct_coefficient_count=10)
        tone = (np.sin(np.arange(16000)[:, None] / 10.0) * 0.5).astype(np.float32)
        with tf.Session() as session:
            audio, rate, out = session.run([decoded.audio, decoded.sample_rate, mfcc], {wav: tone})
        print("rate", rate, "error", float(np.abs(audio - tone).max()) < 1e-4, "mfcc", out.shape)
        try:
            contrib_audio.audio_spectrogram_eager_fallback
        except AttributeError as e:
            print(e)
        """,
    )
    proc = run_program(["-m", "tfest_kit.legacy", str(tmp_path / "audio_features.py")])
    assert "rate 16000 error True mfcc (1, 25, 10)" in proc.stdout, proc.stdout + proc.stderr
    assert "audio_ops.audio_spectrogram_eager_fallback is not provided" in proc.stdout, proc.stdout


def test_contrib_training_trains_with_tf115s_create_train_op_and_train(tmp_path):
    # tensorflow-without-a-phd's planespotting: tf.contrib.training.create_train_op in a model_fn.
    write_module(
        tmp_path / "contrib_train.py",
        """
        import sys
        import numpy as np
        import tensorflow as tf
        from tensorflow.contrib.training.python.training import training

        x = tf.constant(np.random.RandomState(0).rand(16, 3).astype(np.float32))
        emb = tf.get_variable("emb", [3, 3])
        lookup = tf.reduce_sum(tf.nn.embedding_lookup(emb, [0, 2, 1, 2]))  # IndexedSlices
        pred = tf.layers.dense(x, 1, name="dense") + lookup
        loss = tf.losses.mean_squared_error(tf.reduce_sum(x, axis=1, keepdims=True), pred)

        def transform(grads):
            grads = tf.contrib.training.multiply_gradients(grads, {"emb": 0.0})
            return tf.contrib.training.clip_gradient_norms_fn(1.0)(grads)

        train_op = tf.contrib.training.create_train_op(
            loss, tf.train.GradientDescentOptimizer(0.1), transform_grads_fn=transform,
            summarize_gradients=True)
        print(sorted(s.op.name for s in tf.get_collection(tf.GraphKeys.SUMMARIES)))
        with tf.Session() as session:
            session.run(tf.global_variables_initializer())
            emb_before = session.run(emb)
            tf.train.Saver().save(session, sys.argv[1] + "/model.ckpt", global_step=0)
        last = training.train(
            train_op, sys.argv[1], hooks=[tf.train.StopAtStepHook(last_step=3)],
            save_summaries_steps=None)
        emb_after = tf.train.load_variable(sys.argv[1], "emb")
        step = tf.train.load_variable(sys.argv[1], "global_step")
        kept = bool(np.allclose(emb_before, emb_after))
        print("step", step, "loss", type(last).__name__, "emb kept", kept)
        """,
    )
    out = tmp_path / "out"
    proc = run_program(["-m", "tfest_kit.legacy", str(tmp_path / "contrib_train.py"), str(out)])
    # TF 1.15's summary names (tf_slim's training.py is its training.py, moved).
    assert "'summarize_grads/dense/kernel_gradient_norm', 'summarize_grads/emb_gradient'" in (
        proc.stdout
    ), proc.stdout + proc.stderr
    assert "step 3 loss float32 emb kept True" in proc.stdout, proc.stdout + proc.stderr


def test_contrib_v1_heads_average_the_loss_and_take_tf1_optimizers(tmp_path):
    # nlp_estimator_tutorial's CNN / LSTM model_fns: tf.contrib.estimator.binary_classification_head
    # was refused. TF 1.15's contrib heads are the v1 canned heads with SUM_OVER_BATCH_SIZE (the
    # canned Estimators' default, SUM, would log 16 * ln 2 = 11.09 at step 1).
    write_module(
        tmp_path / "heads.py",
        """
        import sys
        import numpy as np
        import tensorflow as tf
        tf.logging.set_verbosity(tf.logging.INFO)

        head = tf.contrib.estimator.binary_classification_head()

        def model_fn(features, labels, mode):
            logits = tf.layers.dense(features["x"], 1, kernel_initializer=tf.zeros_initializer())
            return head.create_estimator_spec(
                features=features, mode=mode, labels=tf.reshape(labels, [-1, 1]), logits=logits,
                optimizer=tf.train.GradientDescentOptimizer(0.5))

        x = np.random.RandomState(0).rand(64, 3).astype(np.float32)
        y = (x.sum(1) > 1.5).astype(np.int64)
        train = tf.estimator.inputs.numpy_input_fn(
            {"x": x}, y, batch_size=16, num_epochs=None, shuffle=False)
        est = tf.estimator.Estimator(model_fn, sys.argv[1] + "/binary")
        est.train(train, steps=5)
        evaluate = tf.estimator.inputs.numpy_input_fn({"x": x}, y, shuffle=False)
        print("metrics", sorted(est.evaluate(evaluate)))
        dnn = tf.contrib.estimator.DNNEstimator(
            head=tf.contrib.estimator.regression_head(), hidden_units=[4],
            feature_columns=[tf.feature_column.numeric_column("x", [3])],
            model_dir=sys.argv[1] + "/dnn")
        dnn.train(train, steps=2)
        poisson = tf.contrib.estimator.poisson_regression_head()
        with tf.Graph().as_default():
            spec = poisson.create_estimator_spec(
                features={}, mode=tf.estimator.ModeKeys.PREDICT, logits=tf.constant([[0.0], [1.0]]))
            with tf.Session() as session:
                predicted = session.run(spec.predictions["predictions"]).ravel()
        print("poisson", [round(float(p), 3) for p in predicted])
        """,
    )
    proc = run_program(["-m", "tfest_kit.legacy", str(tmp_path / "heads.py"), str(tmp_path)])
    output = proc.stdout + proc.stderr
    assert "loss = 0.6931472, step = 1" in output, output
    assert "'accuracy_baseline', 'auc', 'auc_precision_recall', 'average_loss'" in proc.stdout
    assert output.count("step = 1") == 2 and "poisson [1.0, 2.718]" in proc.stdout, output
