"""``python -m tfest_kit predict`` / ``signature`` on real exports.

A few runs are real subprocesses (each costs a TensorFlow import, seconds); the rest call
``tfest_kit.__main__.main`` in-process, which is the same code path after argument parsing.
"""

from __future__ import annotations

import base64
import io
import json
import shutil
import sys

import numpy as np
import pytest
from google.protobuf import text_format

from tests.conftest import run_program
from tfest_kit import serving
from tfest_kit.__main__ import main
from tfest_kit._tf import SavedModel, estimator, tf, tf2
from tfest_kit.cli import predict as cli_predict

RNG = np.random.RandomState(2)
X = RNG.randn(32, 3).astype(np.float32)
Y = (X[:, 0] > 0).astype(np.int32)


def _model_fn(features, labels, mode):
    net = tf.reduce_mean(features["image"], axis=[1, 2]) if "image" in features else features["x"]
    logits = tf.layers.dense(net, 2, name="logits")
    predictions = {"logits": logits, "class_ids": tf.argmax(logits, 1)}
    if mode == estimator.ModeKeys.PREDICT:
        return estimator.EstimatorSpec(mode, predictions=predictions)
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf.train.AdamOptimizer(0.05).minimize(loss, tf.train.get_global_step())
    return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    est = estimator.Estimator(_model_fn, model_dir=str(root / "model"))
    est.train(lambda: tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).repeat().batch(8), steps=5)
    raw = est.export_saved_model(str(root / "raw"), serving.raw_receiver({"x": (tf.float32, [3])}))
    parsing = est.export_saved_model(
        str(root / "parsing"),
        serving.parsing_receiver({"x": tf.io.FixedLenFeature([3], tf.float32)}),
    )
    images = estimator.Estimator(_model_fn, model_dir=str(root / "images"))
    images.train(
        lambda: tf.data.Dataset.from_tensors(
            ({"image": np.zeros((2, 4, 4, 3), np.float32)}, [0, 1])
        ),
        steps=1,
    )
    image = images.export_saved_model(str(root / "image"), serving.image_bytes_receiver(4))
    return {
        "root": root,
        "raw": raw.decode(),
        "parsing": parsing.decode(),
        "image": image.decode(),
        "expected": serving.Predictor(raw.decode())({"x": X[:3]}),
    }


def _write(root, name, body):
    path = root / name
    path.write_text(json.dumps(body))
    return str(path)


@pytest.mark.slow
def test_predict_round_trips_json_in_a_subprocess(exports):
    root, expected = exports["root"], exports["expected"]
    request = _write(root, "rows.json", {"instances": [{"x": row} for row in X[:3].tolist()]})
    # The base directory works too: the newest complete export is used.
    proc = run_program(["-m", "tfest_kit", "predict", str(root / "raw"), request])
    predictions = json.loads(proc.stdout)["predictions"]
    assert len(predictions) == 3 and sorted(predictions[0]) == ["class_ids", "logits"]
    np.testing.assert_allclose([p["logits"] for p in predictions], expected["logits"], atol=1e-5)
    assert [p["class_ids"] for p in predictions] == expected["class_ids"].tolist()


def test_predict_reads_plain_values_from_stdin(exports, capsys, monkeypatch):
    body = json.dumps({"instances": X[:3].tolist()})
    monkeypatch.setattr(sys, "stdin", io.StringIO(body))
    code, out, err = _main(["predict", exports["raw"], "-"], capsys)
    assert code == 0, err
    logits = [p["logits"] for p in json.loads(out)["predictions"]]
    np.testing.assert_allclose(logits, exports["expected"]["logits"], atol=1e-5)


