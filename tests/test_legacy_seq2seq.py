"""Tests for tf.contrib.seq2seq under the runner: decoders, helpers, beam search and attention.

tests/legacy_scripts/seq2seq_model.py (a TF1 Estimator learning to copy token sequences) runs
once through ``python -m tfest_kit.legacy``; its JSON is checked against TF 1.15's variable
names and against NumPy / ``tf.nn.dynamic_rnn`` reference computations.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.conftest import ROOT, run_program
from tfest_kit._tf import tf
from tfest_kit.legacy.contrib import seq2seq

VOCAB, EMBED, UNITS, EOS = 10, 8, 16, 2

# TF 1.15's names and shapes for seq2seq_model.py's model (tf.contrib.seq2seq's
# attention_wrapper.py / basic_decoder.py / decoder.py under a `decode` variable scope).
TF115_VARIABLES = {
    "embed/embeddings": [VOCAB, EMBED],
    "rnn/gru_cell/gates/kernel": [EMBED + UNITS, 2 * UNITS],
    "rnn/gru_cell/gates/bias": [2 * UNITS],
    "rnn/gru_cell/candidate/kernel": [EMBED + UNITS, UNITS],
    "rnn/gru_cell/candidate/bias": [UNITS],
    "decode/memory_layer/kernel": [UNITS, UNITS],
    "decode/decoder/attention_wrapper/basic_lstm_cell/kernel": [EMBED + 2 * UNITS, 4 * UNITS],
    "decode/decoder/attention_wrapper/basic_lstm_cell/bias": [4 * UNITS],
    "decode/decoder/attention_wrapper/bahdanau_attention/query_layer/kernel": [UNITS, UNITS],
    "decode/decoder/attention_wrapper/bahdanau_attention/attention_v": [UNITS],
    "decode/decoder/attention_wrapper/attention_layer/kernel": [2 * UNITS, UNITS],
    "decode/decoder/dense/kernel": [UNITS, VOCAB],
    "decode/decoder/dense/bias": [VOCAB],
    "global_step": [],
}


def _write_tf115_checkpoint(model_dir) -> None:
    """A checkpoint holding exactly TF 1.15's variable names, as TF 1.15 would have written."""
    rng = np.random.RandomState(0)
    with tf.Graph().as_default(), tf.Session() as sess:
        for name, shape in TF115_VARIABLES.items():
            if name == "global_step":
                tf.Variable(np.int64(5), name=name)
            else:
                tf.Variable(rng.randn(*shape).astype(np.float32) * 0.3, name=name)
        sess.run(tf.global_variables_initializer())
        tf.train.Saver().save(sess, str(model_dir / "model.ckpt"), global_step=5)


@pytest.fixture(scope="module")
def seq2seq_run(tmp_path_factory):
    """seq2seq_model.py under the runner; returns its JSON and the --report lines."""
    work_dir = tmp_path_factory.mktemp("seq2seq")
    tf115_dir = work_dir / "tf115"
    tf115_dir.mkdir()
    _write_tf115_checkpoint(tf115_dir)
    proc = run_program(
        [
            "-m",
            "tfest_kit.legacy",
            "--report",
            str(ROOT / "tests" / "legacy_scripts" / "seq2seq_model.py"),
            f"--work_dir={work_dir}",
            f"--tf115_dir={tf115_dir}",
        ],
        timeout=300,
    )
    assert "TensorFlow Addons" not in proc.stderr
    lines = proc.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("{"))
    return json.loads(lines[start]), "\n".join(lines[start + 1 :])


def _until_eos(row) -> list:
    row = list(row)
    return row[: row.index(EOS) + 1] if EOS in row else row


def test_seq2seq_estimator_learns_the_copy_task(seq2seq_run):
    result = seq2seq_run[0]["estimator"]
    first, last = result["losses"]
    assert last < 0.5 * first, result["losses"]
    target = [_until_eos(row) for row in result["target"]]
    for kind in ("greedy", "beam"):
        predicted = [_until_eos(row) for row in result["trained"][kind]]
        exact = np.mean([p == t for p, t in zip(predicted, target)])
        assert exact > 0.5, (kind, exact)  # chance is under 1 % for 3-5 tokens out of 7
    # A beam of width 1 is greedy decoding.
    greedy = [_until_eos(row) for row in result["trained"]["greedy"]]
    assert [_until_eos(row) for row in result["trained"]["beam1"]] == greedy


