"""BERT fine-tuning for GLUE-style classification, in the shape of google-research/bert's
``run_classifier.py`` but built on tfest_kit's public API.

WordPiece tokenisation from ``vocab.txt``; examples cached as TFRecords in ``--output_dir``; a
transformer encoder whose variables follow the released checkpoint layout
(``bert/encoder/layer_0/attention/self/query/kernel`` …), so ``--init_checkpoint`` from a
released BERT-Base warm-starts it (each variable is listed with ``*INIT_FROM_CKPT*``); the
model_fn from ``tfest_kit.model_fn.classifier`` (AdamW, linear warm-up and decay); the
estimator from ``tfest_kit.tpu`` (a TPU when there is one, CPU/GPU otherwise); progress and
early-stopping hooks; ``tfest_kit.train_and_evaluate`` with a ``best_exporter`` over
``bert_receiver``; predictions to ``test_results.tsv``; the export answering through
``Predictor``.

Without data flags it runs everything on a generated sentence-pair task (do the two sentences
share a topic?) with a tiny generated config (2 layers, hidden 64, 2 heads) and vocabulary,
trained from scratch in a minute or two on a CPU.

Run:

    python -m recipes.bert_classifier                       # built-in task, all stages
    python -m recipes.bert_classifier --task_name=mrpc --data_dir=glue_data/MRPC \\
        --vocab_file=$BERT_BASE_DIR/vocab.txt --bert_config_file=$BERT_BASE_DIR/bert_config.json \\
        --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --max_seq_length=128 \\
        --train_batch_size=32 --learning_rate=2e-5 --num_train_epochs=3 --output_dir=/tmp/mrpc

On a cluster the same command runs unchanged on every task; ``TF_CONFIG`` says which task a
process is, and every task must be given the same ``--output_dir`` (a shared directory or a
``gs://`` bucket). To try it on this machine (loopback ports, a task per process):

    python -m tfest_kit.cluster --workers 1 --ps 1 --evaluator -- \\
        python -m recipes.bert_classifier --output_dir=/tmp/bert_cluster

``TF_CONFIG`` is checked up front (``tfest_kit.cluster.validate_tf_config``); what a task does
then follows the estimator's ``RunConfig`` (``is_chief``, ``task_type``):

- Every task (ps included) writes the TFRecord caches; each file is written under a temporary
  name and renamed into place, so a task never reads another's half-written file. The
  generated sample data goes to ``sample_data/<type>_<index>`` per task for the same reason.
- chief and workers train through ``tfest_kit.train_and_evaluate``, variables on the ps tasks.
- The evaluator evaluates each new checkpoint and runs the best exporter
  (``export/best``); that is where the official API runs exporters.
- ps tasks serve variables and never return (the official behaviour); ``tfest_kit.cluster``
  stops them when the chief is done, on a real cluster the cluster manager does.
- Workers and the evaluator print ``Task <type>:<index> done; …`` and exit 0.
- Only the chief (or the single process without ``TF_CONFIG``) writes ``eval_results.txt``,
  ``test_results.tsv`` and the export the ``Predictor`` answer uses. Its metrics are those of
  the final checkpoint: the evaluator's if it has evaluated that step already, otherwise the
  chief evaluates it itself (``model_dir/eval_chief``). The chief never reads ``export/best``
  in a cluster (the evaluator may still be writing or deleting exports there); it exports
  its own final checkpoint to ``export/final`` and answers from that. On one machine the
  best export is complete when training returns, and the answer comes from ``export/best``.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from typing import Optional

import numpy as np
from absl import flags

import tfest_kit
from recipes import _flags
from recipes import _previous_run as previous_run
from recipes._bert import features, modeling, processors, sample_data, tokenization
from recipes._export import say_exported
from recipes._interrupt import Run, checkpoint_step
from tfest_kit import cluster, hooks, logs, model_fn, serving, tpu
from tfest_kit._tf import tf
from tfest_kit._warm_start import resolve_checkpoint

FLAGS = flags.FLAGS
RECIPE = "bert_classifier"
RUN = Run(RECIPE, dir_flag="output_dir")
# model_fn.classifier's metrics, and the two losses every evaluation reports: Estimator's
# mean of the batch losses and the head's mean over the examples.
_METRICS = ("accuracy", "f1")
_EVAL_METRICS = (*_METRICS, "average_loss", "loss")


class RecipeError(Exception):
    """A flag value, or flags that do not fit together: one line and exit status 1.

    Raised before anything is written (absl's ``app.UsageError`` printed the module's whole
    help, ~130 lines, after the error).
    """


flags.DEFINE_string(
    "task_name", "sample", f"Task: one of {sorted(processors.PROCESSORS)} (GLUE TSV layouts)."
)
_flags.define_path(
    "data_dir", None, "Directory with train.tsv, dev.tsv, test.tsv (sample: generated if unset)."
)
_flags.define_path("vocab_file", None, "vocab.txt of the BERT model (sample: generated).")
_flags.define_path("bert_config_file", None, "bert_config.json of the model (sample: generated).")
_flags.define_path("init_checkpoint", None, "Checkpoint to warm-start from (e.g. bert_model.ckpt).")
_flags.define_path("output_dir", None, "Checkpoints, caches, exports (default: a temp dir).")
flags.DEFINE_bool("do_lower_case", True, "Lower-case input (True for uncased models).")
flags.DEFINE_integer(
    "max_seq_length",
    None,
    "Word pieces per example after [CLS]/[SEP] (default 128; sample: 32).",
    lower_bound=3,  # [CLS] a [SEP]: room for at least one word piece
)
flags.DEFINE_bool("do_train", True, "Train.")
flags.DEFINE_bool("do_eval", True, "Evaluate on dev.tsv.")
flags.DEFINE_bool("do_predict", True, "Predict test.tsv into output_dir/test_results.tsv.")
flags.DEFINE_bool("do_export", True, "Export the best model and query it through a Predictor.")
flags.DEFINE_bool("use_tpu", False, "Use a TPU if one is found (falls back to CPU/GPU).")
flags.DEFINE_string("tpu_name", None, "TPU name or grpc:// address.")
flags.DEFINE_integer("iterations_per_loop", 100, "Steps per TPU loop.", lower_bound=1)
flags.DEFINE_bool(
    "bfloat16",
    False,
    "Without a TPU: train, evaluate and predict in bfloat16 mixed precision on a CPU with "
    "bfloat16 instructions (tfest_kit.session_config(mixed_precision='bfloat16'); variables, "
    "checkpoints and the export stay float32).",
)
flags.DEFINE_integer(
    "cpu_replicas",
    1,
    "Without a TPU: train this many float32 replicas side by side on the CPU, each on "
    "train_batch_size / N examples with one thread per op, their gradients averaged "
    "(tfest_kit.run_config(cpu_replicas=N)); faster for small models, e.g. one per core. "
    "1: one copy of the model.",
    lower_bound=1,
)
flags.DEFINE_integer("train_batch_size", 32, "Training batch size.", lower_bound=1)
flags.DEFINE_integer("eval_batch_size", 8, "Evaluation batch size.", lower_bound=1)
flags.DEFINE_integer("predict_batch_size", 8, "Prediction batch size.", lower_bound=1)
flags.DEFINE_float(
    "learning_rate",
    None,
    "Peak AdamW learning rate (default 5e-5; 1e-3 for the generated model trained from scratch).",
)
flags.DEFINE_enum(
    "optimizer",
    None,
    ["adamw", "adam"],
    "adamw (BERT's AdamWeightDecay; the default) or adam (the default for the generated model "
    "trained from scratch: without bias correction and with weight decay on the embeddings, "
    "adamw stalls on it).",
)
flags.DEFINE_float(
    "warmup_proportion",
    0.1,
    "Fraction of training with linear warm-up.",
    lower_bound=0.0,
    upper_bound=1.0,
)
flags.DEFINE_float(
    "num_train_epochs", None, "Epochs over train.tsv (default 3; 6 for the built-in task)."
)
flags.DEFINE_integer(
    "save_checkpoints_steps",
    None,
    "Checkpoint (and evaluate) every N steps (default: 5 per run).",
    lower_bound=1,
)
flags.DEFINE_integer("log_every_steps", 50, "Progress line every N steps.", lower_bound=1)
flags.DEFINE_integer(
    "early_stopping_patience_steps",
    0,
    "Stop after N steps without improvement (0: off).",
    lower_bound=0,
)
flags.DEFINE_string("early_stopping_metric", "loss", "Eval metric early stopping watches.")
flags.DEFINE_integer("sample_train_size", 3000, "Built-in task: training pairs.", lower_bound=1)
flags.DEFINE_integer("sample_dev_size", 400, "Built-in task: evaluation pairs.", lower_bound=1)
flags.DEFINE_integer("sample_test_size", 100, "Built-in task: test pairs.", lower_bound=1)
flags.DEFINE_integer("seed", 0, "Random seed (data generation, shuffling, initialisation).")
# Unset means "the default for this data"; an explicit 0 is a mistake, not a request for it.
for _name in ("num_train_epochs", "learning_rate"):
    flags.register_validator(
        _name, lambda value: value is None or value > 0, f"--{_name} must be > 0 when given"
    )


@dataclasses.dataclass(frozen=True)
class _Settings:
    """The flags resolved for this run; several defaults depend on the data and the task."""

    task: dict  # {} on a single machine; in a cluster the task this process runs
    output_dir: str
    labels: list[str]
    bert_config: modeling.BertConfig
    seq_length: int
    tokenizer: tokenization.FullTokenizer
    optimizer: str
    learning_rate: float
    train_examples: Optional[list[processors.InputExample]]  # None without --do_train
    dev_examples: Optional[list[processors.InputExample]]  # None without --do_eval
    test_examples: Optional[list[processors.InputExample]]  # None without predict or export
    num_train_steps: Optional[int]  # None without --do_train
    warmup_steps: int
    save_steps: int

    @property
    def distributed(self) -> bool:
        return bool(self.task)


def _uses_generated_task() -> bool:
    """True for the built-in task; checks the data flags first, writing nothing.

    Raises:
      RecipeError: for data flags that do not fit together or a task missing some.
    """
    if FLAGS.task_name.lower() == "sample" and not FLAGS.data_dir:
        if FLAGS.vocab_file or FLAGS.bert_config_file:
            raise RecipeError(
                "--vocab_file / --bert_config_file need --data_dir (the built-in task generates "
                "its own). Got: data_dir unset"
            )
        return True
    missing = [
        f"--{name}"
        for name in ("data_dir", "vocab_file", "bert_config_file")
        if not FLAGS[name].value
    ]
    if missing:
        raise RecipeError(
            f"--task_name={FLAGS.task_name} needs {', '.join(missing)} (or use "
            "--task_name=sample without data flags for the built-in task)."
        )
    absent = [
        f"--{name}={FLAGS[name].value}"
        for name, exists in (
            ("data_dir", tf.io.gfile.isdir(FLAGS.data_dir)),
            ("vocab_file", tf.io.gfile.exists(FLAGS.vocab_file)),
        )
        if not exists
    ]
    if absent:  # a typo, checked before output_dir and its flags record are written
        raise RecipeError(f"{' and '.join(absent)}: no such directory or file.")
    return False


def _bert_config(generated: bool) -> modeling.BertConfig:
    """The model's config, read (or, for the built-in task, made) before anything is written."""
    if generated:  # what write_sample_task writes into bert_config.json
        return sample_data.sample_config(len(sample_data.sample_vocab()))
    return modeling.BertConfig.from_json_file(FLAGS.bert_config_file)


