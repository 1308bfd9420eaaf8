"""tfest_kit.logs: one line per event under absl, deprecation warnings off by default."""

from __future__ import annotations

import logging
import textwrap

import pytest

from tests.conftest import run_program
from tfest_kit import logs
from tfest_kit._tf import tf, tf2

_PROGRAM = textwrap.dedent(
    """
    import sys
    from absl import app
    from tfest_kit import logs
    from tfest_kit._tf import tf

    MODE = sys.argv[1]
    if MODE == "setup-before":
        logs.setup()

    def main(argv):
        if MODE == "setup-after":
            logs.setup()
        elif MODE == "deprecations":
            logs.setup(show_deprecations=True)
        tf.logging.info("unique-marker-%d", 42)
        with tf.Graph().as_default():
            tf.to_int32(tf.constant(1.0))  # deprecated since TF 2.0
            tf.layers.dense(tf.zeros([1, 2]), 1)  # Keras' UserWarning, not TensorFlow's log

    app.run(main, argv=sys.argv[:1])
    """
)


def _run(mode):
    proc = run_program(["-c", _PROGRAM, mode], timeout=120)
    return proc.stdout + proc.stderr


@pytest.mark.parametrize("mode", ["setup-before", "setup-after"])
def test_each_tensorflow_line_printed_once_under_absl(mode):
    output = _run(mode)
    assert output.count("unique-marker-42") == 1, output
    assert "deprecated" not in output, output


def test_without_setup_lines_are_doubled():
    # The problem setup() fixes, shown on the same program: TensorFlow's handler and absl's
    # both print the line.
    output = _run("none")
    assert output.count("unique-marker-42") == 2, output


def test_deprecations_shown_when_asked():
    output = _run("deprecations")
    assert output.count("unique-marker-42") == 1, output
    assert "to_int32" in output and "is deprecated" in output, output
    assert "`tf.layers.dense` is deprecated" in output, output


_ROOT_HANDLERS_PROGRAM = textwrap.dedent(
    """
    import logging, sys
    logging.basicConfig(filename=sys.argv[1], level=logging.INFO)
    if sys.argv[2] == "console":
        class Console(logging.Handler):  # a console of another library, e.g. rich's
            def emit(self, record):
                sys.stderr.write("CONSOLE " + record.getMessage() + "\\n")
        logging.getLogger().addHandler(Console())
    from tfest_kit import logs
    from tfest_kit._tf import estimator, tf
    logs.setup(tensorflow_info=sys.argv[2] != "tensorflow_info_off")
    tf.logging.info("after-setup-marker")
    tf.logging.debug("debug-marker")
    # TensorFlow's own INFO line, "Using config: …"
    estimator.Estimator(lambda features, labels, mode: None, sys.argv[1] + ".model")
    """
)


@pytest.mark.parametrize("mode", ["plain", "console", "tensorflow_info_off"])
def test_setup_keeps_the_root_loggers_handlers(tmp_path, mode):
    # basicConfig(filename=…) before TensorFlow: TensorFlow's lines reached the file only by
    # propagating, which setup() turns off; after it the file got none of them.
    path = tmp_path / "train.log"
    proc = run_program(["-c", _ROOT_HANDLERS_PROGRAM, str(path), mode], timeout=120)
    in_file = path.read_text()
    assert in_file.count("after-setup-marker") == 1, in_file
    # The terminal too, once: through the root's console handler when it has one.
    assert proc.stderr.count("after-setup-marker") == 1, proc.stderr
    assert ("CONSOLE after-setup-marker" in proc.stderr) == (mode == "console")
    assert "debug-marker" not in in_file + proc.stderr
    # tensorflow_info=False leaves TensorFlow's own INFO lines out of the terminal, not the file.
    assert "Using config" in in_file, in_file
    assert ("Using config" in proc.stderr) == (mode != "tensorflow_info_off"), proc.stderr