def test_predict_answers_columns_with_columns_as_tf_serving_does(exports, tmp_path, capsys):
    expected = exports["expected"]
    request = _write(tmp_path, "columns.json", {"inputs": {"x": X[:3].tolist()}})
    code, out, err = _main(["predict", exports["raw"], request], capsys)
    assert code == 0, err
    outputs = json.loads(out)
    assert list(outputs) == ["outputs"] and sorted(outputs["outputs"]) == ["class_ids", "logits"]
    np.testing.assert_allclose(outputs["outputs"]["logits"], expected["logits"], atol=1e-5)
    assert outputs["outputs"]["class_ids"] == expected["class_ids"].tolist()
    # A signature with one input takes a bare column; one output is given without its name.
    request = _write(tmp_path, "column.json", {"inputs": X[:2].tolist()})
    code, out, err = _main(["predict", exports["raw"], request], capsys)
    assert code == 0 and len(json.loads(out)["outputs"]["logits"]) == 2, err
    single = {"y": np.array([[1.5], [2.5]], np.float32)}
    assert cli_predict.outputs_to_json(single) == {"outputs": [[1.5], [2.5]]}
    assert cli_predict.predictions_to_json(single, 2) == {"predictions": [[1.5], [2.5]]}


def test_predict_writes_strings_of_bytes_outputs_as_base64():
    outputs = {"key_bytes": np.array([b"ab", b"\xff"]), "label": np.array([b"cat", b"\xff"])}
    rows = cli_predict.predictions_to_json(outputs, 2)["predictions"]
    # Text stays text, unless the output's name says bytes (TF Serving's "_bytes" rule).
    assert rows[0] == {"key_bytes": {"b64": "YWI="}, "label": "cat"}
    assert rows[1] == {"key_bytes": {"b64": "/w=="}, "label": {"b64": "/w=="}}
    columns = cli_predict.outputs_to_json(outputs)["outputs"]
    assert columns == {
        "key_bytes": [r["key_bytes"] for r in rows],
        "label": ["cat", {"b64": "/w=="}],
    }


