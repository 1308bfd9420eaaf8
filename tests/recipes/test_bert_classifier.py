"""``recipes.bert_classifier`` and its private parts: tokeniser, GLUE processors, TFRecord caches
written by concurrent tasks, encoder variable names, warm start from a BERT-named checkpoint, and
the whole program at test size, on one machine and on a loopback cluster."""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import threading

import numpy as np
import pytest

from recipes import _previous_run as previous_run
from recipes._bert import features, modeling, processors, sample_data, tokenization
from tests.conftest import bfloat16_is_emulated, captured_tf_log, run_program, run_recipe_cases
from tfest_kit import model_fn
from tfest_kit._tf import estimator, tf, tf2

# --- tokenisation -------------------------------------------------------------------------

_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "want", "##want", "##ed", "wa", "un", "runn"]
_VOCAB += ["##ing", ",", "hello", "!", "how", "are", "you", "?"]


@pytest.fixture
def vocab_file(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(_VOCAB) + "\n")
    return str(path)


def test_basic_tokenizer_lower_cases_strips_accents_and_splits_punctuation():
    tokenizer = tokenization.BasicTokenizer(do_lower_case=True)
    assert tokenizer.tokenize(" \tHeLLo!how  \n Are yoU?  ") == [
        "hello", "!", "how", "are", "you", "?",
    ]  # fmt: skip
    assert tokenizer.tokenize("H\u00e9llo Caf\u00e9") == ["hello", "cafe"]
    assert tokenizer.tokenize("don't, (x)") == ["don", "'", "t", ",", "(", "x", ")"]
    assert tokenizer.tokenize("ah\u535a\u63a8zz") == ["ah", "\u535a", "\u63a8", "zz"]
    assert tokenizer.tokenize(b"bytes\x00 \xef\xbf\xbdok") == ["bytes", "ok"]


def test_basic_tokenizer_keeps_case_and_accents_when_asked():
    tokenizer = tokenization.BasicTokenizer(do_lower_case=False)
    assert tokenizer.tokenize(" \tHeLLo!how  \n Are yoU?  ") == [
        "HeLLo", "!", "how", "Are", "yoU", "?",
    ]  # fmt: skip
    assert tokenizer.tokenize("H\u00e9llo") == ["H\u00e9llo"]


def test_wordpiece_splits_longest_first_and_unknown_words():
    vocab = {token: i for i, token in enumerate(_VOCAB)}
    tokenizer = tokenization.WordpieceTokenizer(vocab)
    assert tokenizer.tokenize("") == []
    assert tokenizer.tokenize("unwanted running") == ["un", "##want", "##ed", "runn", "##ing"]
    assert tokenizer.tokenize("unwantedX running") == ["[UNK]", "runn", "##ing"]
    assert tokenization.WordpieceTokenizer(vocab, max_input_chars_per_word=5).tokenize(
        "running"
    ) == ["[UNK]"]


def test_full_tokenizer_maps_to_ids(vocab_file):
    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
    tokens = tokenizer.tokenize("UNwant\u00e9d,running")
    assert tokens == ["un", "##want", "##ed", ",", "runn", "##ing"]
    assert tokenizer.convert_tokens_to_ids(tokens) == [8, 5, 6, 11, 9, 10]
    assert tokenizer.convert_tokens_to_ids(["nope"]) == [1]  # [UNK]
    assert tokenizer.convert_ids_to_tokens([12, 13]) == ["hello", "!"]


def test_tokenizer_errors_name_the_problem(tmp_path):
    with pytest.raises(ValueError, match="vocab_file` does not exist"):
        tokenization.FullTokenizer(str(tmp_path / "missing.txt"))
    with pytest.raises(ValueError, match="do_lower_case` must be True"):
        tokenization.check_case_matches_checkpoint(
            False, "/models/uncased_L-12_H-768_A-12/bert_model.ckpt"
        )
    tokenization.check_case_matches_checkpoint(
        False, "/models/cased_L-12_H-768_A-12/bert_model.ckpt"
    )


