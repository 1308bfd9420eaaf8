"""tfest_kit.inputs: builders against hand-checked data, params["batch_size"], error cases."""

from __future__ import annotations

import codecs
import gzip
import logging
import os
import re
import time

import numpy as np
import pandas as pd
import pytest

from tests.conftest import captured_tf_log
from tfest_kit import inputs
from tfest_kit._tf import tf, tf2


def _batches(dataset):
    """All batches of a dataset as nested numpy values."""
    return [tf2.nest.map_structure(lambda t: t.numpy(), b) for b in dataset]


# --------------------------------------------------------------------------- from_arrays


def test_from_arrays_dict_in_order_with_remainder():
    x = np.arange(10, dtype=np.float64).reshape(5, 2)
    y = np.array([0, 1, 0, 1, 1])
    batches = _batches(inputs.from_arrays({"x": x}, y, batch_size=2, shuffle=False)())
    assert [len(labels) for _, labels in batches] == [2, 2, 1]
    assert batches[0][0]["x"].dtype == np.float32  # float64 fed as float32
    np.testing.assert_array_equal(batches[1][0]["x"], [[4, 5], [6, 7]])
    np.testing.assert_array_equal(np.concatenate([b[1] for b in batches]), y)


def test_from_arrays_says_where_a_feature_holds_nan():
    x = np.ones((8, 2), np.float32)
    x[5, 1] = np.nan  # a NaN loss later, for a NanGuardHook to blame on "the input"
    with captured_tf_log(logging.WARNING) as warnings:
        inputs.from_arrays({"x": x, "ok": np.ones(8)}, np.arange(8))
    assert [w for w in warnings if "NaN" in w] == [
        "Feature 'x' holds NaN or inf (first: row 5): fill or drop"
    ]


def test_from_arrays_params_batch_size_wins_and_drop_remainder():
    fn = inputs.from_arrays(
        np.arange(10), np.arange(10), batch_size=4, shuffle=False, drop_remainder=True
    )
    assert [len(b[1]) for b in _batches(fn())] == [4, 4]
    assert [len(b[1]) for b in _batches(fn({"batch_size": 3}))] == [3, 3, 3]
    # A bare array becomes the feature "x"; Estimator-style params without batch_size are fine.
    assert set(_batches(fn({"other": 1}))[0][0]) == {"x"}


def test_from_arrays_pandas_label_column_shuffle_and_epochs():
    frame = pd.DataFrame(
        {"a": [1.0, 2.0, 3.0, 4.0], "city": ["x", "y", "z", "w"], "target": [0, 1, 1, 0]}
    )
    fn = inputs.from_arrays(frame, "target", batch_size=4, shuffle=True, num_epochs=2, seed=1)
    batches = _batches(fn())
    assert len(batches) == 2
    for feats, labels in batches:
        assert set(feats) == {"a", "city"}
        assert sorted(feats["a"].tolist()) == [1.0, 2.0, 3.0, 4.0]  # each epoch sees every row
        pairs = dict(zip(feats["city"].tolist(), labels.tolist()))
        assert pairs == {b"x": 0, b"y": 1, b"z": 1, b"w": 0}  # rows stay aligned when shuffled


def test_from_arrays_refuses_pandas_indexes_that_differ():
    # pandas_input_fn refused them ("Index for x and y are mismatched"); pairing by position
    # trained on other rows' labels without a word.
    frame = pd.DataFrame({"age": [30.0, 10.0, 20.0], "label": [3, 1, 2]})  # label == age / 10
    x = frame[["age"]].sort_values("age")  # index [1, 2, 0]
    with pytest.raises(ValueError, match=r"different indexes.*\[1, 2, 0\].*\[0, 1, 2\]"):
        inputs.from_arrays(x, frame["label"])
    with pytest.raises(ValueError, match=r"labels\.loc\[features\.index\].*reset_index"):
        inputs.from_arrays(x, frame[["label"]])
    feats, labels = _batches(inputs.from_arrays(x, frame["label"].loc[x.index], shuffle=False)())[0]
    assert list(zip(feats["age"].tolist(), labels.tolist())) == [(10.0, 1), (20.0, 2), (30.0, 3)]


def test_from_arrays_features_only_and_repeat_forever():
    fn = inputs.from_arrays({"a": [1, 2, 3]}, batch_size=2, shuffle=False, num_epochs=None)
    first = list(fn().take(4))
    assert isinstance(first[0], dict)
    assert [b["a"].numpy().tolist() for b in first] == [[1, 2], [3, 1], [2, 3], [1, 2]]


def test_from_arrays_errors():
    with pytest.raises(ValueError, match=r"'label' is not in `features` \['a'\]"):
        inputs.from_arrays(pd.DataFrame({"a": [1, 2]}), "label")
    with pytest.raises(ValueError, match="same number"):
        inputs.from_arrays({"a": [1, 2, 3]}, [0, 1])
    with pytest.raises(ValueError, match="batch_size"):
        inputs.from_arrays({"a": [1]}, batch_size=0)
    with pytest.raises(ValueError, match="num_epochs"):
        inputs.from_arrays({"a": [1]}, num_epochs=0)
    with pytest.raises(TypeError, match="features"):
        inputs.from_arrays(42)
    # A pandas string column with a missing value: the message shows the missing value (pandas
    # 3 stores it as NaN).
    with pytest.raises(TypeError, match=r"'city' holds .* Got: (None \(NoneType\)|nan \(float\))"):
        inputs.from_arrays(pd.DataFrame({"city": ["oslo", None]}))