_PYTEST_LIVE_LOG_TEST = textwrap.dedent(
    """
    from tfest_kit import logs
    from tfest_kit._tf import tf

    def test_lines():
        logs.setup()
        tf.logging.info("live-info-marker")
        tf.logging.warning("live-warning-marker")
    """
)


@pytest.mark.parametrize("capture", ["-s", "--capture=fd"])
def test_pytest_live_logs_print_each_line_once(tmp_path, capture):
    # pytest --log-cli-level=INFO prints records through its own handler on the root logger;
    # with -s, setup()'s plain stderr handler printed each of them a second time.
    (tmp_path / "test_live.py").write_text(_PYTEST_LIVE_LOG_TEST)
    args = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", capture]
    args += ["--log-cli-level=INFO", str(tmp_path / "test_live.py")]
    proc = run_program(args, timeout=120, cwd=tmp_path)
    output = proc.stdout + proc.stderr
    assert output.count("live-info-marker") == 1, output
    assert output.count("live-warning-marker") == 1, output


def test_setup_plain_python_logs_once(capsys):
    logger = logs.setup("info")
    try:
        logger.info("plain-marker")
        captured = capsys.readouterr()
        assert captured.err.count("plain-marker") == 1
        assert captured.err.strip() == "INFO:tensorflow:plain-marker"
    finally:
        logs.setup("warning")


def test_setup_sets_level_and_is_idempotent():
    logs.setup("debug")
    logger = logs.setup("error")
    assert logger.level == logging.ERROR
    # pytest 9 (the 2.21 lock) also hangs its capture handlers on non-propagating loggers.
    ours = [h for h in logger.handlers if not type(h).__module__.startswith("_pytest")]
    assert len(ours) == 1
    logs.setup("warning")


@pytest.mark.parametrize("bad", ["loud", "", 1.5])
def test_bad_verbosity_names_argument(bad):
    with pytest.raises(ValueError, match="`verbosity` must be"):
        logs.setup(bad)


def test_quieted_raises_the_level_inside_the_block_only(tf_log_lines):
    from tfest_kit._tf import tf2

    logger = tf2.get_logger()  # at INFO, with the fixture's collecting handler
    with logs.quieted():
        logger.info("hidden-line")
        logger.warning("shown-warning")
    logger.info("shown-after")
    assert logger.level == logging.INFO
    assert "hidden-line" not in tf_log_lines
    assert "shown-warning" in tf_log_lines and "shown-after" in tf_log_lines


def test_params_warning_is_dropped_for_tfest_kit_model_fns_only(tf_log_lines, tmp_path):
    from tfest_kit import model_fn
    from tfest_kit._tf import estimator, tf

    def network(features, mode, params):
        return tf.layers.dense(features["x"], 2)

    def users_model_fn(features, labels, mode, params):
        raise AssertionError("never called")

    estimator.Estimator(model_fn.classifier(network, 2), model_dir=str(tmp_path / "ours"))
    assert not [line for line in tf_log_lines if "includes params argument" in line]
    estimator.Estimator(users_model_fn, model_dir=str(tmp_path / "users"))
    warnings = [line for line in tf_log_lines if "includes params argument" in line]
    assert len(warnings) == 1 and "users_model_fn" in warnings[0]


def test_official_settings_do_not_reach_the_params_warning(tmp_path):
    # Why _NoiseFilter reads the text: with TensorFlow's deprecation switches off
    # and the logger at WARNING (the quietest level that keeps warnings), the line still comes.
    from tfest_kit import model_fn
    from tfest_kit._tf import deprecation, estimator, tf

    def network(features, mode, params):
        return tf.layers.dense(features["x"], 2)

    logger = logs.setup("warning")
    ours = [f for f in logger.filters if isinstance(f, logs._NoiseFilter)]
    records = []
    collect = logging.Handler(logging.WARNING)
    collect.emit = records.append
    logger.addHandler(collect)
    for f in ours:
        logger.removeFilter(f)
    try:
        assert deprecation._PRINT_DEPRECATION_WARNINGS is False
        estimator.Estimator(model_fn.classifier(network, 2), model_dir=str(tmp_path))
    finally:
        logger.removeHandler(collect)
        for f in ours:
            logger.addFilter(f)
    said = [r for r in records if "includes params argument" in str(r.msg)]
    assert len(said) == 1 and said[0].levelno == logging.WARNING


