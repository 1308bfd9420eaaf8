"""tfest_kit.inputs: builders against hand-checked data, params["batch_size"], error cases."""

from __future__ import annotations

import gzip
import shutil
import warnings
import zlib

import numpy as np
import pandas as pd
import pytest

from tfest_kit import TfestKitError, inputs
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
    with pytest.raises(inputs.DataError, match=r"'label'.*columns are: \['a'\]"):
        inputs.from_arrays(pd.DataFrame({"a": [1, 2]}), "label")
    with pytest.raises(ValueError, match="same number"):
        inputs.from_arrays({"a": [1, 2, 3]}, [0, 1])
    with pytest.raises(ValueError, match="batch_size"):
        inputs.from_arrays({"a": [1]}, batch_size=0)
    with pytest.raises(ValueError, match="num_epochs"):
        inputs.from_arrays({"a": [1]}, num_epochs=0)
    with pytest.raises(TypeError, match="features"):
        inputs.from_arrays(42)
    # A pandas string column with a missing value: the message shows the missing value.
    with pytest.raises(TypeError, match=r"'city' holds .* Got: None \(NoneType\)"):
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
        select_columns=["petal"],
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


def test_from_csv_gzip(tmp_path):
    path = tmp_path / "data.csv.gz"
    with gzip.open(path, "wt") as handle:
        handle.write(CSV)
    fn = inputs.from_csv(str(path), label_name="species", compression="GZIP", shuffle=False)
    [(_, labels)] = _batches(fn())
    assert labels.tolist() == [0, 1, 2, 1]


def test_from_csv_errors_name_pattern_file_line_and_columns(csv_dir):
    with pytest.raises(inputs.DataError, match=r"'.*nothing-\*\.csv' matches no file.*part-0\.csv"):
        inputs.from_csv(str(csv_dir / "nothing-*.csv"))
    with pytest.raises(inputs.DataError, match=r"does not exist"):
        inputs.from_csv(str(csv_dir / "missing_dir" / "*.csv"))
    with pytest.raises(inputs.DataError, match=r"'label'.*\['sepal', 'petal', 'kind', 'species'\]"):
        inputs.from_csv(str(csv_dir / "part-0.csv"), label_name="label")
    bad = csv_dir / "bad.csv"
    bad.write_text("a,b,c\n1,2,3\n4,5,6\n7,8\n")
    with pytest.raises(inputs.DataError, match=r"bad\.csv:4.* 2 fields.* 3"):
        inputs.from_csv(str(bad), label_name="c")
    with pytest.raises(ValueError, match="column_names"):
        inputs.from_csv(str(bad), header=False)
    blank = csv_dir / "blank.csv"
    blank.write_text("a,b\n1,2\n\n3,4\n")
    with pytest.raises(inputs.DataError, match=r"blank\.csv:3: blank line"):
        inputs.from_csv(str(blank))
    # DataError is both a TfestKitError and a ValueError.
    assert issubclass(inputs.DataError, TfestKitError) and issubclass(inputs.DataError, ValueError)


def test_a_directory_for_file_pattern_says_so_and_what_to_pass(csv_dir):
    # The readers called a directory "the file is empty" or failed with "Is a directory".
    (csv_dir / "sub").mkdir()
    [tfr] = inputs.write_tfrecord(ROWS, csv_dir / "sub" / "x.tfr")
    with pytest.raises(
        inputs.DataError,
        match=r"'.*' is a directory, not files: .* such as '.*/\*\.csv'; directory .* contains: "
        r"part-0\.csv, part-1\.csv, sub",
    ):
        inputs.from_csv(str(csv_dir), label_name="species")
    with pytest.raises(inputs.DataError, match=r"is a directory.* such as '.*sub/\*\.tfr'"):
        inputs.from_tfrecord(str(csv_dir / "sub"), SPEC, "label")
    with pytest.raises(
        inputs.DataError, match=r"'.*/\*' matches the directory '.*sub'.*'.*/\*\.csv'"
    ):
        inputs.from_csv(str(csv_dir / "*"), label_name="species")
    assert inputs.from_tfrecord(tfr, SPEC, "label")  # a file in it is fine