def test_params_batch_size_is_checked_like_the_argument(tmp_path):
    # batch(0) failed inside tf.data naming no argument, and 8.9 quietly became 8.
    fn = inputs.from_arrays({"x": np.arange(6.0)}, np.arange(6) % 2, batch_size=2)
    for bad in (0, -1, 8.9):
        with pytest.raises(
            ValueError, match=rf"`params\['batch_size'\]` must be a positive int.*{bad}"
        ):
            fn({"batch_size": bad})
    assert [len(b[1]) for b in _batches(fn({"batch_size": np.int64(4)}))] == [4, 2]

    def model_fn(features, labels, mode, params):
        loss = tf.reduce_mean(tf.compat.v1.layers.dense(features["x"][:, None], 1))
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    est = tf.estimator.Estimator(model_fn, str(tmp_path), params={"batch_size": 0})
    with pytest.raises(ValueError, match=r"`params\['batch_size'\]`.*Got: 0"):
        est.train(fn, steps=1)


def test_large_arrays_stay_out_of_the_graph_and_checkpoints(tmp_path, monkeypatch):
    # In the graph, 40 MB of arrays made a 99 MB graph.pbtxt, a 166 MB events file and a
    # 40 MB .meta per checkpoint. Above the limit (set low here) they are looked up by row.
    from tfest_kit._tf import estimator

    rng = np.random.RandomState(0)
    x = rng.randn(4000, 64).astype(np.float32)  # 1 MB
    y = (x[:, 0] > 0).astype(np.int64)
    words = np.array([f"w{i}" for i in range(3999)] + ["Köln"])  # and not only ASCII

    def order(fn):
        return [b[1].tolist() for b in _batches(fn())][:3]

    embedded = inputs.from_arrays({"x": x, "w": words}, y, batch_size=16, seed=3)
    monkeypatch.setattr(inputs, "_EMBEDDED_ARRAYS_LIMIT", 100_000)
    looked_up = inputs.from_arrays({"x": x, "w": words}, y, batch_size=16, seed=3)
    assert order(looked_up) == order(embedded)  # the same rows in the same order
    first = inputs.from_arrays({"x": x, "w": words}, y, batch_size=8, shuffle=False)
    feats, labels = _batches(first())[0]
    assert feats["w"].tolist() == [f"w{i}".encode() for i in range(8)]
    np.testing.assert_array_equal(feats["x"], x[:8])
    every = _batches(inputs.from_arrays({"x": x, "w": words}, batch_size=1000, shuffle=False)())
    assert every[-1]["w"][-2:].tolist() == [b"w3998", "Köln".encode()]

    def model_fn(features, labels, mode):
        logits = tf.layers.dense(features["x"], 2)
        loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
        train_op = tf.train.AdamOptimizer(0.05).minimize(loss, tf.train.get_global_step())
        return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    model_dir = tmp_path / "model"
    est = estimator.Estimator(model_fn, str(model_dir))
    train_fn = inputs.from_arrays({"x": x}, y, batch_size=32, num_epochs=None, seed=0)
    est.train(train_fn, max_steps=50)
    assert est.evaluate(inputs.from_arrays({"x": x}, y, shuffle=False))["loss"] < 0.3
    meta = model_dir / "model.ckpt-50.meta"
    assert meta.stat().st_size < x.nbytes // 10, meta.stat().st_size


# --------------------------------------------------------------------------- from_csv

CSV = "sepal,petal,kind,species\n5.1,1.4,a,0\n4.9,1.3,b,1\n6.2,4.5,a,2\n5.8,,b,1\n"


@pytest.fixture
def csv_dir(tmp_path):
    (tmp_path / "part-0.csv").write_text(CSV)
    (tmp_path / "part-1.csv").write_text("sepal,petal,kind,species\n7.0,6.0,c,2\n")
    return tmp_path


def test_from_csv_types_values_and_missing_fields(csv_dir):
    fn = inputs.from_csv(
        str(csv_dir / "part-0.csv"),
        label_name="species",
        shuffle=False,
        batch_size=10,
        column_defaults={"petal": -1.0},
    )
    [(feats, labels)] = _batches(fn())
    assert set(feats) == {"sepal", "petal", "kind"}
    assert feats["sepal"].dtype == np.float32 and labels.dtype == np.int32
    np.testing.assert_allclose(feats["sepal"], [5.1, 4.9, 6.2, 5.8], rtol=1e-6)
    np.testing.assert_allclose(feats["petal"], [1.4, 1.3, 4.5, -1.0], rtol=1e-6)
    assert feats["kind"].tolist() == [b"a", b"b", b"a", b"b"]
    np.testing.assert_array_equal(labels, [0, 1, 2, 1])