def test_deprecation_switches_follow_show_deprecations():
    from tfest_kit._tf import deprecation, module_wrapper

    try:
        logs.setup("warning", show_deprecations=True)
        assert deprecation._PRINT_DEPRECATION_WARNINGS is True
        assert module_wrapper._PER_MODULE_WARNING_LIMIT >= 1
    finally:
        logs.setup("warning")
    assert deprecation._PRINT_DEPRECATION_WARNINGS is False
    assert module_wrapper._PER_MODULE_WARNING_LIMIT == 0


def test_setup_keeps_a_programs_file_handler_and_replaces_stream_handlers(tmp_path):
    import sys

    from tfest_kit._tf import tf2

    logger = tf2.get_logger()
    to_file = logging.FileHandler(tmp_path / "tf.log")
    to_terminal = logging.StreamHandler(sys.stderr)  # what TensorFlow adds at import
    logger.addHandler(to_file)
    logger.addHandler(to_terminal)
    try:
        logs.setup("info")
        assert to_file in logger.handlers and to_terminal not in logger.handlers
        logger.info("file-marker")
        to_file.flush()
        assert "file-marker" in (tmp_path / "tf.log").read_text()
    finally:
        logger.removeHandler(to_file)
        to_file.close()
        logs.setup("warning")


def test_tensorflow_info_off_leaves_out_tensorflows_own_info_lines_only(capsys, tmp_path):
    from tfest_kit._tf import estimator, tf, tf2

    def users_model_fn(features, labels, mode, params):
        raise AssertionError("never called")

    logger = tf2.get_logger()
    to_file = logging.FileHandler(tmp_path / "tf.log")
    logger.addHandler(to_file)
    try:
        logs.setup("info", tensorflow_info=False)
        # Estimator logs "Using config: …" (INFO) and, for a model_fn taking params without
        # any given, a WARNING; both come from tensorflow_estimator's own files.
        estimator.Estimator(users_model_fn, model_dir=str(tmp_path / "model"))
        tf.logging.info("program-marker")
        err = capsys.readouterr().err
        to_file.flush()
        in_file = (tmp_path / "tf.log").read_text()
    finally:
        logger.removeHandler(to_file)
        to_file.close()
        logs.setup("warning")
    assert "INFO:tensorflow:program-marker" in err.splitlines(), err
    assert "includes params argument" in err, err  # TensorFlow's warnings stay
    assert "Using config" not in err, err
    assert "Using config" in in_file and "program-marker" in in_file  # a FileHandler gets all


def test_tensorflow_info_on_by_default(capsys, tmp_path):
    from tfest_kit._tf import estimator

    try:
        logs.setup("info")
        estimator.Estimator(lambda features, labels, mode: None, model_dir=str(tmp_path))
        err = capsys.readouterr().err
    finally:
        logs.setup("warning")
    assert "INFO:tensorflow:Using config" in err, err


def test_logging_goes_on_after_the_stderr_it_last_used_is_closed(monkeypatch):
    # pytest's capture (or any redirection that ended) closes the stream; flushing it when
    # switching to the new sys.stderr raised "I/O operation on closed file" into the caller.
    import io
    import sys

    earlier, now = io.TextIOWrapper(io.BytesIO()), io.StringIO()  # pytest's kind, and any
    monkeypatch.setattr(sys, "stderr", earlier)
    try:
        logger = logs.setup("info")
        logger.info("first-marker")
        earlier.close()
        monkeypatch.setattr(sys, "stderr", now)
        logger.warning("after-marker")
    finally:
        monkeypatch.undo()
        logs.setup("warning")
    assert "after-marker" in now.getvalue()