def _resolve_inputs(output_dir: str, task: dict, generated: bool):
    """Returns (data_dir, vocab_file) for the flags; writes the built-in task if used."""
    if generated:
        sample_dir = os.path.join(output_dir, "sample_data")
        if task:
            # write_sample_task rewrites its files in place; one directory per task keeps a
            # task from reading a file another task is rewriting (the contents are identical).
            sample_dir = os.path.join(sample_dir, f"{task['type']}_{task['index']}")
        generated_task = sample_data.write_sample_task(
            sample_dir,
            num_train=FLAGS.sample_train_size,
            num_dev=FLAGS.sample_dev_size,
            num_test=FLAGS.sample_test_size,
            seed=FLAGS.seed,
        )
        tf.logging.info("Built-in sample task written to %s", generated_task.data_dir)
        return generated_task.data_dir, generated_task.vocab_file
    return FLAGS.data_dir, FLAGS.vocab_file


def _examples(processor, data_dir: str):
    """Returns (train, dev, test) examples, each None when no stage asked for it.

    Read up front so an empty file stops the run before hours of training, not after.
    """
    splits = (
        ("train", FLAGS.do_train, processor.get_train_examples, "--nodo_train"),
        ("dev", FLAGS.do_eval, processor.get_dev_examples, "--nodo_eval"),
        ("test", FLAGS.do_predict or FLAGS.do_export, processor.get_test_examples,
         "--nodo_predict --nodo_export"),
    )  # fmt: skip
    found = []
    for split, needed, read, off in splits:
        examples = read(data_dir) if needed else None
        if examples == []:
            raise RecipeError(
                f"{split}.tsv in {data_dir} has no examples: add some, or turn off the stages "
                f"that read it ({off}). Got: 0 {split} examples"
            )
        found.append(examples)
    return tuple(found)