def test_seq2seq_checkpoint_has_tf115_variable_names(seq2seq_run):
    variables = dict(seq2seq_run[0]["estimator"]["variables"])
    model = {
        name: shape
        for name, shape in variables.items()
        if "/Adam" not in name and not name.startswith("beta")
    }
    assert model == TF115_VARIABLES
    assert variables["decode/memory_layer/kernel/Adam"] == [UNITS, UNITS]


def test_seq2seq_tf115_named_checkpoint_restores_under_the_runner(seq2seq_run):
    restored = seq2seq_run[0]["estimator"]["tf115"]
    for kind in ("greedy", "beam", "beam1"):
        ids = np.array(restored[kind])
        assert ids.shape == (50, 6) and ids.min() >= 0 and ids.max() < VOCAB, kind
    # Its (random) weights are not the trained ones: the checkpoint really was read.
    assert restored["greedy"] != seq2seq_run[0]["estimator"]["trained"]["greedy"]


def test_seq2seq_report_names_the_port_and_tfa(seq2seq_run):
    report = seq2seq_run[1]
    for name in ("BeamSearchDecoder", "BahdanauAttention", "TrainingHelper", "sequence_loss"):
        assert name in report, report
    assert "a port of TF 1.15's" in report and "tensorflow_addons.seq2seq" in report


def test_basic_decoder_with_training_helper_equals_dynamic_rnn(seq2seq_run):
    result = seq2seq_run[0]["reference"]["basic_decoder"]
    np.testing.assert_allclose(result["decoded"], result["reference"], atol=1e-6)
    np.testing.assert_allclose(result["h"], result["reference_h"], atol=1e-6)
    assert result["lengths"] == [3, 2]
    assert result["variables"] == ["decoder/basic_lstm_cell/kernel", "decoder/basic_lstm_cell/bias"]


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _gru(x, h, variables, prefix):
    gates = _sigmoid(
        np.concatenate([x, h], 1) @ variables[f"{prefix}/gates/kernel"]
        + variables[f"{prefix}/gates/bias"]
    )
    r, u = np.split(gates, 2, axis=1)
    c = np.tanh(
        np.concatenate([x, r * h], 1) @ variables[f"{prefix}/candidate/kernel"]
        + variables[f"{prefix}/candidate/bias"]
    )
    return u * h + (1 - u) * c


def _attention_reference(kind, memory, inputs, variables, lengths=(4, 2)):
    """AttentionWrapper(GRUCell(6), mechanism) over ``inputs``, in NumPy from the variables."""
    wrapper = "rnn/attention_wrapper"
    mask = np.arange(memory.shape[1])[None, :] < np.array(lengths)[:, None]
    values = memory * mask[:, :, None]
    keys = values @ variables["memory_layer/kernel"]
    h = np.zeros((memory.shape[0], 6), np.float32)
    attention = np.zeros_like(h)
    outputs, alignments_all = [], []
    for t in range(inputs.shape[1]):
        h = _gru(np.concatenate([inputs[:, t], attention], 1), h, variables, f"{wrapper}/gru_cell")
        if kind.startswith("bahdanau"):
            scope = f"{wrapper}/bahdanau_attention"
            query = h @ variables[f"{scope}/query_layer/kernel"]
            v = variables[f"{scope}/attention_v"]
            if kind.endswith("norm"):
                v = variables[f"{scope}/attention_g"] * v / np.sqrt(np.sum(v * v))
                score = np.sum(
                    v * np.tanh(keys + query[:, None] + variables[f"{scope}/attention_b"]), 2
                )
            else:
                score = np.sum(v * np.tanh(keys + query[:, None]), 2)
        else:
            score = np.einsum("bd,bmd->bm", h, keys)
            if kind.endswith("scaled"):
                score = score * variables[f"{wrapper}/luong_attention/attention_g"]
        score = np.where(mask, score, -np.inf)
        alignments = np.exp(score - score.max(1, keepdims=True))
        alignments /= alignments.sum(1, keepdims=True)
        attention = np.einsum("bm,bmd->bd", alignments, values)
        outputs.append(attention)
        alignments_all.append(alignments)
    return np.stack(outputs, 1), np.stack(alignments_all, 0)