def test_tensorflow_221s_sharding_callback_line_is_dropped_from_absl_only_that_line():
    # TensorFlow 2.21's object-based saver logs it through absl at every Keras checkpoint.
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    absl_logger = logging.getLogger("absl")
    absl_logger.addHandler(handler)
    try:
        logs.setup()
        absl_logger.warning("Sharding callback duration: %s microseconds", 290)
        absl_logger.warning("a line of the program's own")
    finally:
        absl_logger.removeHandler(handler)
        logs.setup("warning")
    assert [r.getMessage() for r in records] == ["a line of the program's own"]


def test_estimators_noise_is_one_line_per_event(tf_log_lines):
    logger = tf2.get_logger()
    session_config = tf.ConfigProto(graph_options=tf.GraphOptions(build_cost_model=1))
    logger.info("Using config: %s", str({"_session_config": session_config}))  # as Estimator
    for _ in range(3):  # an evaluator polling for the next checkpoint, every second
        logger.info("Waiting %f secs before starting next eval run.", 0.99)
    logger.info("Waiting %f secs before starting next eval run.", 590.0)
    for _ in range(2):  # two exports
        logger.info("Signatures INCLUDED in export for Classify: None")
        logger.info("Signatures INCLUDED in export for Predict: ['serving_default']")
        logger.info("'classification' : Classification signatures can only accept a string")
    assert tf_log_lines == [
        "Using config: {'_session_config': graph_options { build_cost_model: 1 } }",
        "Waiting 590.000000 secs before starting next eval run.",
        "Signatures INCLUDED in export for Predict: ['serving_default']",
        "'classification' : Classification signatures can only accept a string",
        "Signatures INCLUDED in export for Predict: ['serving_default']",
    ]


def test_distribution_notes_are_said_once(tf_log_lines, monkeypatch):
    # Two CPU replicas (bert_classifier --cpu_replicas=2) printed "Reduce to …" 11 times and
    # each RunConfig note twice (the recipe's config, then its replace()).
    monkeypatch.setattr(logs._NoiseFilter, "_once", set())
    logger = tf2.get_logger()
    devices = ("/replica:0/task:0/device:CPU:0", "/replica:0/task:0/device:CPU:1")
    for _ in range(2):
        logger.info("Initializing RunConfig with distribution strategies.")
        logger.info("Not using Distribute Coordinator.")
    for _ in range(10):  # as cross_device_ops logs it: log_first_n(..., 10), formatted
        logger.info(f"Reduce to {devices[0]} then broadcast to {devices!r}.")
    logger.info("Using MirroredStrategy with devices %r", devices)
    assert tf_log_lines == [
        "Initializing RunConfig with distribution strategies.",
        "Not using Distribute Coordinator.",
        f"Reduce to {devices[0]} then broadcast to {devices!r}.",
        f"Using MirroredStrategy with devices {devices!r}",
    ]


def test_keras_2s_rnn_cell_deprecation_is_said_once_as_tf115_said_it(tf_log_lines, monkeypatch):
    # Keras 2's legacy MultiRNNCell logs it for every cell built (a seq2seq model: 11 lines);
    # TF 1.15's @deprecated said it once. Once per process: as if no test had built one before.
    monkeypatch.setattr(logs._NoiseFilter, "_once", set())
    cells = [tf.nn.rnn_cell.BasicLSTMCell(4) for _ in range(2)]
    for _ in range(3):
        tf.nn.rnn_cell.MultiRNNCell(cells)
    said = [line for line in tf_log_lines if "MultiRNNCell` is deprecated" in line]
    assert len(said) == 1, tf_log_lines