def _is_local(path: str) -> bool:
    # The flag records are plain files; a gs:// or hdfs:// output_dir has none.
    return "://" not in path


def _check_not_another_recipes(output_dir: Optional[str]) -> None:
    # Another recipe's checkpoint fails to restore deep inside TensorFlow, or warm-starts
    # nothing; its files would be overwritten by this run's.
    if output_dir and _is_local(output_dir):
        previous_run.check(output_dir, RECIPE, {}, flag_name="output_dir")


def _check_trained_model(output_dir: Optional[str]) -> None:
    # Evaluating or predicting without training would silently use an untrained model, and
    # export_saved_model fails only at the very end: name the likely mistake up front.
    if FLAGS.do_train or (output_dir and previous_run.newest_checkpoint(output_dir)):
        return
    where = f"{output_dir} has no checkpoint" if output_dir else "none was given"
    raise RecipeError(
        f"--nodo_train needs a trained model in --output_dir, and {where}: point --output_dir "
        "at the directory of a training run, or add --do_train. Got: --nodo_train"
    )


def _check_init_checkpoint(output_dir: Optional[str]) -> None:
    # model_fn.classifier reports an unreadable --init_checkpoint only when training builds
    # its graph, after the TFRecord caches are written. A run that resumes from output_dir's
    # own checkpoint does not read it (it may be gone by then), so it is not checked then.
    if not FLAGS.init_checkpoint or (output_dir and previous_run.newest_checkpoint(output_dir)):
        return
    resolve_checkpoint(FLAGS.init_checkpoint)  # ValueError naming the path and what it lacks