def test_from_csv_glob_select_columns_params_and_no_header(csv_dir, tmp_path):
    fn = inputs.from_csv(
        str(csv_dir / "part-*.csv"),
        label_name="species",
        shuffle=True,
        select_columns=["petal", "species"],
        seed=3,
    )
    batches = _batches(fn({"batch_size": 2}))
    assert [len(b[1]) for b in batches] == [2, 2, 1]
    assert all(set(f) == {"petal"} for f, _ in batches)
    assert sorted(np.concatenate([b[1] for b in batches]).tolist()) == [0, 1, 1, 2, 2]

    plain = tmp_path / "plain.txt"
    plain.write_text("1;2\n3;4\n")
    fn = inputs.from_csv(str(plain), ["p", "q"], "q", header=False, field_delim=";", shuffle=False)
    [(feats, labels)] = _batches(fn())
    assert feats["p"].tolist() == [1, 3] and labels.tolist() == [2, 4]


def test_from_csv_says_when_header_true_skips_a_row(tmp_path):
    # Column names given, header=True (the default) on a file without one: its first row was
    # dropped without a word. header=False on a file with one is refused (make_csv_dataset
    # then typed every column as text).
    path = tmp_path / "rows.csv"
    path.write_text("".join(f"{i}.5,{i}\n" for i in range(5)))
    with captured_tf_log(logging.WARNING) as warnings:
        [(features, _)] = _batches(inputs.from_csv(str(path), ["a", "y"], "y", shuffle=False)())
    assert features["a"].tolist() == [1.5, 2.5, 3.5, 4.5]
    [said] = [w for w in warnings if "header=True skips" in w]
    assert "rows.csv" in said and "['0.5', '0']" in said and "header=False" in said
    with captured_tf_log(logging.WARNING) as warnings:
        fn = inputs.from_csv(str(path), ["a", "y"], "y", header=False, shuffle=False)
        assert len(_batches(fn())[0][1]) == 5
        named = tmp_path / "named.csv"  # a header whose names are numbers is not a row
        named.write_text("a,y\n1,0\n")
        inputs.from_csv(str(named), ["p", "q"], "q")
    assert not [w for w in warnings if "header=True skips" in w], warnings
    with pytest.raises(ValueError, match=r"named\.csv starts with a header line, \['a', 'y'\]"):
        inputs.from_csv(str(named), ["a", "y"], "y", header=False)


def test_from_csv_gzip(tmp_path):
    path = tmp_path / "data.csv.gz"
    with gzip.open(path, "wt") as handle:
        handle.write(CSV)
    for compression in ("GZIP", "gzip"):  # "gzip": a UnicodeDecodeError from the scan before
        fn = inputs.from_csv(str(path), label_name="species", compression=compression, shuffle=0)
        [(_, labels)] = _batches(fn())
        assert labels.tolist() == [0, 1, 2, 1]


def test_from_csv_errors_are_the_official_readers(csv_dir):
    with pytest.raises(ValueError, match=r"`label_name`.*'sepal', 'petal', 'kind', 'species'"):
        inputs.from_csv(str(csv_dir / "part-0.csv"), label_name="label")()
    with pytest.raises(ValueError, match=r"No files match.*nothing-\*\.csv"):
        inputs.from_csv(str(csv_dir / "nothing-*.csv"))()
    with pytest.raises(ValueError, match=r"`column_defaults`.*\['sepals'\]"):
        inputs.from_csv(str(csv_dir / "part-0.csv"), column_defaults={"sepals": 0.0})
    with pytest.raises(ValueError, match="batch_size"):
        inputs.from_csv(str(csv_dir / "part-0.csv"), batch_size=0)


@pytest.mark.parametrize("reader", ["csv", "tfrecord"])
def test_a_pattern_of_a_list_that_matches_no_file_is_an_error(tmp_path, reader):
    # The official readers glob each and read what matched: a misspelt file was left out.
    if reader == "csv":
        (tmp_path / "a.csv").write_text("x,y\n1,0\n")
        make = lambda paths: inputs.from_csv(paths, label_name="y")  # noqa: E731
    else:
        inputs.write_tfrecord(ROWS, tmp_path / "a.csv")
        make = lambda paths: inputs.from_tfrecord(paths, SPEC, "label")  # noqa: E731
    missing = str(tmp_path / "b.csv")
    with pytest.raises(FileNotFoundError, match=r"No file matches '.*b\.csv' of `file_pattern`"):
        make([str(tmp_path / "a.csv"), missing])()
    make([str(tmp_path / "a.csv")])()


def test_files_in_a_directory_named_with_glob_characters_are_read(tmp_path):
    # TensorFlow globs every path: "lr[0.1]/train.csv" matched no file ("No files match").
    sweep = tmp_path / "lr[0.1]"
    sweep.mkdir()
    (sweep / "train.csv").write_text("x,y\n1,0\n2,1\n")
    for pattern in (sweep / "train.csv", f"{sweep}/*.csv"):
        [(feats, labels)] = _batches(inputs.from_csv(pattern, label_name="y", shuffle=False)())
        assert feats["x"].tolist() == [1, 2] and labels.tolist() == [0, 1]
    inputs.write_tfrecord(ROWS, sweep / "data.tfrecord", num_shards=2)
    fn = inputs.from_tfrecord(f"{sweep}/data.tfrecord-*", {"age": SPEC["age"]}, shuffle=False)
    assert sorted(np.concatenate([b["age"] for b in _batches(fn())]).tolist()) == [25, 30, 41]