# --- processors ---------------------------------------------------------------------------


def _write(directory, name, rows):
    directory.mkdir(exist_ok=True)
    (directory / name).write_text("".join("\t".join(row) + "\n" for row in rows))


def test_mrpc_processor(tmp_path):
    header = ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"]
    _write(tmp_path, "train.tsv", [header, ["1", "7", "8", "A cat sat.", "The cat sat."]])
    _write(tmp_path, "dev.tsv", [header, ["0", "1", "2", 'He said "no".', "Rain."]])
    _write(tmp_path, "test.tsv", [["index", *header[1:]], ["0", "3", "4", "Q one", "Q two"]])
    processor = processors.get_processor("MRPC")
    assert processor.get_labels() == ["0", "1"]
    train = processor.get_train_examples(str(tmp_path))
    assert train == [processors.InputExample("train-1", "A cat sat.", "The cat sat.", "1")]
    dev = processor.get_dev_examples(str(tmp_path))
    assert (dev[0].text_a, dev[0].label) == ('He said "no".', "0")  # quotes kept
    test = processor.get_test_examples(str(tmp_path))
    assert (test[0].text_a, test[0].text_b, test[0].label) == ("Q one", "Q two", "0")


def test_cola_processor(tmp_path):
    rows = [["gj04", "1", "", "Our friends won't buy this."], ["gj04", "0", "*", "They drank pub."]]
    _write(tmp_path, "train.tsv", rows)
    _write(tmp_path, "test.tsv", [["index", "sentence"], ["0", "Bill left."]])
    processor = processors.get_processor("cola")
    train = processor.get_train_examples(str(tmp_path))
    assert [(e.text_a, e.text_b, e.label) for e in train] == [
        ("Our friends won't buy this.", None, "1"),
        ("They drank pub.", None, "0"),
    ]
    assert [(e.text_a, e.label) for e in processor.get_test_examples(str(tmp_path))] == [
        ("Bill left.", "0")
    ]


def test_sst2_processor_and_errors(tmp_path):
    _write(tmp_path, "train.tsv", [["sentence", "label"], ["a gorgeous film ", "1"]])
    _write(tmp_path, "dev.tsv", [["sentence", "label"], ["dull", "2"]])
    _write(tmp_path, "test.tsv", [["index", "sentence"], ["0", "so so"]])
    processor = processors.get_processor("sst2")
    assert [(e.text_a, e.label) for e in processor.get_train_examples(str(tmp_path))] == [
        ("a gorgeous film ", "1")
    ]
    assert processor.get_test_examples(str(tmp_path))[0].text_a == "so so"
    with pytest.raises(ValueError, match=r"label must be one of \['0', '1'\]. Got: '2'"):
        processor.get_dev_examples(str(tmp_path))
    with pytest.raises(ValueError, match="has no train.tsv"):
        processor.get_train_examples(str(tmp_path / "nowhere"))
    with pytest.raises(ValueError, match="task_name` must be one of"):
        processors.get_processor("qnli")


def test_sample_task_is_read_and_featurised(tmp_path):
    task = sample_data.write_sample_task(str(tmp_path), num_train=20, num_dev=6, num_test=4)
    processor = processors.get_processor("sample")
    train = processor.get_train_examples(task.data_dir)
    assert len(train) == 20 and {e.label for e in train} == {"0", "1"}
    assert len(processor.get_test_examples(task.data_dir)) == 4
    tokenizer = tokenization.FullTokenizer(task.vocab_file)
    feature = features.convert_single_example(train[0], ["0", "1"], 40, tokenizer)
    ids = feature.input_ids
    assert ids[0] == tokenizer.vocab["[CLS]"] and ids.count(tokenizer.vocab["[SEP]"]) == 2
    assert len(ids) == len(feature.input_mask) == len(feature.segment_ids) == 40
    assert sum(feature.segment_ids) == ids.index(0) - ids.index(tokenizer.vocab["[SEP]"]) - 1
    short = features.convert_single_example(train[0], ["0", "1"], 8, tokenizer)
    assert sum(short.input_mask) == 8 and short.input_ids[-1] == tokenizer.vocab["[SEP]"]