def _check_early_stopping() -> None:
    # A misspelt metric used to fail in the first evaluation, after the TFRecord caches were
    # written and training had started; without evaluation the hook was silently left out.
    if FLAGS.early_stopping_metric not in _EVAL_METRICS:
        raise RecipeError(
            f"--early_stopping_metric must be one of {', '.join(_EVAL_METRICS)} (the metrics "
            f"evaluation reports). Got: {FLAGS.early_stopping_metric!r}"
        )
    if FLAGS.early_stopping_patience_steps and not FLAGS.do_eval:
        raise RecipeError(
            "--early_stopping_patience_steps needs evaluation to watch a metric: drop --nodo_eval"
            " or set --early_stopping_patience_steps=0. Got: --early_stopping_patience_steps="
            f"{FLAGS.early_stopping_patience_steps} --nodo_eval"
        )


def _check_seq_length(bert_config: modeling.BertConfig, generated: bool) -> int:
    """Returns --max_seq_length or its default for the data, checked against the config."""
    seq_length = FLAGS.max_seq_length or (32 if generated else 128)
    if seq_length > bert_config.max_position_embeddings:
        raise RecipeError(
            f"--max_seq_length must be at most max_position_embeddings "
            f"({bert_config.max_position_embeddings}). Got: {seq_length}"
        )
    return seq_length


def _make_output_dir() -> str:
    """Returns --output_dir (or a new temporary directory), created if needed."""
    output_dir = FLAGS.output_dir or tempfile.mkdtemp(prefix="bert_classifier_")
    try:
        tf.io.gfile.makedirs(output_dir)
    except (OSError, tf.errors.OpError) as e:
        reason = e.message if isinstance(e, tf.errors.OpError) else (e.strerror or str(e))
        raise RecipeError(
            f"cannot create --output_dir {output_dir}: {reason}. Give a directory that can be "
            "created and written to"
        ) from e
    return output_dir