# --------------------------------------------------------------------------- TFRecord

ROWS = [
    {"age": 30, "income": 1.5, "city": "oslo", "scores": [1.0, 2.0], "label": 0},
    {"age": 41, "income": 2.5, "city": "rome", "scores": [3, 4], "label": 1},
    {"age": 25, "income": 3, "city": "lima", "scores": [5.0, 6.0], "label": 1},
]
SPEC = {
    "age": tf.io.FixedLenFeature([], tf.int64),
    "income": tf.io.FixedLenFeature([], tf.float32),
    "city": tf.io.FixedLenFeature([], tf.string),
    "scores": tf.io.FixedLenFeature([2], tf.float32),
    "label": tf.io.FixedLenFeature([], tf.int64),
}


def test_write_then_read_tfrecord_shards(tmp_path):
    paths = inputs.write_tfrecord(ROWS, tmp_path / "out" / "data.tfrecord", num_shards=2)
    assert [p.rsplit("/", 1)[1] for p in paths] == [
        "data.tfrecord-00000-of-00002",
        "data.tfrecord-00001-of-00002",
    ]
    fn = inputs.from_tfrecord(
        str(tmp_path / "out" / "data.tfrecord-*"), SPEC, "label", shuffle=False, batch_size=8
    )
    [(feats, labels)] = _batches(fn())
    # Round-robin: shard 0 holds rows 0 and 2, shard 1 holds row 1.
    by_age = {int(a): i for i, a in enumerate(feats["age"])}
    assert set(by_age) == {30, 41, 25}
    row = by_age[41]
    assert feats["city"][row] == b"rome" and labels[row] == 1
    np.testing.assert_allclose(feats["scores"][row], [3.0, 4.0])  # ints promoted to floats
    np.testing.assert_allclose(sorted(feats["income"]), [1.5, 2.5, 3.0])
    assert "label" not in feats


def test_tfrecord_gzip_params_batch_and_varlen(tmp_path):
    rows = [{"tokens": ["a", "b", "c"][: i % 3 + 1], "y": i} for i in range(6)]
    [path] = inputs.write_tfrecord(rows, tmp_path / "v.tfr", compression="GZIP")
    spec = {"tokens": tf.io.VarLenFeature(tf.string), "y": tf.io.FixedLenFeature([], tf.int64)}
    fn = inputs.from_tfrecord(
        path, spec, "y", compression="gzip", shuffle=False, drop_remainder=True
    )
    batches = list(fn({"batch_size": 4}))
    assert len(batches) == 1
    feats, labels = batches[0]
    assert labels.numpy().tolist() == [0, 1, 2, 3]
    assert isinstance(feats["tokens"], tf2.SparseTensor)
    assert feats["tokens"].dense_shape.numpy().tolist() == [4, 3]


def test_tfrecord_errors(tmp_path):
    [path] = inputs.write_tfrecord(ROWS, tmp_path / "d.tfr")
    with pytest.raises(ValueError, match=r"`label_key`.*target"):
        inputs.from_tfrecord(path, SPEC, "target")()
    with pytest.raises(TypeError, match=r"Row 1, feature 'a'"):
        inputs.write_tfrecord([{"a": 1}, {"a": "x"}], tmp_path / "bad.tfr")
    with pytest.raises(TypeError, match=r"Row 0, feature 'a'"):
        inputs.write_tfrecord([{"a": {"b": 1}}], tmp_path / "bad.tfr")
    with pytest.raises(ValueError, match="num_shards"):
        inputs.write_tfrecord(ROWS, tmp_path / "x.tfr", num_shards=0)


def test_write_tfrecord_replaces_whole_files_and_leaves_no_partial_one(tmp_path):
    # A task of a second run into the same directory rewrote the shards in place: the first
    # run's reader saw a half-written file ("corrupted record").
    path = tmp_path / "d.tfr"
    first = inputs.write_tfrecord(ROWS, path, num_shards=2)
    inodes = [os.stat(p).st_ino for p in first]
    with open(first[0], "rb") as reader:  # a reader of the first run, as it was
        assert inputs.write_tfrecord(ROWS, path, num_shards=2) == first
        assert reader.read() and [os.stat(p).st_ino for p in first] != inodes
    assert sorted(os.listdir(tmp_path)) == sorted(os.path.basename(p) for p in first)
    # A failed write (here: the second shard's name is a directory) leaves no partial file.
    os.remove(first[1])
    os.mkdir(first[1])
    with pytest.raises(tf.errors.OpError):
        inputs.write_tfrecord(ROWS, path, num_shards=2)
    assert sorted(os.listdir(tmp_path)) == sorted(os.path.basename(p) for p in first)
    assert len(list(tf2.data.TFRecordDataset(first[0]))) == 2
    with pytest.raises(IsADirectoryError, match="must be a file name, not a directory"):
        inputs.write_tfrecord(ROWS, tmp_path)  # was ".partial-…; Is a directory"