# --- TFRecord caches ----------------------------------------------------------------------


def _count_records(path: str) -> int:
    return sum(1 for _ in tf.io.tf_record_iterator(path))


@pytest.fixture
def sample_examples(tmp_path):
    task = sample_data.write_sample_task(
        str(tmp_path / "data"), num_train=60, num_dev=2, num_test=2
    )
    examples = processors.get_processor("sample").get_train_examples(task.data_dir)
    return examples, tokenization.FullTokenizer(task.vocab_file)


def test_cached_tfrecord_concurrent_writers_never_show_a_partial_file(tmp_path, sample_examples):
    examples, tokenizer = sample_examples
    path = str(tmp_path / "train.tf_record")
    errors, counts, done = [], [], threading.Event()

    def write():
        try:
            for _ in range(3):
                # A stale meta forces a rewrite each time, as if every task came first.
                # Another writer thread may remove it between a check and the removal.
                with contextlib.suppress(FileNotFoundError):
                    os.remove(path + ".meta.json")
                features.cached_tfrecord(examples, ["0", "1"], 16, tokenizer, path)
        except Exception as e:  # reported below with the others
            errors.append(e)

    def read():
        try:
            while not done.is_set():
                if os.path.exists(path):
                    counts.append(_count_records(path))
        except Exception as e:  # a partial file ("truncated record"): reported below
            errors.append(e)

    reader = threading.Thread(target=read)
    reader.start()
    writers = [threading.Thread(target=write) for _ in range(4)]
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join()
    done.set()
    reader.join()
    assert not errors, errors
    assert counts and set(counts) == {60}, sorted(set(counts))
    assert _count_records(path) == 60
    assert not [name for name in os.listdir(tmp_path) if ".tmp-" in name]