@pytest.mark.parametrize("kind", ["bahdanau", "luong", "bahdanau_norm", "luong_scaled"])
def test_attention_equals_numpy_from_the_variables(seq2seq_run, kind):
    reference = seq2seq_run[0]["reference"]
    result = reference[kind]
    variables = {name: np.array(value) for name, value in result["variables"].items()}
    outputs, alignments = _attention_reference(
        kind, np.array(reference["memory"]), np.array(reference["inputs"]), variables
    )
    np.testing.assert_allclose(result["alignments"], alignments, atol=1e-5)
    np.testing.assert_allclose(result["outputs"], outputs, atol=1e-5)
    assert np.all(np.array(result["alignments"])[:, 1, 2:] == 0)  # masked past length 2


def test_monotonic_attention_variables_and_alignments():
    memory = np.random.RandomState(1).randn(2, 4, 6).astype(np.float32)
    with tf.Graph().as_default(), tf.Session() as sess:
        results = {}
        for mechanism_class in (
            seq2seq.BahdanauMonotonicAttention,
            seq2seq.LuongMonotonicAttention,
        ):
            with tf.variable_scope(mechanism_class.__name__):
                mechanism = mechanism_class(
                    6, memory, memory_sequence_length=[4, 3], score_bias_init=-1.0
                )
                cell = seq2seq.AttentionWrapper(
                    tf.nn.rnn_cell.GRUCell(6), mechanism, alignment_history=True
                )
                _, state = tf.nn.dynamic_rnn(
                    cell,
                    memory[:, :3],
                    initial_state=cell.zero_state(2, tf.float32),
                    dtype=tf.float32,
                )
                results[mechanism_class.__name__] = state.alignment_history.stack()
        sess.run(tf.global_variables_initializer())
        values = sess.run(results)
        names = sorted(v.op.name for v in tf.global_variables())
    assert (
        "BahdanauMonotonicAttention/rnn/attention_wrapper/bahdanau_monotonic_attention/attention_score_bias"
        in names
    )
    assert (
        "LuongMonotonicAttention/rnn/attention_wrapper/luong_monotonic_attention/attention_score_bias"
        in names
    )
    for alignments in values.values():
        sums = alignments.sum(-1)
        assert np.all(sums <= 1 + 1e-5) and np.all(sums > 0)
        assert np.all(alignments[:, 1, 3] == 0)  # masked past length 3


def test_seq2seq_refuses_wrong_arguments_naming_them():
    with tf.Graph().as_default():
        cell = tf.nn.rnn_cell.BasicLSTMCell(4)
        state = cell.zero_state(2, tf.float32)
        with pytest.raises(TypeError, match="helper"):
            seq2seq.BasicDecoder(cell, "not a helper", state)
        with pytest.raises(TypeError, match="decoder"):
            seq2seq.dynamic_decode(cell)
        with pytest.raises(ValueError, match="start_tokens"):
            seq2seq.GreedyEmbeddingHelper(tf.zeros([5, 3]), [[1, 1]], 2)
        with pytest.raises(ValueError, match="end_token"):
            seq2seq.GreedyEmbeddingHelper(tf.zeros([5, 3]), [1, 1], [2])
        with pytest.raises(ValueError, match="sequence_length"):
            seq2seq.TrainingHelper(tf.zeros([2, 3, 4]), [[3, 3]])
        with pytest.raises(ValueError, match="coverage_penalty_weight"):
            seq2seq.BeamSearchDecoder(cell, tf.zeros([5, 3]), [1, 1], 2, state, 1, None, 0.0, 0.5)
        mechanism = seq2seq.LuongAttention(4, tf.zeros([2, 3, 4]))
        with pytest.raises(ValueError, match="attention_layer_size"):
            seq2seq.AttentionWrapper(cell, mechanism, 4, attention_layer=tf.layers.Dense(4))
        with pytest.raises(TypeError, match="attention_mechanism"):
            seq2seq.AttentionWrapper(cell, "luong")