def test_write_tfrecord_removes_an_earlier_writes_other_shards(tmp_path):
    # Rewritten with another num_shards, the old shards stayed: "d.tfr-*" read both writes.
    base = tmp_path / "lr[0.1]"  # a glob character in the path: listed, not globbed
    base.mkdir()
    path = base / "d.tfr"
    old = inputs.write_tfrecord(ROWS * 4, path, num_shards=4)
    (base / "d.tfr.bak").write_text("kept")
    (base / "e.tfr-00000-of-00002").write_text("kept")
    with captured_tf_log(logging.WARNING) as warnings:
        new = inputs.write_tfrecord(ROWS, path, num_shards=2, compression="gzip")
    assert sorted(os.listdir(base)) == sorted(
        ["d.tfr.bak", "e.tfr-00000-of-00002", *map(os.path.basename, new)]
    )
    [said] = [w for w in warnings if "removed" in w]
    assert all(p in said for p in old) and "an earlier write" in said
    records = tf2.data.TFRecordDataset(new, compression_type="GZIP")
    assert len(list(records)) == len(ROWS)
    with captured_tf_log(logging.WARNING) as warnings:
        inputs.write_tfrecord(ROWS, path)  # one file: the two shards go
    assert sorted(os.listdir(base)) == ["d.tfr", "d.tfr.bak", "e.tfr-00000-of-00002"]


# --------------------------------------------------------------------------- with an Estimator


def test_estimator_trains_from_csv_and_passes_params(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 2))
    y = (x[:, 0] > 0).astype(int)
    lines = ["u,v,y"] + [f"{a:.4f},{b:.4f},{c}" for (a, b), c in zip(x, y)]
    (tmp_path / "train.csv").write_text("\n".join(lines) + "\n")
    seen = []

    def model_fn(features, labels, mode, params):
        seen.append(features["u"].shape[0])
        net = tf.stack([features["u"], features["v"]], axis=1)
        logits = tf2.keras.layers.Dense(2)(net)
        loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
        train_op = tf.train.AdamOptimizer(0.1).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    train_fn = inputs.from_csv(
        str(tmp_path / "train.csv"),
        label_name="y",
        num_epochs=None,
        batch_size=8,
    )
    est = tf.estimator.Estimator(model_fn, str(tmp_path / "m"), params={"batch_size": 16})
    est.train(train_fn, steps=20)
    assert seen == [16]  # static batch dimension from params (repeated: full batches)
    assert est.get_variable_value("global_step") == 20


# --------------------------------------------------------------------------- bad files, named


def _network(features, mode, params):
    columns = [
        tf.cast(v if v.shape.rank == 2 else v[:, None], tf.float32) for v in features.values()
    ]
    return tf2.keras.layers.Dense(3)(tf.concat(columns, 1))


def _estimator(tmp_path):
    from tfest_kit import model_fn, tpu

    return tpu.TPUEstimator(
        model_fn.classifier(_network, 3),
        str(tmp_path / "model"),
        use_tpu=False,
        train_batch_size=8,
        eval_batch_size=8,
    )


GOOD_ROWS = "a,b,c,y\n" + "1.5,2,3,0\n" * 120  # past the 100 rows make_csv_dataset types from


@pytest.mark.parametrize(
    "bad_row, where",
    [
        ("1.5,2\n", r"bad\.csv:122: 2 fields.*4 columns.*no field for column 'c'.*empty field"),
        ("1.5,2,3,0,9\n", r"bad\.csv:122: 5 fields.*too many fields.*quote"),
        ("1.5,abc,3,0\n", r"bad\.csv:122, column 'b': 'abc' is not a valid int32.*column_defaults"),
        ("1.5,2,3,3000000000\n", r"bad\.csv:122, column 'y': '3000000000' is not a valid int32"),
        ("1_5,2,3,0\n", r"bad\.csv:122, column 'a': '1_5' is not a valid float"),  # Python's
        ("\u0661,2,3,0\n", r"bad\.csv:122, column 'a': '\u0661' is not a valid float"),
    ],
)
def test_a_bad_csv_row_is_named_by_file_line_and_column(tmp_path, bad_row, where):
    # TensorFlow said "Expect 4 fields but have 2 in record" or "Field 1 in record is not a
    # valid int32: abc": no file, line or column.
    (tmp_path / "bad.csv").write_text(GOOD_ROWS + bad_row + "1.5,2,3,1\n")
    fn = inputs.from_csv(str(tmp_path / "bad.csv"), label_name="y", shuffle=False)
    est = _estimator(tmp_path)
    with pytest.raises(tf.errors.InvalidArgumentError, match=where) as info:
        est.train(fn, max_steps=100)
    assert isinstance(info.value, inputs.InputFileError)
    assert "[TensorFlow: " in str(info.value)  # TensorFlow's own line is kept
    with pytest.raises(inputs.InputFileError, match=where):  # evaluate says so too
        est.evaluate(fn)