def _train_schedule(train_examples, generated: bool):
    """Returns (num_train_steps, warmup_steps, save_steps) for the flags."""
    epochs = FLAGS.num_train_epochs or (6.0 if generated else 3.0)
    num_train_steps, warmup_steps = None, 0
    if train_examples is not None:
        num_train_steps = max(1, int(len(train_examples) / FLAGS.train_batch_size * epochs))
        warmup_steps = int(num_train_steps * FLAGS.warmup_proportion)
    save_steps = FLAGS.save_checkpoints_steps or max(1, (num_train_steps or 1000) // 5)
    return num_train_steps, warmup_steps, save_steps


def _resolve_settings() -> _Settings:
    """Checks the flags and resolves them, data-dependent defaults included, for this run.

    Raises:
      RecipeError: for flags that do not fit together or an --output_dir that cannot be
        created; checked before anything is written.
      ValueError: for a flag value or a file it names that cannot be used (task name, config,
        vocabulary, TSV files, warm-start checkpoint).
    """
    # {} on a single machine; in a cluster the task this process runs (validated up front).
    task = cluster.validate_tf_config().get("task") or {}
    _check_cluster_flags(task)
    _check_cpu_replicas(task)
    if not any((FLAGS.do_train, FLAGS.do_eval, FLAGS.do_predict, FLAGS.do_export)):
        raise RecipeError("At least one of --do_train/--do_eval/--do_predict/--do_export.")
    tokenization.check_case_matches_checkpoint(FLAGS.do_lower_case, FLAGS.init_checkpoint)
    processor = processors.get_processor(FLAGS.task_name)
    _check_early_stopping()
    # Checked before output_dir is created: a refused run leaves no empty directory behind.
    generated = _uses_generated_task()
    bert_config = _bert_config(generated)
    seq_length = _check_seq_length(bert_config, generated)
    _check_not_another_recipes(FLAGS.output_dir)
    _check_trained_model(FLAGS.output_dir)
    _check_init_checkpoint(FLAGS.output_dir)
    # The user's TSV files are read before output_dir is made too (an empty one is refused);
    # the built-in task is written into output_dir, so it is read after.
    examples = None if generated else _examples(processor, FLAGS.data_dir)
    output_dir = _make_output_dir()
    RUN.hold(output_dir)  # before anything is written into it: a second run stops here
    if _is_local(output_dir) and task.get("type") in (None, "chief", "master"):
        # Marks the directory as this recipe's for the other recipes' check (one writer: the
        # chief, or the single process). No flags are compared on a rerun.
        previous_run.record(output_dir, RECIPE, {})
    RUN.announce(output_dir)
    data_dir, vocab_file = _resolve_inputs(output_dir, task, generated)
    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=FLAGS.do_lower_case)
    from_scratch = generated and not FLAGS.init_checkpoint
    if from_scratch and FLAGS.do_train:
        # Said as mobilenet_cats_dogs says it trains without ImageNet weights: a user who
        # expected a pre-trained BERT learns why the accuracy is what it is.
        print(
            f"model: a generated tiny BERT ({bert_config.num_hidden_layers} layers, hidden "
            f"{bert_config.hidden_size}, {bert_config.num_attention_heads} heads) trained from "
            "scratch (the built-in task without --init_checkpoint)",
            flush=True,
        )
    train_examples, dev_examples, test_examples = examples or _examples(processor, data_dir)
    num_train_steps, warmup_steps, save_steps = _train_schedule(train_examples, generated)
    return _Settings(
        task=task,
        output_dir=output_dir,
        labels=processor.get_labels(),
        bert_config=bert_config,
        seq_length=seq_length,
        tokenizer=tokenizer,
        optimizer=FLAGS.optimizer or ("adam" if from_scratch else "adamw"),
        learning_rate=FLAGS.learning_rate or (1e-3 if from_scratch else 5e-5),
        train_examples=train_examples,
        dev_examples=dev_examples,
        test_examples=test_examples,
        num_train_steps=num_train_steps,
        warmup_steps=warmup_steps,
        save_steps=save_steps,
    )


def _classifier_model_fn(settings: _Settings):
    num_labels = len(settings.labels)
    return model_fn.classifier(
        modeling.classifier_network(settings.bert_config, num_labels),
        num_labels,
        optimizer=settings.optimizer,
        learning_rate=settings.learning_rate,
        warmup_steps=settings.warmup_steps,
        decay_steps=settings.num_train_steps,
        clip_norm=1.0,
        init_checkpoint=FLAGS.init_checkpoint,
        metrics=_METRICS,
        weight_key="is_real_example",
        tpu_spec=True,
    )