def test_cached_tfrecord_reuses_a_complete_cache_and_rewrites_a_cut_one(
    tmp_path, sample_examples, tf_log_lines
):
    examples, tokenizer = sample_examples
    path = str(tmp_path / "train.tf_record")
    features.cached_tfrecord(examples, ["0", "1"], 16, tokenizer, path)
    size = os.path.getsize(path)
    meta = json.loads((tmp_path / "train.tf_record.meta.json").read_text())
    assert (meta["num_examples"], meta["num_bytes"]) == (60, size)
    features.cached_tfrecord(examples, ["0", "1"], 16, tokenizer, path)
    assert any(line.startswith("Reusing cached TFRecords") for line in tf_log_lines)
    with open(path, "r+b") as f:  # a file cut short, e.g. by a crash of an older writer
        f.truncate(size // 2)
    features.cached_tfrecord(examples, ["0", "1"], 16, tokenizer, path)
    assert os.path.getsize(path) == size and _count_records(path) == 60
    # A different sequence length is another fingerprint: rewritten, not reused.
    features.cached_tfrecord(examples, ["0", "1"], 20, tokenizer, path)
    assert os.path.getsize(path) != size


def test_cached_tfrecord_failed_write_leaves_nothing_behind(tmp_path, sample_examples):
    examples, tokenizer = sample_examples
    path = str(tmp_path / "bad.tf_record")
    with pytest.raises(ValueError, match="label must be one of"):
        features.cached_tfrecord(examples, ["0", "2"], 16, tokenizer, path)
    assert os.listdir(tmp_path) == ["data"]


# --- encoder ------------------------------------------------------------------------------

_TINY = modeling.BertConfig(
    vocab_size=30,
    hidden_size=16,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=32,
    max_position_embeddings=16,
    type_vocab_size=2,
)
_SEQ = 8


def _bert_names(layers: int) -> set:
    names = {
        "bert/embeddings/word_embeddings",
        "bert/embeddings/token_type_embeddings",
        "bert/embeddings/position_embeddings",
        "bert/embeddings/LayerNorm/beta",
        "bert/embeddings/LayerNorm/gamma",
        "bert/pooler/dense/kernel",
        "bert/pooler/dense/bias",
        "output_weights",
        "output_bias",
    }
    for i in range(layers):
        prefix = f"bert/encoder/layer_{i}/"
        for dense in (
            "attention/self/query",
            "attention/self/key",
            "attention/self/value",
            "attention/output/dense",
            "intermediate/dense",
            "output/dense",
        ):
            names |= {prefix + dense + "/kernel", prefix + dense + "/bias"}
        for norm in ("attention/output/LayerNorm", "output/LayerNorm"):
            names |= {prefix + norm + "/beta", prefix + norm + "/gamma"}
    return names


def _features():
    return {
        name: tf.placeholder(tf.int32, [None, _SEQ], name=name) for name in features.FEATURE_NAMES
    }


def test_encoder_variables_follow_the_bert_checkpoint_layout():
    with tf.Graph().as_default():
        logits = modeling.classifier_network(_TINY, 3)(_features(), estimator.ModeKeys.EVAL, {})
        names = {v.op.name for v in tf.global_variables()}
        shapes = {v.op.name: v.shape.as_list() for v in tf.global_variables()}
    assert names == _bert_names(2)
    assert logits.shape.as_list() == [None, 3]
    assert shapes["bert/encoder/layer_1/intermediate/dense/kernel"] == [16, 32]
    assert shapes["bert/embeddings/position_embeddings"] == [16, 16]
    assert shapes["output_weights"] == [3, 16]


_QUERY = "bert/encoder/layer_1/attention/self/query/kernel"


def _variable(name: str):
    return next(v for v in tf.global_variables() if v.op.name == name)


def test_warm_start_from_a_checkpoint_with_bert_names(tmp_path):
    network = modeling.classifier_network(_TINY, 2)
    with tf.Graph().as_default():
        network(_features(), estimator.ModeKeys.EVAL, {})
        with tf.Session() as session:
            session.run(tf.global_variables_initializer())
            saved = session.run(_variable(_QUERY))
            prefix = tf.train.Saver().save(session, str(tmp_path / "bert_model.ckpt"))
    reader = tf.train.load_checkpoint(prefix)
    assert set(reader.get_variable_to_shape_map()) == _bert_names(2)

    with captured_tf_log() as lines:
        fn = model_fn.classifier(network, 2, optimizer="adamw", init_checkpoint=prefix)
        with tf.Graph().as_default():
            spec = fn(_features(), tf.zeros([4], tf.int32), estimator.ModeKeys.TRAIN, {})
            with tf.Session() as session:
                session.run(tf.global_variables_initializer())
                restored = session.run(_variable(_QUERY))
    assert spec.train_op is not None
    np.testing.assert_array_equal(restored, saved)
    marked = [line for line in lines if line.endswith("*INIT_FROM_CKPT*")]
    assert len(marked) == len(_bert_names(2)), "\n".join(lines)
    assert any("name = bert/embeddings/LayerNorm/gamma," in line for line in marked)


# --- the program --------------------------------------------------------------------------

_TEST_SIZE = [
    "--sample_train_size=2000",
    "--sample_dev_size=200",
    "--sample_test_size=20",
    "--num_train_epochs=8",
    "--max_seq_length=28",
    "--save_checkpoints_steps=250",
    "--early_stopping_patience_steps=1000",
]


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["float32", "bfloat16", "float32 replicas"])
def test_recipe_at_test_size(tmp_path, precision):
    if precision == "bfloat16" and bfloat16_is_emulated():
        pytest.skip("oneDNN off or no bfloat16 instructions on this CPU")
    out = tmp_path / "run"
    args = [f"--output_dir={out}", f"--{'' if precision == 'bfloat16' else 'no'}bfloat16"]
    # Two float32 replicas, 16 of the 32 examples each (run_config(cpu_replicas=2)), for 20
    # steps: that they train the model one copy trains is test_cpu_replicas.py's.
    replicas = precision == "float32 replicas"
    args += ["--cpu_replicas=2"] if replicas else []
    epochs = ["--num_train_epochs=1", "--sample_train_size=640"] if replicas else []
    args = ["-m", "recipes.bert_classifier", *args, *_TEST_SIZE, *epochs]
    proc = run_program(args)
    text = proc.stdout
    lines = text.splitlines()
    assert lines[1].startswith("model: a generated tiny BERT (2 layers, hidden 64, 2 heads)")
    assert "trained from scratch" in lines[1]
    steps = 20 if replicas else 500
    assert f"training from step 0 to {steps}" in lines, text
    precision_named = {
        "float32": "float32",
        "bfloat16": "bfloat16 mixed precision",
        "float32 replicas": "float32, 2 CPU replicas",
    }[precision]
    log = proc.stderr
    assert re.search(rf"Training: .*, learning rate [\d.e-]+, {precision_named}\n", log), log
    assert "cannot take effect" not in log  # one thread per op, set before TensorFlow ran
    accuracy = float(re.search(r"Eval accuracy: ([\d.]+)", text).group(1))
    assert replicas or accuracy >= 0.75, text  # 20 steps with replicas: at chance still
    rows = (out / "test_results.tsv").read_text().splitlines()
    assert len(rows) == 20
    probabilities = np.array([[float(p) for p in row.split("\t")] for row in rows])
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-4)
    assert re.search(r"Predictor answer: '.+' / '.+' -> label [01] \(p=[\d.]+\)", text), text
    # output_dir first (named even if the run is stopped), the export line worded as in every
    # recipe.
    assert text.splitlines()[0] == f"output_dir: {out}" and text.count("output_dir: ") == 1
    assert re.search(rf"^SavedModel exported: {re.escape(str(out))}/export/best/\d+$", text, re.M)
    for name in ("train.tf_record", "eval.tf_record", "predict.tf_record"):
        assert (out / name).exists()
    assert os.listdir(out / "export" / "best")
    if precision == "float32":
        _rerun_trains_nothing_and_another_length_answers(args, out, text)