def test_a_bad_row_among_the_rows_types_are_inferred_from_is_named(tmp_path):
    (tmp_path / "a.csv").write_text("a,b,c,y\n1,2,3,0\n\n1,2,3,1\n")
    with pytest.raises(ValueError, match=r"a\.csv:3: 0 fields.*remove blank lines"):
        inputs.from_csv(str(tmp_path / "a.csv"), label_name="y")()
    (tmp_path / "b.csv").write_text("a,b,c,y\n1,2,3,0\n1,,3\n")
    with pytest.raises(ValueError, match=r"b\.csv:3: 3 fields.*no field for column 'y'"):
        inputs.from_csv(str(tmp_path / "b.csv"), column_defaults={"a": 0.0})


def test_a_number_column_read_as_text_for_one_stray_value_names_it(tmp_path):
    # The model said "Cast string to float is not supported" (or a feature column's dtype
    # error): the column was typed as text from the first 100 rows, for one "?" (or "nan",
    # "inf": make_csv_dataset's guess takes only finite numbers, and -inf).
    rows = [f"{i},{i / 2},{i % 3},w{i},{i % 2}" for i in range(30)]
    rows[7], rows[9] = "7,?,1,w7,1", "9,4.5,nan,w9,1"
    (tmp_path / "q.csv").write_text("a,b,c,word,y\n" + "\n".join(rows) + "\n")
    with captured_tf_log(logging.WARNING) as lines:
        fn = inputs.from_csv(str(tmp_path / "q.csv"), label_name="y", na_value="NA")
    said = [line for line in lines if "read as text" in line]  # not the text column "word"
    assert len(said) == 2, lines
    assert re.search(r"Column 'b' is read as text: .*q\.csv:9, column 'b': '\?' is not", said[0])
    assert re.search(r"Column 'c' is read as text: .*q\.csv:11, column 'c': 'nan' is not", said[1])
    assert "set the column's default in column_defaults" in said[0], said
    nan_read = {"c": 0.0}  # given a float default, CsvDataset reads "nan"
    for fixed in (
        dict(column_defaults={"b": 0.0, **nan_read}),
        dict(na_value="?", column_defaults=nan_read),
    ):
        with captured_tf_log(logging.WARNING) as lines:
            fn = inputs.from_csv(str(tmp_path / "q.csv"), label_name="y", **fixed)
        assert not [line for line in lines if "read as text" in line], lines
    assert _batches(fn())[0][0]["b"].dtype == np.float32


def test_column_names_that_do_not_match_the_header_are_named(tmp_path):
    # Each row was blamed: "5 fields where the file has 4 columns ... remove blank lines".
    (tmp_path / "h.csv").write_text("a,b,c,d,y\n1,2,3,4,0\n")
    with pytest.raises(ValueError, match=r"header has 5 columns.*`column_names` names 4"):
        inputs.from_csv(str(tmp_path / "h.csv"), column_names=["a", "b", "c", "y"], label_name="y")


def test_a_required_csv_field_left_empty_is_named(tmp_path):
    (tmp_path / "r.csv").write_text("a,y\n1,0\n,1\n")
    fn = inputs.from_csv(
        str(tmp_path / "r.csv"), label_name="y", column_defaults=[tf.float32, 0], shuffle=False
    )
    with pytest.raises(inputs.InputFileError, match=r"r\.csv:3, column 'a': '' is empty"):
        _estimator(tmp_path).train(fn, max_steps=5)


def test_an_empty_label_field_is_named_not_read_as_class_0(tmp_path):
    (tmp_path / "r.csv").write_text("a,y\n" + "1.5,0\n" * 20 + "2.5,\n")
    fn = inputs.from_csv(str(tmp_path / "r.csv"), label_name="y", shuffle=False)
    with pytest.raises(inputs.InputFileError, match=r"r\.csv:22, column 'y': '' is empty"):
        _estimator(tmp_path).train(fn, max_steps=5)


def test_a_header_only_csv_says_so(tmp_path):
    # make_csv_dataset typed every column as text from no row: "`labels` must be integer
    # class ids ... Got: dtype string" came from the model_fn.
    (tmp_path / "h.csv").write_text("a,b,c,y\n")
    with pytest.raises(ValueError, match=r"h\.csv: no rows after the header line"):
        fn = inputs.from_csv(str(tmp_path / "h.csv"), label_name="y")  # infers the label's type
        _estimator(tmp_path).train(fn, max_steps=5)
    # Given the types, the dataset is empty: the training says it took no step.
    fn = inputs.from_csv(str(tmp_path / "h.csv"), label_name="y", column_defaults=[0.0] * 3 + [0])
    with pytest.raises(ValueError, match=r"`input_fn` yielded no batch"):
        _estimator(tmp_path).train(fn, max_steps=5)
    (tmp_path / "text.csv").write_text("word,y\nabc,def\n")  # text columns with rows are fine
    assert len(_batches(inputs.from_csv(str(tmp_path / "text.csv"), label_name="y")())) == 1