def _estimator(model_fn_, settings: _Settings):
    resolver = tpu.TPUClusterResolver(FLAGS.tpu_name) if FLAGS.use_tpu and FLAGS.tpu_name else None
    # tpu.RunConfig takes a ConfigProto; session_config() keeps a TF_CONFIG cluster's filters.
    precision = "bfloat16" if FLAGS.bfloat16 else None
    proto = tfest_kit.session_config(mixed_precision=precision) if precision else None
    strategy = None
    if FLAGS.cpu_replicas > 1:
        # run_config() makes the replicas' strategy and ConfigProto; tpu.RunConfig takes both.
        replicas = tfest_kit.run_config(cpu_replicas=FLAGS.cpu_replicas, mixed_precision=precision)
        proto, strategy = replicas.session_config, replicas.train_distribute
    config = tpu.RunConfig(
        session_config=proto,
        train_distribute=strategy,
        cluster=resolver,
        model_dir=settings.output_dir,
        tf_random_seed=FLAGS.seed,
        save_checkpoints_steps=settings.save_steps,
        # In a cluster the evaluator restores (and exports) a checkpoint while the chief writes
        # newer ones; a checkpoint deleted under it fails that evaluation.
        keep_checkpoint_max=10 if settings.distributed else 3,
        # ProgressHook prints step, loss, examples/sec and ETA; one progress line is enough.
        log_step_count_steps=None,
        tpu_config=tpu.TPUConfig(iterations_per_loop=FLAGS.iterations_per_loop),
    )
    return tpu.TPUEstimator(
        model_fn=model_fn_,
        config=config,
        use_tpu=FLAGS.use_tpu,
        train_batch_size=FLAGS.train_batch_size,
        eval_batch_size=FLAGS.eval_batch_size,
        predict_batch_size=FLAGS.predict_batch_size,
    )


def _record_input_fn(settings: _Settings, examples, name: str, **kw):
    path = features.cached_tfrecord(
        examples,
        settings.labels,
        settings.seq_length,
        settings.tokenizer,
        os.path.join(settings.output_dir, f"{name}.tf_record"),
    )
    return features.input_fn_builder(path, settings.seq_length, seed=FLAGS.seed, **kw)


def _eval_input_fn(settings: _Settings, dev_examples, on_tpu: bool):
    # A TPU needs full batches: pad with fake examples that weigh 0 in loss and metrics.
    padded = features.pad_examples(dev_examples, FLAGS.eval_batch_size) if on_tpu else dev_examples
    return _record_input_fn(settings, padded, "eval", is_training=False, drop_remainder=on_tpu)


def _write_eval_results(output_dir: str, result: dict) -> None:
    with tf.io.gfile.GFile(os.path.join(output_dir, "eval_results.txt"), "w") as f:
        for key in sorted(result):
            f.write(f"{key} = {result[key]}\n")


def _predict(settings: _Settings, est, examples, on_tpu: bool) -> str:
    padded = features.pad_examples(examples, FLAGS.predict_batch_size) if on_tpu else examples
    input_fn = _record_input_fn(
        settings, padded, "predict", is_training=False, drop_remainder=on_tpu, with_labels=False
    )
    path = os.path.join(settings.output_dir, "test_results.tsv")
    written = 0
    with tf.io.gfile.GFile(path, "w") as f:
        for prediction in est.predict(input_fn, yield_single_examples=True):
            if written == len(examples):
                break  # the rest are padding examples
            f.write("\t".join(f"{p:.6f}" for p in prediction["probabilities"]) + "\n")
            written += 1
    if written != len(examples):
        raise RuntimeError(f"Expected {len(examples)} predictions, got {written}; see the log.")
    return path


def _exports(output_dir: str) -> set[str]:
    """The exports under ``output_dir/export`` (best and final), as normalised paths."""
    found = tf.io.gfile.glob(os.path.join(output_dir, "export", "*", "*"))
    return {os.path.normpath(path) for path in found}


def _answer_one(settings: _Settings, export_base: str, example, exports_before: set) -> None:
    export_dir = serving.latest_export(export_base)
    labels = settings.labels
    feature = features.convert_single_example(
        example, labels, settings.seq_length, settings.tokenizer
    )
    predictor = serving.Predictor(export_dir)
    answer = predictor({name: [getattr(feature, name)] for name in features.FEATURE_NAMES})
    probabilities = np.asarray(answer["probabilities"])[0]
    class_id = int(np.asarray(answer["class_ids"]).reshape(-1)[0])
    # The best exporter exports only a better model: a rerun may answer from an earlier one.
    say_exported(export_dir, earlier_best=os.path.normpath(export_dir) in exports_before)
    print(
        f"Predictor answer: {example.text_a!r} / {example.text_b!r} -> label "
        f"{labels[class_id]} (p={probabilities[class_id]:.3f})"
    )