def _rerun_trains_nothing_and_another_length_answers(args, out, first_run: str) -> None:
    exported = [line for line in first_run.splitlines() if line.startswith("SavedModel ")]
    assert len(exported) == 1 and exported[0].startswith("SavedModel exported: "), first_run
    export_dir = exported[0].split(": ", 1)[1]
    # The rerun trains nothing and the best exporter exports nothing: it said "exported".
    proc = run_program(args)
    lines = proc.stdout.splitlines()
    assert (
        f"already trained to step 500 in {out}; raise --num_train_epochs to train more" in lines
    ), proc.stdout
    # Not "from this checkpoint": a best export may be of an older one than the run's.
    assert f"SavedModel (the best so far, exported by an earlier run) {export_dir}" in lines
    assert not any(line.startswith("training from") for line in lines), proc.stdout

    # export/best of these runs takes inputs of length 28; answering a rerun's length-32
    # example from it failed at the very end with a PredictorInputError.
    size = [a for a in args if not a.startswith("--max_seq_length")]
    proc = run_program([*size, "--max_seq_length=32"])
    assert re.search(r"Predictor answer: '.+' / '.+' -> label [01]", proc.stdout), proc.stdout
    assert os.listdir(out / "export" / "final")


# --- the program on a loopback cluster ----------------------------------------------------

_CLUSTER_SIZE = [
    "--sample_train_size=320",
    "--sample_dev_size=64",
    "--sample_test_size=12",
    "--num_train_epochs=2",  # 20 steps
    "--max_seq_length=28",
    "--save_checkpoints_steps=10",
    "--log_every_steps=10",
]