def test_from_csv_infers_types_past_na_values_big_ints_and_a_bom(tmp_path):
    path = tmp_path / "data.csv"
    # A byte-order mark before the header (spreadsheet export), "NA" for missing values, and
    # ids beyond int32.
    path.write_text("id,score,label\n3000000000,NA,0\n1,2,1\n", encoding="utf-8-sig")
    fn = inputs.from_csv(str(path), label_name="label", na_value="NA", shuffle=False)
    [(feats, labels)] = _batches(fn())
    assert feats["id"].dtype == np.int64 and feats["id"].tolist() == [3000000000, 1]
    assert feats["score"].dtype == np.int32 and feats["score"].tolist() == [0, 2]
    assert labels.tolist() == [0, 1]


def test_from_csv_types_only_numbers_csvdataset_parses(tmp_path):
    # Python's int() / float() take "1_000", non-ASCII digits, "+7" and "infinity"; typed
    # int or float, the columns failed at the first batch ("not a valid int32: 1_000").
    path = tmp_path / "data.csv"
    path.write_text(
        "under,arabic,plus,word,num,label\n1_000,\u0661\u0662,+7,infinity,-1.5e3,0\n"
        "2,3,8,1,nan,1\n",
        encoding="utf-8",
    )
    fn = inputs.from_csv(str(path), label_name="label", shuffle=False)
    [(feats, labels)] = _batches(fn())
    assert feats["under"].tolist() == [b"1_000", b"2"]
    assert feats["arabic"].tolist() == ["\u0661\u0662".encode(), b"3"]
    assert feats["plus"].dtype == np.float32 and feats["plus"].tolist() == [7.0, 8.0]
    assert feats["word"].tolist() == [b"infinity", b"1"]
    assert feats["num"].dtype == np.float32 and feats["num"][0] == -1500.0
    assert np.isnan(feats["num"][1]) and labels.tolist() == [0, 1]


def test_from_csv_column_empty_in_the_rows_read_is_float(tmp_path):
    # validate=False types columns from 100 rows; one empty there was int32, and a float
    # further down failed mid-training ("not a valid int32").
    path = tmp_path / "data.csv"
    rows = ["x,note,label"] + [f"{i},,{i % 2}" for i in range(150)] + ["150,2.5,0"]
    path.write_text("\n".join(rows) + "\n")
    fn = inputs.from_csv(
        str(path), label_name="label", shuffle=False, batch_size=200, validate=False
    )
    [(feats, labels)] = _batches(fn())
    assert feats["note"].dtype == np.float32 and feats["note"][-1] == 2.5
    assert feats["x"].dtype == np.int32 and len(labels) == 151


def test_from_csv_refuses_a_mostly_missing_numeric_column(tmp_path):
    # Numbers and one missing-value marker is a numeric column with gaps, however many: read as
    # strings, it failed far from the file ("Pack Op have types [string, float32]").
    path = tmp_path / "data.csv"
    path.write_text("age,code,label\nNA,a,0\nNA,b,1\n31.5,7,0\nNA,c,1\n")
    with pytest.raises(inputs.DataError, match=r"data\.csv:2.*'age'.*'NA'.*3 non"):
        inputs.from_csv(str(path), label_name="label")
    fn = inputs.from_csv(str(path), label_name="label", na_value="NA", shuffle=False)
    [(feats, _)] = _batches(fn())
    assert feats["age"].dtype == np.float32 and feats["age"].tolist() == [0.0, 0.0, 31.5, 0.0]
    # Other text with a few numbers is still a string column.
    assert feats["code"].tolist() == [b"a", b"b", b"7", b"c"]