def _main(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_predict_parsing_and_image_exports(exports, capsys):
    root = exports["root"]
    request = _write(root, "features.json", {"instances": [{"x": row} for row in X[:3].tolist()]})
    code, out, err = _main(["predict", exports["parsing"], request], capsys)
    assert code == 0, err
    logits = [p["logits"] for p in json.loads(out)["predictions"]]
    np.testing.assert_allclose(logits, exports["expected"]["logits"], atol=1e-5)

    png = tf2.io.encode_png(np.full((6, 6, 3), 200, np.uint8)).numpy()
    encoded = {"b64": base64.b64encode(png).decode()}
    request = _write(root, "image.json", {"instances": [encoded, encoded]})
    code, out, err = _main(["predict", exports["image"], request], capsys)
    assert code == 0, err
    predictions = json.loads(out)["predictions"]
    assert len(predictions) == 2 and predictions[0] == predictions[1]


def test_predict_reports_bad_requests(exports, capsys):
    root = exports["root"]
    wrong = _write(root, "wrong.json", {"instances": [{"z": [1, 2, 3]}]})
    code, _, err = _main(["predict", exports["raw"], wrong], capsys)
    assert code == 2 and "missing: ['x']" in err and "x: float32 [None, 3]" in err
    shape = _write(root, "shape.json", {"instances": [[1.0, 2.0]]})
    code, _, err = _main(["predict", exports["raw"], shape], capsys)
    assert code == 2 and "shape [1, 2]" in err
    empty = _write(root, "empty.json", {"rows": []})
    code, _, err = _main(["predict", exports["raw"], empty], capsys)
    assert code == 2 and '"instances"' in err
    code, _, err = _main(["predict", str(root / "nothing"), wrong], capsys)
    assert code == 1 and "No complete export" in err
    # JSON text where REQUEST, a file, goes: "No such file or directory" alone.
    code, _, err = _main(["predict", exports["raw"], '{"instances": [[1, 2, 3]]}'], capsys)
    assert code == 2 and "No such file" in err and "JSON text goes on stdin: REQUEST -" in err
    # Values the graph itself refuses: one line and the bad-request status, no traceback.
    not_png = _write(root, "not_png.json", {"instances": [{"b64": "bm90IGFuIGltYWdl"}]})
    code, _, err = _main(["predict", exports["image"], not_png], capsys)
    assert code == 2 and "the model rejected the request: " in err and "image" in err, err
    assert "Traceback" not in err
    # TF Serving's "signature_name" chooses the signature, as --signature does.
    rows = {"instances": X[:3].tolist()}
    named = _write(root, "named.json", {"signature_name": "serving_default", **rows})
    code, out, err = _main(["predict", exports["raw"], named], capsys)
    assert code == 0 and len(json.loads(out)["predictions"]) == 3, err
    unknown = _write(root, "unknown.json", {"signature_name": "classify", **rows})
    code, _, err = _main(["predict", exports["raw"], unknown], capsys)
    assert code == 2 and "'classify' is not in" in err and "serving_default" in err


def test_predict_refuses_a_request_with_both_instances_and_inputs(exports, capsys):
    # It used to answer from "inputs" alone; TF Serving's REST API refuses such a request.
    both = {"instances": X[:1].tolist(), "inputs": {"x": X[1:3].tolist()}}
    request = _write(exports["root"], "both.json", both)
    code, out, err = _main(["predict", exports["raw"], request], capsys)
    assert code == 2 and out == "", out
    assert err.startswith('predict: The request must be a JSON object with either "instances"')
    assert err.count("\n") == 1, err


def test_predict_names_the_input_whose_b64_value_is_not_base64(exports, capsys):
    png = tf2.io.encode_png(np.full((6, 6, 3), 200, np.uint8)).numpy()
    good = {"b64": base64.b64encode(png).decode()}
    request = _write(exports["root"], "bad_b64.json", {"instances": [good, {"b64": "no!"}]})
    code, _, err = _main(["predict", exports["image"], request], capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert "Invalid \"b64\" value 'no!'" in err


@pytest.mark.slow
def test_signature_lists_inputs_and_outputs(exports, capsys):
    proc = run_program(["-m", "tfest_kit", "signature", exports["parsing"]])
    assert "signature_def['serving_default']" in proc.stdout
    assert "examples: string shape [-1]" in proc.stdout
    assert "logits: float32 shape [-1, 2]" in proc.stdout
    code, out, _ = _main(["signature", str(exports["root"] / "raw"), "--json"], capsys)
    info = json.loads(out)
    assert code == 0
    assert info["export_dir"] == exports["raw"]
    assert info["signatures"]["serving_default"]["inputs"]["x"] == {
        "dtype": "float32",
        "shape": [-1, 3],
        "tensor": "x:0",
    }


@pytest.mark.slow
def test_help_lists_every_command(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    listing = capsys.readouterr().out
    for command in ("doctor", "inspect", "plot", "predict", "signature"):
        assert command in listing
    for command in ("predict", "signature"):
        with pytest.raises(SystemExit) as exit_info:
            main([command, "--help"])
        assert exit_info.value.code == 0
        assert "EXPORT_DIR" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_info:
        main([])
    assert exit_info.value.code == 2


def _corrupt_copies(exports, tmp_path):
    bad_graph = tmp_path / "bad_graph" / "1"
    shutil.copytree(exports["raw"], bad_graph)
    (bad_graph / "saved_model.pb").write_bytes(b"not a SavedModel")
    torn = tmp_path / "torn" / "1"
    shutil.copytree(exports["raw"], torn)
    (data,) = (torn / "variables").glob("variables.data-*")
    data.write_bytes(data.read_bytes()[:10])
    return str(bad_graph), str(torn.parent)


def test_a_damaged_newest_export_is_marked_and_the_one_before_named(exports, tmp_path, capsys):
    # inspect listed it as the newest, unmarked; predict said only "export the model again".
    base = tmp_path / "model" / "export" / "best"
    for version in ("1", "2"):
        shutil.copytree(exports["raw"], base / version)
    (data,) = (base / "2" / "variables").glob("variables.data-*")
    data.write_bytes(data.read_bytes()[:10])
    code, out, _ = _main(["inspect", str(tmp_path / "model")], capsys)
    assert code == 0 and "export/best/2  (damaged: " in out and "<- newest" in out, out
    assert "export/best/1\n" in out, out
    request = _write(tmp_path, "rows.json", {"instances": X[:1].tolist()})
    code, _, err = _main(["predict", str(base), request], capsys)
    assert code == 1 and f"or pass the one before, {base / '1'}" in err, err


def test_predict_and_signature_report_unloadable_exports_in_one_line(exports, tmp_path, capsys):
    request = _write(tmp_path, "rows.json", {"instances": X[:1].tolist()})
    bad_graph, torn_variables = _corrupt_copies(exports, tmp_path)
    for path in (bad_graph, torn_variables):
        code, _, err = _main(["predict", path, request], capsys)
        # After the line naming the export used, for the directory of exports.
        error = err.splitlines()[-1]
        assert code == 1 and error.startswith("predict: The SavedModel at") and "export the" in err
    code, _, err = _main(["signature", bad_graph], capsys)
    assert code == 1 and "saved_model.pb is corrupt or incomplete" in err, err
    assert err.startswith("signature: The SavedModel at") and err.count("\n") == 1, err
    # signature reads saved_model.pb alone, never the weights: torn variables do not stop it.
    code, out, _ = _main(["signature", torn_variables], capsys)
    assert code == 0 and "serving_default" in out


def test_predict_rejects_an_unknown_signature_and_batch_size(exports, tmp_path, capsys):
    request = _write(tmp_path, "rows.json", {"instances": X[:1].tolist()})
    code, _, err = _main(["predict", exports["raw"], request, "--signature", "x"], capsys)
    assert code == 2 and "Available signatures: ['serving_default']" in err
    with pytest.raises(SystemExit) as exit_info:
        main(["predict", exports["raw"], request, "--batch_size", "0"])
    assert exit_info.value.code == 2
    assert "--batch_size: must be a positive integer. Got: '0'" in capsys.readouterr().err


def test_read_signatures_matches_the_loaded_model_from_a_binary_or_text_graph(exports, tmp_path):
    export_dir, signatures = serving.read_signatures(exports["parsing"])
    with serving.Predictor(export_dir) as predictor:
        assert signatures["serving_default"]["inputs"] == predictor.inputs
    # A text-format graph is read the same way (saved_model.pbtxt instead of .pb).
    text_copy = tmp_path / "text" / "1"
    shutil.copytree(exports["parsing"], text_copy)
    saved_model = SavedModel.FromString((text_copy / "saved_model.pb").read_bytes())
    (text_copy / "saved_model.pb").unlink()
    (text_copy / "saved_model.pbtxt").write_text(text_format.MessageToString(saved_model))
    assert serving.read_signatures(str(text_copy))[1] == signatures


def test_predict_reads_a_request_file_given_before_or_after_json(exports, tmp_path, capsys):
    # REQUEST was `--json FILE`; --json is a flag now, as for inspect and signature: the old
    # spelling reads the same file and the answer is JSON either way.
    request = _write(tmp_path, "rows.json", {"instances": X[:2].tolist()})
    for argv in (["--json", request], [request, "--json"], [request]):
        code, out, err = _main(["predict", exports["raw"], *argv], capsys)
        assert code == 0 and len(json.loads(out)["predictions"]) == 2, (argv, err)
    with pytest.raises(SystemExit) as exit_info:
        main(["predict", exports["raw"], "--json"])
    assert exit_info.value.code == 2 and "REQUEST" in capsys.readouterr().err


def test_signature_predict_and_inspect_take_a_model_dir(exports, tmp_path, capsys):
    # signature / predict refused a model_dir: they take its best exporter's newest complete
    # export (before a newer plain one) and say which on stderr; inspect lists the exports.
    model_dir = tmp_path / "model"
    for version in ("best/100", "best/200", "best/300", "400"):
        shutil.copytree(exports["raw"], model_dir / "export" / version)
    for version in ("best/100", "best/200"):  # what best_exporter writes into each export
        (model_dir / "export" / version / "assets.extra").mkdir()
        metrics = {"monitor": "loss", "mode": "min", "value": 0.5}
        _write(
            model_dir / "export" / version / "assets.extra", serving.EXPORT_METRICS_FILE, metrics
        )
    (model_dir / "export/best/300/variables/variables.index").unlink()  # cut short
    best, plain = str(model_dir / "export/best/200"), str(model_dir / "export/400")
    request = _write(tmp_path, "rows.json", {"instances": X[:2].tolist()})
    code, out, err = _main(["predict", str(model_dir), request], capsys)
    assert code == 0 and len(json.loads(out)["predictions"]) == 2, err
    assert err.startswith("predict: ") and best in err and err.count("\n") == 1, err
    code, out, err = _main(["signature", str(model_dir), "--json"], capsys)
    assert code == 0 and json.loads(out)["export_dir"] == best and best in err, err
    code, out, _ = _main(["inspect", str(model_dir)], capsys)
    listed = out[out.index("exports:") :].splitlines()[1:]
    assert [line.split() for line in listed] == [
        ["export/400", "<-", "newest"],
        ["export/best/100"],
        ["export/best/200", "<-", "newest"],
    ], out
    code, out, _ = _main(["inspect", "--json", str(model_dir)], capsys)
    assert [e["best_exporter"] for e in json.loads(out)["exports"]] == [False, True, True]
    # Without a best exporter's exports: the newest of all.
    for version in ("best/100", "best/200"):
        shutil.rmtree(model_dir / "export" / version / "assets.extra")
    code, out, err = _main(["signature", str(model_dir)], capsys)
    assert code == 0 and f"SavedModel: {plain}\n" in out and plain in err, err
    # inspect given an export, or a parent of model_dirs: "checkpoints: none", exit 0, no word.
    code, out, _ = _main(["inspect", exports["raw"]], capsys)
    assert code == 0 and "note: an export: see python -m tfest_kit signature" in out, out
    # A directory of exporters' directories, MODEL_DIR/export: "exports: none", no word.
    code, out, _ = _main(["inspect", str(model_dir / "export")], capsys)
    assert code == 0 and f"signature {model_dir / 'export' / 'best'}\n" in out, out
    code, out, _ = _main(["inspect", str(model_dir / "export" / "best")], capsys)
    assert code == 0 and "note: an export: see python -m tfest_kit signature" in out, out
    code, out, _ = _main(["inspect", str(exports["root"])], capsys)
    assert code == 0 and "note: the model_dirs below it: images, model\n" in out, out
    code, out, _ = _main(["inspect", "--json", exports["raw"]], capsys)
    assert json.loads(out)["is_export"] is True and json.loads(out)["model_dirs_below"] == []
    # Nothing exported: what the model_dir holds, in one line.
    code, _, err = _main(["signature", str(exports["root"] / "model")], capsys)
    assert code == 1 and "No complete export" in err and "checkpoint" in err, err
    assert err.count("\n") == 1, err


def test_predict_refuses_instances_with_different_keys(exports, tmp_path, capsys):
    row = X[0].tolist()
    uneven = _write(tmp_path, "uneven.json", {"instances": [{"x": row}, {"x": row, "s": "a"}]})
    code, _, err = _main(["predict", exports["parsing"], uneven], capsys)
    assert code == 2 and "must have the same keys" in err and err.count("\n") == 1, err


def test_predict_names_both_ways_to_pick_a_signature_when_the_default_is_missing(tmp_path, capsys):
    # Neither --signature nor "signature_name": the hint blamed the request for the default.
    path = str(tmp_path / "1")
    with tf.Graph().as_default() as graph, tf.Session(graph=graph) as session:
        x = tf.placeholder(tf.float32, [None], name="x")
        signature = tf.saved_model.signature_def_utils.predict_signature_def({"x": x}, {"y": 2 * x})
        builder = tf.saved_model.builder.SavedModelBuilder(path)
        builder.add_meta_graph_and_variables(
            session, ["serve"], signature_def_map={"foo": signature}
        )
        builder.save()
    body = {"instances": [1.0, 2.0]}
    code, _, err = _main(["predict", path, _write(tmp_path, "r.json", body)], capsys)
    assert code == 2 and "Available signatures: ['foo']" in err
    code, out, _ = _main(
        ["predict", path, "--signature", "foo", _write(tmp_path, "r.json", body)], capsys
    )
    assert code == 0 and json.loads(out)["predictions"] == [2.0, 4.0]