def _task_lines(output: str, task: str) -> list[str]:
    prefix = f"[{task}] "
    return [line[len(prefix) :] for line in output.splitlines() if line.startswith(prefix)]


def _read_all(input_file: str, num_examples: int) -> int:
    """Counts the examples the recipe's input_fn reads from a cache file."""
    input_fn = features.input_fn_builder(input_file, 28, is_training=False, drop_remainder=False)
    read = 0
    with tf.Graph().as_default():
        batch = tf.data.make_one_shot_iterator(input_fn({"batch_size": 16})).get_next()
        with tf.Session() as session:
            try:
                while True:
                    read += len(session.run(batch)[1])
            except tf.errors.OutOfRangeError:
                pass
    return read


@pytest.mark.slow
def test_recipe_on_a_loopback_cluster(tmp_path):
    out = tmp_path / "run"
    proc = run_program(
        [
            "-m", "tfest_kit.cluster", "--workers", "1", "--ps", "1", "--evaluator",
            "--timeout", "240", "--evaluator-grace", "60", "--",
            sys.executable, "-m", "recipes.bert_classifier", f"--output_dir={out}", *_CLUSTER_SIZE,
        ],
        timeout=300,
    )  # fmt: skip
    output = proc.stdout + proc.stderr
    chief = _task_lines(output, "chief:0")
    # Results, predictions and the final export are the chief's alone.
    assert sum(line.startswith("Eval accuracy:") for line in chief) == 1, output
    # Asynchronous ps training may overshoot max_steps=20 by a step per worker; the chief's
    # metrics are those of the final checkpoint all the same.
    final_step = int(tf.train.load_checkpoint(str(out)).get_tensor("global_step"))
    assert 20 <= final_step < 30
    assert f"step {final_step})" in next(x for x in chief if x.startswith("Eval accuracy:"))
    assert f"Wrote 12 predictions to {out / 'test_results.tsv'}" in chief, output
    assert any(re.match(r"Predictor answer: '.+' / '.+' -> label [01]", x) for x in chief)
    for task in ("worker:0", "evaluator:0", "ps:0"):
        lines = _task_lines(output, task)
        assert lines, output
        text = "\n".join(lines)
        for chief_only in ("Eval accuracy:", "predictions to", "Predictor answer", "export/final"):
            assert chief_only not in text, f"{task} did the chief's work:\n{output}"
    for task in ("worker:0", "evaluator:0"):
        assert f"Task {task} done; the chief writes" in "\n".join(_task_lines(output, task))
    assert "training done; stopping the parameter servers" in output
    # The evaluator waits for checkpoints without spinning (it logged this on every turn).
    assert "throttle_secs is set as 0" not in output

    assert [p.name for p in tmp_path.rglob("test_results.tsv")] == ["test_results.tsv"]
    rows = (out / "test_results.tsv").read_text().splitlines()
    assert len(rows) == 12
    assert len(list(tmp_path.rglob("eval_results.txt"))) == 1
    assert f"global_step = {final_step}\n" in (out / "eval_results.txt").read_text()
    # The chief answers from its own export of the final checkpoint; the evaluator's best
    # exports are beside it.
    for name in ("final", "best"):
        exports = [p for p in (out / "export" / name).iterdir() if p.name.isdigit()]
        assert exports and (exports[0] / "saved_model.pb").exists(), name
    # Every task wrote the caches; they are complete and the input_fn reads them whole.
    assert not [p for p in out.iterdir() if ".tmp-" in p.name]
    for name, count in (("train", 320), ("eval", 64), ("predict", 12)):
        path = out / f"{name}.tf_record"
        meta = json.loads((out / f"{name}.tf_record.meta.json").read_text())
        assert (meta["num_examples"], meta["num_bytes"]) == (count, path.stat().st_size)
        assert _read_all(str(path), count) == count


# --- bad input stops the program before any work --------------------------------------------