def test_from_csv_rejects_files_whose_headers_differ(tmp_path):
    (tmp_path / "a.csv").write_text("x,y,label\n1,2,0\n")
    (tmp_path / "b.csv").write_text("y,x,label\n3,4,1\n")  # same width, columns swapped
    with pytest.raises(inputs.DataError, match=r"b\.csv:1: header \['y', 'x', 'label'\] differs"):
        inputs.from_csv(str(tmp_path / "*.csv"), label_name="label")


def test_from_csv_refuses_a_numeric_column_with_a_few_other_fields(tmp_path):
    # Typed string, the column failed much later: "Pack Op have types [string, float32]".
    path = tmp_path / "data.csv"
    path.write_text('x,y,city,label\n1.5,2,oslo,0\nNA,3,rome,1\n2.5,"1,000",7,0\n3.5,4,lima,1\n')
    with pytest.raises(
        inputs.DataError,
        match=r"data\.csv:3.*'x'.*'NA'.*na_value='NA'.*" r"column_defaults=\{'x': ''\}",
    ):
        inputs.from_csv(str(path), label_name="label")
    with pytest.raises(inputs.DataError, match=r"data\.csv:4: column 'y' .* also '1,000'"):
        inputs.from_csv(str(path), label_name="label", na_value="NA")
    # A number in a column given a numeric default failed in CsvDataset at the first batch.
    with pytest.raises(inputs.DataError, match=r"data\.csv:4: column 'y' .* also '1,000'"):
        inputs.from_csv(str(path), label_name="label", na_value="NA", column_defaults={"y": 0})
    fn = inputs.from_csv(
        str(path), label_name="label", na_value="NA", column_defaults={"y": ""}, shuffle=False
    )
    [(feats, labels)] = _batches(fn())
    assert feats["x"].dtype == np.float32 and feats["x"][1] == 0.0
    assert feats["y"].tolist() == [b"2", b"3", b"1,000", b"4"]
    assert feats["city"].tolist() == [b"oslo", b"rome", b"7", b"lima"]  # mostly text: strings
    assert labels.tolist() == [0, 1, 0, 1]
    fn = inputs.from_csv(str(path), label_name="label", select_columns=["city"])  # x, y unread
    assert sorted(np.concatenate([b[1] for b in _batches(fn())]).tolist()) == [0, 0, 1, 1]
    # A default of another type is named when the builder is called, not at the first batch.
    with pytest.raises(TypeError, match=r"`column_defaults` for column 'x' must be.*Got: \[0\.0\]"):
        inputs.from_csv(str(path), label_name="label", na_value="NA", column_defaults={"x": [0.0]})
    # A column select_columns leaves out is not read: its default is not checked.
    fn = inputs.from_csv(
        str(path),
        label_name="label",
        select_columns=["x"],
        na_value="NA",
        column_defaults=[0.0, None, "", 0],
        shuffle=False,
    )
    [(feats, labels)] = _batches(fn())
    assert sorted(feats) == ["x"] and labels.tolist() == [0, 1, 0, 1]
    # NumPy scalars count as the Python ones (np.float32 and np.int32 were refused).
    numpy_defaults = {"x": np.float32(-1), "y": "", "label": np.int32(0)}
    fn = inputs.from_csv(
        str(path), label_name="label", na_value="NA", column_defaults=numpy_defaults, shuffle=False
    )
    [(feats, labels)] = _batches(fn())
    assert feats["x"].tolist() == [1.5, -1.0, 2.5, 3.5] and labels.dtype == np.int32
    # An int default is as wide as it needs to be; one no integer column holds is named.
    with pytest.raises(ValueError, match=r"column 'label' is outside int64.*float or a string"):
        inputs.from_csv(
            str(path), label_name="label", column_defaults={"label": np.uint64(2**64 - 1)}
        )
    fn = inputs.from_csv(
        str(path),
        label_name="label",
        na_value="NA",
        column_defaults={"y": "", "label": 2**40},
        shuffle=False,
    )
    assert _batches(fn())[0][1].dtype == np.int64

    many = tmp_path / "many.csv"
    many.write_text("v,label\n1,0\n?,1\n2,0\n-,1\n?,0\n3,1\n4,0\n5,1\n")
    with pytest.raises(inputs.DataError, match=r"many\.csv:3.*3 non-numeric.*'\?' 2x, '-' 1x"):
        inputs.from_csv(str(many), label_name="label")