def test_a_gzip_csv_read_without_compression_names_the_fix(tmp_path):
    with gzip.open(tmp_path / "d.csv.gz", "wt") as handle:
        handle.write(CSV)
    with pytest.raises(ValueError, match=r"d\.csv\.gz is GZIP-compressed.*compression='GZIP'"):
        inputs.from_csv(str(tmp_path / "d.csv.gz"), label_name="species")()
    # The other way round, and a binary file: gzip's BadGzipFile, a UnicodeDecodeError, no file.
    (tmp_path / "plain.csv").write_text(CSV)
    with pytest.raises(ValueError, match=r"plain\.csv is not GZIP-compressed: leave `compr"):
        inputs.from_csv(str(tmp_path / "plain.csv"), label_name="species", compression="GZIP")
    (tmp_path / "binary.csv").write_bytes(b"a,b\n\x8a\xff\x00,1\n")
    with pytest.raises(ValueError, match=r"binary\.csv is not a CSV file: it is not UTF-8"):
        inputs.from_csv(str(tmp_path / "binary.csv"), label_name="b")


def test_a_csv_with_a_byte_order_mark_another_delimiter_or_too_few_defaults(tmp_path):
    # The mark went into the first column's name ("\ufeffa"); a ';' file was one column
    # ("`label_name` provided must be one of the columns: ['a;b;y']"); two defaults for three
    # columns dropped the last one: "KeyError: 'y'".
    marked = tmp_path / "bom.csv"
    marked.write_bytes(codecs.BOM_UTF8 + b"a,b,y\n1,2,0\n3,4,1\n")
    [(features, labels)] = _batches(inputs.from_csv(str(marked), label_name="y", shuffle=False)())
    assert set(features) == {"a", "b"} and labels.tolist() == [0, 1]
    (tmp_path / "semi.csv").write_text("a;b;y\n1;2;0\n")
    with pytest.raises(ValueError, match=r"semi\.csv: its header 'a;b;y' is one column.*=';'"):
        inputs.from_csv(str(tmp_path / "semi.csv"), label_name="y")
    with pytest.raises(ValueError, match=r"`column_defaults` has 2 entries for the 3 columns"):
        inputs.from_csv(str(marked), label_name="y", column_defaults=[0.0, 0])


def _records(tmp_path, name, rows=20, **kw):
    return inputs.write_tfrecord(
        [{"a": float(i), "b": [1.0, 2.0], "y": i % 3} for i in range(rows)], tmp_path / name, **kw
    )[0]


_SPEC = {
    "a": tf.io.FixedLenFeature([], tf.float32),
    "b": tf.io.FixedLenFeature([2], tf.float32),
    "y": tf.io.FixedLenFeature([], tf.int64),
}


def test_a_gzip_tfrecord_read_without_compression_names_the_fix(tmp_path):
    # TensorFlow said "corrupted record at 0 (Is this even a TFRecord file?)".
    path = _records(tmp_path, "g.tfr", compression="GZIP")
    est = _estimator(tmp_path)
    with pytest.raises(tf.errors.DataLossError, match=r"g\.tfr: record 0.*compression='GZIP'"):
        est.train(inputs.from_tfrecord(path, _SPEC, "y"), max_steps=5)
    with pytest.raises(inputs.InputFileError, match=r"not-compressed: pass compression=None"):
        est.train(inputs.from_tfrecord(_records(tmp_path, "p.tfr"), _SPEC, "y", compression="GZIP"))
    est.train(inputs.from_tfrecord(path, _SPEC, "y", compression="GZIP"), max_steps=5)


# The cut-header check beside the reading took a text file's bytes for a record length and died
# seeking past any file size ("Exception in thread ... OSError: [Errno 22]").
@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_truncated_tfrecord_names_the_record(tmp_path):
    path = _records(tmp_path, "t.tfr")
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[:-10])  # the last record cut short
    fn = inputs.from_tfrecord(path, _SPEC, "y", shuffle=False, num_epochs=None)
    with pytest.raises(inputs.InputFileError, match=r"t\.tfr: record 19 cannot be read.*again"):
        _estimator(tmp_path).train(fn, max_steps=50)
    (tmp_path / "t.csv").write_text("a,b,y\n1.0,2.0,0\n" * 30)  # "damaged" before: not TFRecord
    fn = inputs.from_tfrecord(str(tmp_path / "t.csv"), _SPEC, "y", shuffle=False)
    with pytest.raises(inputs.InputFileError, match=r"t\.csv: .*not a TFRecord file but text"):
        _estimator(tmp_path).train(fn, max_steps=50)
    time.sleep(0.5)  # the check runs beside the reading