# Each case a line of the output it must print (`{home}`, `{tmp}` filled in) and, for the
# runs given an --output_dir, that nothing was written there.
_ZERO_MEANS_DEFAULT = [
    # An explicit 0 used to fall back silently to the data-dependent default.
    (["--learning_rate=0"], "--learning_rate must be > 0 when given"),
    (["--save_checkpoints_steps=0"], "flag --save_checkpoints_steps=0: 0 is not a positive"),
    (["--sample_test_size=0"], "flag --sample_test_size=0: 0 is not a positive integer"),
]
_UNUSABLE_VALUES = [
    (["--task_name=bogus"], "`task_name` must be one of ['cola', 'mrpc', 'sample', "),
    # Used to be raised only once training built its graph, after the TFRecord caches.
    (
        ["--init_checkpoint=~/no_such_ckpt"],
        "`init_checkpoint` does not exist: expected a checkpoint prefix with a `.index` file "
        "next to it, or a directory holding checkpoints. Got: '{home}/no_such_ckpt'",
    ),
    (
        ["--data_dir=~/data", "--vocab_file=~/vocab.txt", "--bert_config_file=~/none.json"],
        "`bert_config_file` does not exist. Got: '{home}/none.json'",
    ),
    (
        ["--output_dir=~/a_file/out"],
        "cannot create --output_dir {home}/a_file/out: {home}/a_file is not a directory. "
        "Give a directory that can be created and written to",
    ),
]
_ONE_LINE_ERRORS = [
    # Used to fail in the first evaluation (a 25-frame traceback), after the caches.
    (
        ["--early_stopping_metric=acc", "--early_stopping_patience_steps=5"],
        "--early_stopping_metric must be one of accuracy, f1, average_loss, loss (the "
        "metrics evaluation reports). Got: 'acc'",
    ),
    # Early stopping used to be dropped without a word.
    (
        ["--early_stopping_patience_steps=5", "--nodo_eval"],
        "--early_stopping_patience_steps needs evaluation to watch a metric: drop "
        "--nodo_eval or set --early_stopping_patience_steps=0. Got: "
        "--early_stopping_patience_steps=5 --nodo_eval",
    ),
    # Used to print ~130 lines (the module's help) and leave the flags record behind.
    (
        ["--task_name=mrpc"],
        "--task_name=mrpc needs --data_dir, --vocab_file, --bert_config_file (or use "
        "--task_name=sample without data flags for the built-in task).",
    ),
    # A typo'd path used to leave output_dir and its flags record behind.
    (
        [
            "--task_name=mrpc",
            "--data_dir=/nonexistent_dir",
            "--vocab_file=/nonexistent.txt",
            "--bert_config_file=/nonexistent.json",
        ],
        "--data_dir=/nonexistent_dir and --vocab_file=/nonexistent.txt: no such directory "
        "or file.",
    ),
    (
        ["--cpu_replicas=3"],
        "--train_batch_size must be a multiple of --cpu_replicas: each replica trains on "
        "its share. Got: --train_batch_size=32 --cpu_replicas=3",
    ),
    # Used to write sample_data/ (424 KB) and the flags record first.
    (
        ["--max_seq_length=1000"],
        "--max_seq_length must be at most max_position_embeddings (128). Got: 1000",
    ),
]