def test_from_csv_header_false_on_a_file_with_a_header_suggests_header_true(tmp_path):
    # Every column became a string column.
    path = tmp_path / "data.csv"
    path.write_text("age,city,label\n30,oslo,0\n41,rome,1\n")
    with pytest.raises(
        inputs.DataError,
        match=r"data\.csv:1.*'age'.*header=True",
    ):
        inputs.from_csv(str(path), ["age", "city", "label"], "label", header=False)
    fn = inputs.from_csv(str(path), ["age", "city", "label"], "label", shuffle=False)
    [(feats, labels)] = _batches(fn())
    assert feats["age"].tolist() == [30, 41] and labels.tolist() == [0, 1]


def test_from_csv_names_repeated_column_names(tmp_path):
    # CsvDataset failed at the first batch: "select_cols should be strictly increasing".
    path = tmp_path / "data.csv"
    path.write_text("a,a,b,b,label\n1,2,3,4,0\n")
    with pytest.raises(inputs.DataError, match=r"data\.csv:1: header repeats .* \['a', 'b'\]"):
        inputs.from_csv(str(path), label_name="label")
    with pytest.raises(ValueError, match=r"`column_names` must be unique.*repeated: \['p'\]"):
        inputs.from_csv(str(path), ["p", "p", "q", "r", "label"], "label")
    fn = inputs.from_csv(str(path), ["a1", "a2", "b1", "b2", "label"], "label")
    [(feats, labels)] = _batches(fn())
    assert feats["a2"].tolist() == [2] and labels.tolist() == [0]


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
        path, spec, "y", compression="GZIP", shuffle=False, drop_remainder=True
    )
    batches = list(fn({"batch_size": 4}))
    assert len(batches) == 1
    feats, labels = batches[0]
    assert labels.numpy().tolist() == [0, 1, 2, 3]
    assert isinstance(feats["tokens"], tf2.SparseTensor)
    assert feats["tokens"].dense_shape.numpy().tolist() == [4, 3]


def test_write_tfrecord_names_shards_left_by_an_earlier_write(tmp_path, tf_log_lines, monkeypatch):
    # A re-run with another num_shards leaves the earlier shards, and the pattern PATH-*
    # then reads both runs' data.
    inputs.write_tfrecord(ROWS, tmp_path / "d.tfr", num_shards=3)
    assert not [line for line in tf_log_lines if "from an earlier write" in line]
    paths = inputs.write_tfrecord(ROWS, tmp_path / "d.tfr", num_shards=2)
    [warning] = [line for line in tf_log_lines if "from an earlier write" in line]
    assert "3 shard(s)" in warning and "d.tfr-00000-of-00003" in warning
    # The paths it returns hold this write's rows only.
    fn = inputs.from_tfrecord(paths, SPEC, "label", shuffle=False, batch_size=100)
    assert sum(len(labels) for _, labels in _batches(fn())) == len(ROWS)
    # A relative path: the shards just written are not taken for old ones.
    monkeypatch.chdir(tmp_path)
    tf_log_lines.clear()
    inputs.write_tfrecord(ROWS, "e.tfr", num_shards=2)
    assert not [line for line in tf_log_lines if "from an earlier write" in line]