def _check_cpu_replicas(task: dict) -> None:
    replicas = FLAGS.cpu_replicas
    if replicas == 1:
        return
    if FLAGS.use_tpu:
        raise RecipeError(
            "--cpu_replicas splits training over the CPU's cores, and --use_tpu asks for a "
            f"TPU: give one of them. Got: --cpu_replicas={replicas} --use_tpu"
        )
    if task:
        raise RecipeError(
            f"--cpu_replicas trains on one machine, and TF_CONFIG names task {task['type']}:"
            f"{task['index']} of a cluster: leave it out there. Got: --cpu_replicas={replicas}"
        )
    if FLAGS.train_batch_size % replicas:
        raise RecipeError(
            "--train_batch_size must be a multiple of --cpu_replicas: each replica trains on "
            f"its share. Got: --train_batch_size={FLAGS.train_batch_size} "
            f"--cpu_replicas={replicas}"
        )


def _check_cluster_flags(task: dict) -> None:
    if not task:
        return
    where = f"TF_CONFIG names task {task['type']}:{task['index']}"
    if not FLAGS.output_dir:
        raise RecipeError(
            f"{where}: every task of a cluster needs the same --output_dir (a shared directory "
            "or gs:// bucket). Got: --output_dir unset"
        )
    if FLAGS.do_train and not FLAGS.do_eval:
        raise RecipeError(
            f"{where}: training in a cluster runs through train_and_evaluate, which needs "
            "--do_eval. Got: --do_train --nodo_eval"
        )


def _train_hooks(est, num_train_steps: int, with_eval: bool) -> list:
    train_hooks = [
        hooks.ProgressHook(
            every_n_steps=FLAGS.log_every_steps,
            total_steps=num_train_steps,
            batch_size=FLAGS.train_batch_size,
        )
    ]
    if FLAGS.early_stopping_patience_steps and with_eval:
        train_hooks.append(
            hooks.early_stopping(
                est,
                FLAGS.early_stopping_metric,
                patience_steps=FLAGS.early_stopping_patience_steps,
                run_every_steps=est.config.save_checkpoints_steps,
            )
        )
    return train_hooks


def _train(settings: _Settings, est, eval_input_fn, receiver):
    """Trains; returns (train_and_evaluate's metrics or None without an eval set, interrupted?).

    Ctrl-C (or SIGTERM) stops training at a checkpoint and says how to resume.
    """
    proto = est.config.session_config
    rewrite = proto.graph_options.rewrite_options if proto else None
    bfloat16 = rewrite and rewrite.auto_mixed_precision_onednn_bfloat16 == rewrite.ON
    strategy = est.config.train_distribute
    tf.logging.info(
        "Training: %d examples, batch size %d, %d steps (%d warm-up), %s, learning rate %g, %s%s",
        len(settings.train_examples), FLAGS.train_batch_size, settings.num_train_steps,
        settings.warmup_steps, settings.optimizer, settings.learning_rate,
        "bfloat16 mixed precision" if bfloat16 else "float32",
        f", {strategy.num_replicas_in_sync} CPU replicas" if strategy else "",
    )  # fmt: skip
    train_input_fn = _record_input_fn(
        settings, settings.train_examples, "train", is_training=True, drop_remainder=True
    )
    num_train_steps = settings.num_train_steps
    train_hooks = _train_hooks(est, num_train_steps, with_eval=eval_input_fn is not None)
    more = "raise --num_train_epochs to train more"
    if eval_input_fn is None:
        interrupted = RUN.train(est, train_input_fn, num_train_steps, train_hooks, more=more)
        return None, interrupted
    starts = []
    if not settings.distributed:  # a cluster's tasks would each say it
        starts = RUN.start_hooks(settings.output_dir, num_train_steps, more=more)
    interrupt = RUN.preemption_hook()
    # On a cluster the best exporter runs on the evaluator task (that is where Estimator
    # calls exporters); on one machine it runs after each evaluation in this process.
    exporters = [serving.best_exporter(receiver, "accuracy", "max")]
    result = tfest_kit.train_and_evaluate(
        est,
        train_input_fn,
        eval_input_fn,
        max_steps=num_train_steps,
        hooks=[*starts, *train_hooks, interrupt],
        exporters=exporters if FLAGS.do_export else (),
        throttle_secs=0,
        start_delay_secs=0,
    )
    for start in starts:
        start.end_of_training()
    if interrupt.preempted:
        RUN.say_interrupted(
            checkpoint_step(settings.output_dir), num_train_steps, saves=est.config.is_chief
        )
    return result, bool(interrupt.preempted)