@pytest.mark.slow
def test_recipe_stops_bad_command_lines_before_any_work(tmp_path):
    # One recipe process per case, forked after one import of the recipe (and TensorFlow).
    home, cwd, temp = tmp_path / "home", tmp_path / "cwd", tmp_path / "tmp"
    for directory in (home, cwd, temp, home / "data"):
        directory.mkdir()
    (home / "a_file").write_text("")  # the data flags that exist, beside a config that does not
    (home / "vocab.txt").write_text("")
    sample_data.write_sample_task(str(home / "task"), 64, 16, 4)
    test_file = home / "task" / "test.tsv"
    # The header only: an empty split stops the run before training, and the tilde-expanded
    # paths reach that check.
    test_file.write_text(test_file.read_text().splitlines()[0] + "\n")
    # "~" as the shell leaves it after "--flag=" (HOME given), and a default (temporary)
    # --output_dir made in TMPDIR.
    env = {"HOME": str(home), "TMPDIR": str(temp)}
    cases, checks = [], []

    def case(args, output_dir, check, **more_env):
        cases.append({"args": [*output_dir, *args], "env": {**env, **more_env}, "cwd": cwd})
        checks.append((args, output_dir, check))

    for i, (args, message) in enumerate(_ZERO_MEANS_DEFAULT + _UNUSABLE_VALUES):
        case(args, [f"--output_dir={tmp_path / f'out{i}'}"], message.format(home=home))
    for args, message in _ONE_LINE_ERRORS:
        case(args, [], [f"bert_classifier: error: {message}"])  # stderr, all of it
    # The sample data used to be written into a given --output_dir first.
    case(["--max_seq_length=1000"], [f"--output_dir={tmp_path / 'given'}"], checks[-1][2])
    # Each task of a cluster would make its own temporary --output_dir.
    tf_config = {"cluster": {"chief": ["127.0.0.1:1"]}, "task": {"type": "chief", "index": 0}}
    shared = "every task of a cluster needs the same --output_dir"
    case([], [], shared, TF_CONFIG=json.dumps(tf_config))
    tilde = ["--data_dir=~/task", "--vocab_file=~/task/vocab.txt", "--output_dir=~/out"]
    tilde.append("--bert_config_file=~/task/bert_config.json")
    case(tilde, [], f"test.tsv in {home / 'task'} has no examples")
    # Used to evaluate and predict with an untrained model, then fail in export_saved_model.
    untrained = tmp_path / "untrained"
    untrained.mkdir()
    trained = f"--nodo_train needs a trained model in --output_dir, and {untrained} has no"
    case(["--nodo_train"], [f"--output_dir={untrained}"], trained)
    # A new --output_dir is refused before it is created: no empty directory is left behind.
    new = tmp_path / "new"
    case(["--nodo_train"], [f"--output_dir={new}"], f"and {new} has no checkpoint")

    procs = run_recipe_cases("bert_classifier", cases)
    for (args, output_dir, check), proc in zip(checks, procs):
        output = proc.stdout + proc.stderr
        assert proc.returncode == 1, (args, output)
        assert "Traceback" not in output, (args, output)
        if isinstance(check, list):
            assert proc.stderr.strip().splitlines() == check and proc.stdout == "", output
        else:
            assert check in output, (args, output)
        if output_dir:
            written = output_dir[0].split("=", 1)[1]
            assert not os.path.exists(written) or not os.listdir(written), (args, written)
    assert not list(temp.iterdir()) and not list(cwd.iterdir())
    tilde_run = procs[-3]
    assert "(--nodo_predict --nodo_export). Got: 0 test examples" in tilde_run.stderr
    assert not (home / "out").exists() and not new.exists()
    assert "Eval accuracy" not in procs[-2].stdout + procs[-2].stderr
    assert not (untrained / "test_results.tsv").exists()


def test_recipe_refuses_an_output_dir_holding_another_recipes_run(tmp_path):
    tf2.train.Checkpoint(v=tf2.Variable(1.0)).save(str(tmp_path / "ckpt"))
    previous_run.record(str(tmp_path), "mobilenet_cats_dogs", {"image_size": 96})
    before = sorted(os.listdir(tmp_path))
    proc = run_program(["-m", "recipes.bert_classifier", f"--output_dir={tmp_path}"], check_exit=1)
    assert proc.stderr.strip().splitlines() == [
        f"bert_classifier: error: --output_dir {tmp_path} holds a run of recipe "
        "mobilenet_cats_dogs (its checkpoint and mobilenet_cats_dogs_flags.json), not of "
        "bert_classifier; give another --output_dir"
    ], proc.stderr
    assert sorted(os.listdir(tmp_path)) == before