def test_tfrecord_errors(tmp_path):
    [path] = inputs.write_tfrecord(ROWS, tmp_path / "d.tfr")
    with pytest.raises(ValueError, match=r"`label_key` 'target'.*\['age', 'city'"):
        inputs.from_tfrecord(path, SPEC, "target")
    with pytest.raises(inputs.DataError, match=r"d\.tfr: .*no feature \['weight'\]"):
        inputs.from_tfrecord(path, {**SPEC, "weight": tf.io.FixedLenFeature([], tf.float32)})
    # Types and sizes are checked too: write_tfrecord stores Python ints as int64.
    with pytest.raises(inputs.DataError, match=r"'age' is stored as int64_list .* float32"):
        inputs.from_tfrecord(path, {**SPEC, "age": tf.io.FixedLenFeature([], tf.float32)})
    with pytest.raises(inputs.DataError, match=r"'scores' holds 2 values; .* \[3\] needs 3"):
        inputs.from_tfrecord(path, {**SPEC, "scores": tf.io.FixedLenFeature([3], tf.float32)})
    with pytest.raises(inputs.DataError, match=r"matches no file; directory .* contains: d\.tfr"):
        inputs.from_tfrecord(str(tmp_path / "e*.tfr"), SPEC, "label")
    with pytest.raises(inputs.DataError, match="cannot read"):
        inputs.from_tfrecord(path, SPEC, "label", compression="GZIP")
    with pytest.raises(TypeError, match=r"Row 1, feature 'a'"):
        inputs.write_tfrecord([{"a": 1}, {"a": "x"}], tmp_path / "bad.tfr")
    with pytest.raises(ValueError, match="num_shards"):
        inputs.write_tfrecord(ROWS, tmp_path / "x.tfr", num_shards=0)


@pytest.mark.parametrize("default", [None, -1.0])
def test_tfrecord_empty_list_for_a_fixed_len_feature_is_named_before_training(tmp_path, default):
    # parse_example fails on the first batch ("Values size: 0 but output shape: []"), naming
    # no file, also when the spec has a default_value.
    rows = [{"a": [], "y": 0}, {"a": 2.0, "y": 1}]
    [path] = inputs.write_tfrecord(rows, tmp_path / "e.tfr")
    spec = {
        "a": tf.io.FixedLenFeature([], tf.float32, default_value=default),
        "y": tf.io.FixedLenFeature([], tf.int64),
    }
    with pytest.raises(inputs.DataError, match=r"e\.tfr: .*'a' holds 0 values; .* needs 1"):
        inputs.from_tfrecord(path, spec, "y")


def _cut(path, nbytes):
    """Drops the last ``nbytes`` of a file, as an interrupted copy would."""
    with open(path, "r+b") as f:
        f.truncate(f.seek(0, 2) - nbytes)


_BYTES_SPEC = {
    "blob": tf.io.FixedLenFeature([], tf.string),
    "label": tf.io.FixedLenFeature([], tf.int64),
}