def _final_metrics(est, result, eval_input_fn) -> dict:
    """The chief's metrics of the final checkpoint in a cluster.

    There, train_and_evaluate returns the evaluator's newest metrics, which may be of an
    earlier checkpoint (the evaluator lags behind) or missing (no evaluator task).
    """
    final_step = int(est.get_variable_value(tf.GraphKeys.GLOBAL_STEP))
    if result and result.get("global_step") == final_step:
        return result
    tf.logging.info(
        "The newest evaluator metrics are of step %s, the final checkpoint is step %d: "
        "evaluating it on the chief (model_dir/eval_chief)",
        (result or {}).get("global_step"),
        final_step,
    )
    return est.evaluate(eval_input_fn, name="chief")


def _report_metrics(settings: _Settings, est, result, eval_input_fn) -> None:
    """Writes eval_results.txt and prints the accuracy of the final checkpoint (chief only)."""
    if eval_input_fn is not None and settings.distributed and result is not None:
        result = _final_metrics(est, result, eval_input_fn)
    if eval_input_fn is not None and result is None:
        result = est.evaluate(eval_input_fn)
    if result is not None:
        _write_eval_results(settings.output_dir, result)
        print(
            f"Eval accuracy: {result['accuracy']:.4f} (loss {result['loss']:.4f}, "
            f"{len(settings.dev_examples)} dev examples, step {result['global_step']})"
        )


def _export_for_answer(settings: _Settings, est, receiver) -> str:
    """Returns the export base the Predictor answer loads; exports the final model if needed.

    On one machine train_and_evaluate has finished the best exports when it returns. In a
    cluster the evaluator may still be writing (or garbage-collecting) them, so the chief
    exports its own final checkpoint to ``export/final`` and never reads ``export/best``.
    """
    if not settings.distributed:
        best = os.path.join(settings.output_dir, "export", "best")
        try:
            _, signatures = serving.read_signatures(best)
        except serving.ExportNotFoundError:
            signatures = {}  # no best export (no --do_train/--do_eval): export now
        inputs = signatures.get("serving_default", {}).get("inputs", {})
        # A best export an earlier run left with another --max_seq_length takes inputs of
        # that length; answer from this run's model then.
        if "input_ids" in inputs and inputs["input_ids"].shape[1] == settings.seq_length:
            return best
    final = os.path.join(settings.output_dir, "export", "final")
    est.export_saved_model(final, receiver)
    return final


def _predict_and_answer(
    settings: _Settings, est, receiver, on_tpu: bool, exports_before: set
) -> None:
    """Writes test_results.tsv and answers one test example from an export (chief only).

    ``exports_before``: the exports there were before this run (see :func:`_exports`).
    """
    test_examples = settings.test_examples
    if FLAGS.do_predict:
        path = _predict(settings, est, test_examples, on_tpu)
        print(f"Wrote {len(test_examples)} predictions to {path}")
    if FLAGS.do_export:
        export_base = _export_for_answer(settings, est, receiver)
        _answer_one(settings, export_base, test_examples[0], exports_before)


def main(argv):
    del argv
    logs.setup()
    return RUN.main(_run, errors=(RecipeError,))


def _run():
    try:
        settings = _resolve_settings()
    except previous_run.PreviousRunError:
        raise  # RUN.main says it in one line: the fix is another --output_dir, not a flag value
    except ValueError as e:
        # Every ValueError there is about a flag or a file it names (_resolve_settings builds
        # no graph and trains nothing): one line, not a traceback. Later ValueErrors, from
        # inside TensorFlow, keep theirs.
        raise RecipeError(str(e)) from e
    est = _estimator(_classifier_model_fn(settings), settings)
    on_tpu = not isinstance(est, tpu.TPUEstimator)  # the official class on a real TPU
    receiver = serving.bert_receiver(settings.seq_length)
    eval_input_fn = None
    if FLAGS.do_eval:
        eval_input_fn = _eval_input_fn(settings, settings.dev_examples, on_tpu)

    exports_before = _exports(settings.output_dir)
    result = None
    if FLAGS.do_train:
        # A ps task never returns from here; the launcher (or the cluster manager) stops it.
        result, interrupted = _train(settings, est, eval_input_fn, receiver)
        if interrupted:
            return 130
    if not est.config.is_chief:
        # Workers and the evaluator: results, predictions and the final export are the chief's.
        print(
            f"Task {est.config.task_type}:{est.config.task_id} done; the chief writes the eval "
            "results, predictions and final export."
        )
        return
    _report_metrics(settings, est, result, eval_input_fn)
    _predict_and_answer(settings, est, receiver, on_tpu, exports_before)
    return 0


if __name__ == "__main__":
    _flags.run(main)