def test_a_tfrecord_cut_inside_a_record_header_is_said_once(tmp_path):
    # TensorFlow's reader takes a cut header for the end: 10 of 20 records, without a word.
    path = _records(tmp_path, "h.tfr")
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[: len(data) // 2 + 5])  # 10 records of the same length, 5 bytes of one more
    with captured_tf_log(logging.WARNING) as warnings:
        for _ in range(2):  # once per file version, not per input_fn call
            fn = inputs.from_tfrecord(path, _SPEC, "y", shuffle=False, batch_size=1)
            assert len(_batches(fn())) == 10
        time.sleep(0.5)  # the check runs beside the reading
    [said] = [w for w in warnings if "cut short" in w]
    assert f"{path} is cut short inside record 10" in said and "the 10 whole records" in said


def test_a_record_that_does_not_fit_the_spec_is_named(tmp_path):
    rows = [{"a": 1.0, "b": [1.0, 2.0], "y": 0}] * 1500 + [{"a": 1.0, "b": [1.0], "y": 1}]
    [path] = inputs.write_tfrecord(rows, tmp_path / "s.tfr")
    fn = inputs.from_tfrecord(path, _SPEC, "y", shuffle=False)
    with pytest.raises(
        tf.errors.InvalidArgumentError, match=r"s\.tfr: record 1500, feature 'b'.*`feature_spec`"
    ):
        _estimator(tmp_path).train(fn, max_steps=500)


def test_a_good_run_scans_no_file(tmp_path, monkeypatch):
    # The scans run only after a failure: the normal path is TensorFlow's alone.
    def no_scan(*args):
        raise AssertionError(f"scanned: {args}")

    monkeypatch.setattr(inputs, "_csv_problem", no_scan)
    monkeypatch.setattr(inputs, "_tfrecord_problem", no_scan)
    (tmp_path / "ok.csv").write_text(GOOD_ROWS)
    est = _estimator(tmp_path)
    est.train(inputs.from_csv(str(tmp_path / "ok.csv"), label_name="y"), max_steps=3)
    est.train(inputs.from_tfrecord(_records(tmp_path, "ok.tfr"), _SPEC, "y"), max_steps=6)
    assert est.evaluate(inputs.from_tfrecord(_records(tmp_path, "ok.tfr"), _SPEC, "y"))


# --------------------------------------------------------------------------- several files


def _class_shards(tmp_path, kind, classes=4, rows=64):
    """One file per class, rows numbered across the files: file c holds rows c*rows …."""
    paths = []
    for c in range(classes):
        ids = range(c * rows, (c + 1) * rows)
        if kind == "csv":
            path = tmp_path / f"part-{c}.csv"
            path.write_text("id,label\n" + "".join(f"{i},{c}\n" for i in ids))
            paths.append(str(path))
        else:
            rows_c = [{"id": i, "label": c} for i in ids]
            paths.append(inputs.write_tfrecord(rows_c, tmp_path / f"part-{c}.tfrecord")[0])
    return paths


_ID_SPEC = {
    "id": tf.io.FixedLenFeature([], tf.int64),
    "label": tf.io.FixedLenFeature([], tf.int64),
}


def _build(kind, paths, **kw):
    if kind == "csv":
        return inputs.from_csv(paths, label_name="label", **kw)
    return inputs.from_tfrecord(paths, _ID_SPEC, "label", **kw)


@pytest.mark.parametrize("kind", ["csv", "tfrecord"])
def test_shuffling_mixes_files_in_an_order_the_seed_fixes(tmp_path, kind):
    # from_tfrecord read the files one after another (TFRecordDataset's AUTOTUNE in TF 2.15):
    # with a file per class, the batches held one class each. from_csv's parallel reads came
    # back in a different order each time, whatever the seed.
    paths = _class_shards(tmp_path, kind)
    fn = _build(kind, paths, shuffle=True, seed=7, shuffle_buffer=16, batch_size=16)
    first = _batches(fn())
    classes_per_batch = [len(set(labels.tolist())) for _, labels in first[:8]]
    assert min(classes_per_batch) >= 2, classes_per_batch
    assert sorted(np.concatenate([f["id"] for f, _ in first]).tolist()) == list(range(256))
    for _ in range(3):
        again = _batches(fn())
        assert all((a[0]["id"] == b[0]["id"]).all() for a, b in zip(first, again))


@pytest.mark.parametrize("kind", ["csv", "tfrecord"])
def test_without_a_seed_runconfigs_graph_seed_fixes_the_order(tmp_path, kind):
    # Under Estimator the usual seed is RunConfig(tf_random_seed=…), the graph's: parallel
    # reads allowed out of order gave another order in every graph.
    fn = _build(kind, _class_shards(tmp_path, kind), shuffle=True, batch_size=16)

    def order():
        with tf.Graph().as_default():
            tf.set_random_seed(42)
            batch = tf.data.make_one_shot_iterator(fn()).get_next()
            with tf.Session() as session:
                return [session.run(batch)[1].tolist() for _ in range(6)]

    first = order()
    assert all(order() == first for _ in range(3))


# ------------------------------------------------ why numpy_input_fn is not used


def test_official_numpy_input_fn_gives_queue_tensors_without_static_batches():
    # numpy_input_fn still ships, but feeds through queue runners: no Dataset (which
    # TPUEstimator needs) and no drop_remainder, so the batch size is never static.
    x, y = np.arange(20, dtype=np.float32).reshape(10, 2), np.arange(10)
    with tf.Graph().as_default():
        feats, _ = tf.estimator.inputs.numpy_input_fn({"x": x}, y, batch_size=4, shuffle=False)()
        assert not isinstance(feats, tf2.data.Dataset)
        assert feats["x"].shape.as_list() == [None, 2]
        assert tf.get_collection(tf.GraphKeys.QUEUE_RUNNERS)
    fn = inputs.from_arrays({"x": x}, y, batch_size=4, shuffle=False, drop_remainder=True)
    assert fn().element_spec[0]["x"].shape.as_list() == [4, 2]