@pytest.mark.parametrize(
    "record_bytes, count",
    [
        (40, 300),  # small shards, followed from their first byte
        # 1.3 MB shards (over the largest read) of small records, half zero bytes; a whole
        # one is seen in its last 64 KiB, a cut one by the records found in its last 1 MiB
        (300, 12_000),
        (200_000, 18),  # the same with records larger than the first read
    ],
)
def test_tfrecord_truncated_shard_is_named_before_training(tmp_path, record_bytes, count):
    rng = np.random.RandomState(0)
    rows = [
        {"blob": bytes(record_bytes // 2) + rng.bytes(record_bytes // 2), "label": i % 2}
        for i in range(count)
    ]
    paths = inputs.write_tfrecord(rows, tmp_path / "d.tfr", num_shards=3)
    pattern = str(tmp_path / "d.tfr-*")
    # Whole shards pass, and all their records are read.
    fn = inputs.from_tfrecord(pattern, _BYTES_SPEC, "label", shuffle=False, batch_size=64)
    assert sum(len(labels) for _, labels in _batches(fn())) == count
    # TensorFlow would fail only on reaching the cut, with "truncated record at <offset>".
    whole = tmp_path / "whole"
    shutil.copy(paths[1], whole)
    for cut in (1, 15, 17, record_bytes // 3):
        _cut(paths[1], cut)
        with pytest.raises(inputs.DataError) as raised:
            inputs.from_tfrecord(pattern, _BYTES_SPEC, "label")
        message = str(raised.value)
        assert message.startswith(paths[1]) and "truncated" in message
        assert "copy or write it again" in message
        shutil.copy(whole, paths[1])
    # The error comes before any training; the shard restored, the data read as before.
    assert sum(len(labels) for _, labels in _batches(fn())) == count


def test_tfrecord_garbage_cut_and_compressed_shards_are_named(tmp_path):
    paths = inputs.write_tfrecord(ROWS, tmp_path / "d.tfr", num_shards=2)
    with open(paths[1], "wb") as f:
        f.write(b"age,income\n30,1.5\n")  # a CSV under a TFRecord name
    with pytest.raises(inputs.DataError, match=r"d\.tfr-00001-of-00002: .*TFRecord header"):
        inputs.from_tfrecord(str(tmp_path / "d.tfr-*"), SPEC, "label")
    # A damaged header on the way to a cut end is named where it is.
    with open(paths[0], "r+b") as f:
        first = int.from_bytes(f.read(8), "little")
        f.seek(16 + first)  # the second record's length
        f.write(b"\xff")
    _cut(paths[0], 3)
    with pytest.raises(inputs.DataError, match=rf"corrupt.* {16 + first}"):
        inputs.from_tfrecord(paths[0], SPEC, "label")
    # A large record cut short, and a cut GZIP shard, are named too.
    rows = [{"blob": b"x" * 100, "label": 0}, {"blob": b"y" * 1_500_000, "label": 1}]
    [big] = inputs.write_tfrecord(rows, tmp_path / "big.tfr")
    _cut(big, 10)
    with pytest.raises(inputs.DataError, match=r"big\.tfr: it is truncated"):
        inputs.from_tfrecord(big, _BYTES_SPEC, "label")
    inputs.from_tfrecord(big, _BYTES_SPEC, "label", validate=False)  # the first example only
    [packed] = inputs.write_tfrecord(ROWS * 50, tmp_path / "p.tfr", compression="GZIP")
    inputs.from_tfrecord(packed, SPEC, "label", compression="GZIP")
    _cut(packed, 10)
    with pytest.raises(inputs.DataError, match=r"p\.tfr"):
        inputs.from_tfrecord(packed, SPEC, "label", compression="GZIP")


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
        drop_remainder=True,
    )
    est = tf.estimator.Estimator(model_fn, str(tmp_path / "m"), params={"batch_size": 16})
    est.train(train_fn, steps=20)
    assert seen == [16]  # static batch dimension from params + drop_remainder
    assert est.get_variable_value("global_step") == 20


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


@pytest.mark.parametrize("kind", ["csv", "tfrecord"])
def test_without_shuffling_files_are_read_in_the_order_given(tmp_path, kind):
    # from_csv interleaved the files' rows (0, 64, 128, 192, 1, …): predictions no longer
    # followed the rows.
    paths = _class_shards(tmp_path, kind)
    fn = _build(kind, paths[::-1], shuffle=False, batch_size=50)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "`deterministic` argument has no effect" per call
        dataset = fn()
    ids = np.concatenate([f["id"] for f, _ in _batches(dataset)]).tolist()
    expected = [i for c in reversed(range(4)) for i in range(c * 64, (c + 1) * 64)]
    assert ids == expected


@pytest.mark.parametrize("dtype", [tf.int32, tf.float64])
def test_from_tfrecord_names_a_dtype_examples_cannot_hold(tmp_path, dtype):
    # It failed inside train(): "Value passed to parameter 'dense_defaults' has DataType int32".
    path = inputs.write_tfrecord(ROWS, tmp_path / "data.tfrecord")[0]
    spec = {**SPEC, "age": tf.io.FixedLenFeature([], dtype)}
    with pytest.raises(ValueError, match=rf"'age' asks for {dtype.name}.*tf\.int64, tf\.float32"):
        inputs.from_tfrecord(path, spec, "label")


@pytest.mark.parametrize(
    "data, compression, fix",
    [
        (gzip.compress(b"a,b\n1,2\n"), None, "GZIP-compressed.*compression='GZIP'"),
        (b"a,b\n1,2\n", "GZIP", "GZIP-compressed.*compression=None"),
        (b"a,b\n1,2\n", "ZLIB", "ZLIB-compressed.*compression=None"),
        (zlib.compress(b"a,b\n1,2\n"), "GZIP", "GZIP-compressed"),
        ("a,b\nK\u00f8ln,2\n".encode("latin-1"), None, "UTF-8"),
    ],
    # Named: gzip data holds its time of compression, and every xdist worker must collect the
    # same test ids.
    ids=[
        "gzip-read-as-text",
        "text-read-as-gzip",
        "text-read-as-zlib",
        "zlib-read-as-gzip",
        "latin-1",
    ],
)
def test_from_csv_names_a_file_it_cannot_read_and_the_fix(tmp_path, data, compression, fix):
    # gzip's BadGzipFile, zlib.error and UnicodeDecodeError came out bare, naming no file.
    path = tmp_path / "data.csv"
    path.write_bytes(data)
    with pytest.raises(inputs.DataError, match=rf"data\.csv: cannot read.*{fix}"):
        inputs.from_csv(str(path), label_name="b", compression=compression)


@pytest.mark.parametrize(
    "value, error, match",
    [
        (None, TypeError, r"Row 1, feature 'age' is None \(a missing value\?\).*Leave the key out"),
        ([[1, 2], [3]], TypeError, r"Row 1, feature 'age': nested lists of different lengths"),
        (2**63, ValueError, r"Row 1, feature 'age': 9223372036854775808 is outside int64"),
        ([1, 2**64], ValueError, r"Row 1, feature 'age': 1 is outside int64|2\*\*64|1844674"),
        (-(2**63) - 1, ValueError, r"Row 1, feature 'age': -9223372036854775809 is outside"),
    ],
)
def test_write_tfrecord_names_the_row_and_feature_of_a_value_it_cannot_write(
    tmp_path, value, error, match
):
    # They were "mixed value types", NumPy's "inhomogeneous shape" and protobuf's bare "Value
    # out of range", none naming the row or the feature.
    rows = [{"age": 30}, {"age": value}]
    with pytest.raises(error, match=match):
        inputs.write_tfrecord(rows, tmp_path / "data.tfrecord")


def test_write_tfrecord_warns_when_floats_round_large_ints(tmp_path, tf_log_lines):
    inputs.write_tfrecord([{"id": 2**53 + 1}, {"id": 0.5}], tmp_path / "a.tfrecord")
    [warning] = [line for line in tf_log_lines if "2**24" in line]
    assert "feature 'id'" in warning and "9007199254740993" in warning
    tf_log_lines.clear()
    inputs.write_tfrecord([{"id": 2**53 + 1}, {"id": 7}], tmp_path / "b.tfrecord")  # ints only
    inputs.write_tfrecord([{"id": 1000}, {"id": 0.5}], tmp_path / "c.tfrecord")  # exact
    inputs.write_tfrecord([{"id": 2**24 + 2}, {"id": 0.5}], tmp_path / "d.tfrecord")  # exact too
    assert not [line for line in tf_log_lines if "2**24" in line]


# ------------------------------------------------ why the official readers are not used alone


def test_official_make_csv_dataset_reads_a_numeric_column_with_na_as_strings(tmp_path):
    # from_csv's scan refuses this column and names na_value (see the test above); the
    # official reader silently makes every value of it a string.
    path = tmp_path / "na.csv"
    path.write_text("x,y\n1.5,0\nNA,1\n2.5,0\n")
    ds = tf2.data.experimental.make_csv_dataset(str(path), batch_size=3, shuffle=False)
    assert ds.element_spec["x"].dtype == tf.string
    with pytest.raises(inputs.DataError, match="na_value"):
        inputs.from_csv(str(path), label_name="y")


def test_official_pipelines_read_unshuffled_files_sorted_not_as_given(tmp_path):
    # Ours (shuffle=False) read files in the order given: predictions follow the rows.
    for name, value in (("a.csv", 1), ("b.csv", 2)):
        (tmp_path / name).write_text(f"x\n{value}\n")
    files = [str(tmp_path / "b.csv"), str(tmp_path / "a.csv")]
    ds = tf2.data.experimental.make_csv_dataset(files, batch_size=2, shuffle=False, num_epochs=1)
    assert [int(v) for v in next(iter(ds))["x"]] == [1, 2]
    ours = _batches(inputs.from_csv(files, shuffle=False, batch_size=2)())
    assert ours[0]["x"].tolist() == [2, 1]
    # make_batched_features_dataset, the official TFRecord pipeline, sorts them too.
    spec = {"x": tf.io.FixedLenFeature([], tf.int64)}
    shards = [inputs.write_tfrecord([{"x": v}], tmp_path / f"{v}.tfr")[0] for v in (2, 1)]
    ds = tf2.data.experimental.make_batched_features_dataset(
        shards, 2, spec, shuffle=False, num_epochs=1
    )
    assert [int(v) for v in next(iter(ds))["x"]] == [1, 2]
    ours = _batches(inputs.from_tfrecord(shards, spec, shuffle=False, batch_size=2)())
    assert ours[0]["x"].tolist() == [2, 1]


def test_official_make_csv_dataset_types_1_000_as_int_and_has_no_static_batch(tmp_path):
    # Its inference takes what Python's int() takes; CsvDataset then refuses the field. Its
    # batches have no drop_remainder, so TPU-style static shapes are impossible.
    path = tmp_path / "under.csv"
    path.write_text("x,y\n1_000,0\n2,1\n")
    ds = tf2.data.experimental.make_csv_dataset(str(path), 2, shuffle=False, num_epochs=1)
    assert ds.element_spec["x"].dtype == tf.int32 and ds.element_spec["x"].shape[0] is None
    with pytest.raises(tf.errors.InvalidArgumentError, match="1_000"):
        next(iter(ds))
    fn = inputs.from_csv(str(path), label_name="y", batch_size=2, drop_remainder=True)
    assert fn().element_spec[0]["x"].dtype == tf.string
    assert fn().element_spec[0]["x"].shape.as_list() == [2]


def test_official_make_csv_dataset_names_no_file_and_line_for_a_short_row(tmp_path):
    path = tmp_path / "short.csv"
    path.write_text("x,y\n" + "1,0\n" * 50 + "7\n")
    ds = tf2.data.experimental.make_csv_dataset(
        str(path), batch_size=8, shuffle=False, num_epochs=1, column_defaults=[0, 0]
    )
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        _batches(ds)  # only on reaching the row, during training
    assert "short.csv:52" not in str(raised.value)
    with pytest.raises(inputs.DataError, match=r"short\.csv:52"):
        inputs.from_csv(str(path), label_name="y")


def test_official_tfrecord_dataset_finds_a_cut_shard_only_at_its_end_without_its_name(tmp_path):
    paths = inputs.write_tfrecord(ROWS * 20, tmp_path / "d.tfr", num_shards=1)
    _cut(paths[0], 5)
    read = 0
    with pytest.raises(tf.errors.DataLossError) as raised:
        for _ in tf2.data.TFRecordDataset(paths[0]):
            read += 1
    assert read > 0 and "truncated record" in str(raised.value)
    assert "d.tfr" not in str(raised.value)
    with pytest.raises(inputs.DataError, match=r"d\.tfr.*truncated"):
        inputs.from_tfrecord(paths[0], SPEC, "label")


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
