"""Many training steps per ``Session.run`` (``TPUConfig.iterations_per_loop`` off a TPU), for
``tpu.TPUEstimator`` and ``keras_bridge.to_estimator``."""

import contextlib
import copy
from typing import Callable, Optional

import numpy as np

from tfest_kit._model_dir import LOOP_STEP
from tfest_kit._tf import NoRestoreSaveable, parse_iterations_per_loop, tf, tf2
from tfest_kit.hooks import LossLoggingHook, ProgressHook, fill_progress_totals


def loop_length(config) -> Optional[int]:
    """``tpu_config.iterations_per_loop`` if a count > 1 (not "300s") and no strategy, else None."""
    if config.train_distribute is not None or not hasattr(config, "tpu_config"):
        return None
    loop = parse_iterations_per_loop(config.tpu_config.iterations_per_loop)
    return loop.value if loop.unit == "count" and loop.value > 1 else None


@contextlib.contextmanager
def fetch_errors(looped: Callable[[], Optional[int]], one_step: str):
    """A hook's fetch of an in-loop tensor, with the fix; ``looped()``: the length, if it looped."""
    try:
        yield
    except ValueError as e:
        length = looped()
        unfetchable = ("marked as not fetchable", "is not an element of this graph")
        if not length or not any(words in str(e) for words in unfetchable):
            raise
        raise ValueError(
            f"iterations_per_loop={length} trains {length} steps in one Session.run, and a hook "
            "fetched a tensor computed inside that loop. Fetch only the loss or the global step, "
            f"write summaries in a host_call, or set {one_step}. ({e})"
        ) from e


def _reader(features, labels) -> Optional[Callable]:
    """A function reading the next ``(features, labels)`` from the ``tf.data`` iterator they
    came from, or None (sparse features, tensors of other origins)."""
    flat = tf.nest.flatten((features, labels))
    ops = {t.op if isinstance(t, tf.Tensor) else None for t in flat if t is not None}
    op = ops.pop() if len(ops) == 1 else None
    if op is None or op.type != "IteratorGetNext":
        return None

    def read():
        types, shapes = [t.dtype for t in op.outputs], [t.shape for t in op.outputs]
        get_next = tf2.raw_ops.IteratorGetNext
        outputs = get_next(iterator=op.inputs[0], output_types=types, output_shapes=shapes)
        values = [None if t is None else outputs[t.value_index] for t in flat]
        return tf.nest.pack_sequence_as((features, labels), values)

    return read


class _LoopLengthHook(tf.train.SessionRunHook):
    """Feeds each loop its length, cut at the final step (it stops there) and at multiples of
    ``every``; reads the step a loop ends at with it (the official TPU hook: two more runs)."""

    def __init__(self, length: int, count, step_after, until, every) -> None:
        self._length, self._count, self._step_after, self._until = length, count, step_after, until
        self._every = [n for n in every if n]

    def after_create_session(self, session, coord) -> None:
        self._step = int(session.run(tf.train.get_global_step()))
        max_steps, steps = self._until
        ends = [end for end in (max_steps, steps and self._step + steps) if end]
        self._final = min(ends) if ends else np.inf

    def before_run(self, run_context):
        step = self._step
        length = int(min([self._length, self._final - step] + [n - step % n for n in self._every]))
        return tf.train.SessionRunArgs(self._step_after, feed_dict={self._count: length})

    def after_run(self, run_context, run_values) -> None:
        self._step = int(run_values.results)
        if self._step >= self._final:
            run_context.request_stop()


def training_loop(step: Callable, features, labels, length: int, until, every) -> Optional[tuple]:
    """``step(features, labels)``'s training step ``length`` times per ``Session.run`` in a
    ``tf.while_loop``, as on a TPU; ``until``: train()'s ``(max_steps, steps)``. Returns the
    spec (the last step's loss and v1 summaries; ``host_call`` tensors queued) and the queue's
    size, or None for an input not read from a ``tf.data`` iterator."""
    if (read := _reader(features, labels)) is None:
        tf.logging.info(
            f"iterations_per_loop={length}: one training step per Session.run (the input is not "
            "read from a tf.data iterator, or has sparse features)."
        )
        return None
    iterations = tf.placeholder_with_default(1, [], name="iterations_per_loop")
    summaries = tf.get_collection_ref(tf.GraphKeys.SUMMARIES)
    first, kept, built = len(summaries), [], {}
    first_op = len(tf.get_default_graph().get_operations())

    def body(i, _):
        spec = built["spec"] = step(*read())
        if getattr(spec, "loss", None) is None or getattr(spec, "train_op", None) is None:
            kind = type(spec).__name__
            raise ValueError(f"model_fn must return an EstimatorSpec (loss, train_op). Got: {kind}")
        after = [spec.train_op]
        for summary in summaries[first:]:
            if summary.op.name != "loss":  # Estimator's own "loss" summary takes its place
                with tf.init_scope():  # a local variable keeps the last step's value
                    local = [tf.GraphKeys.LOCAL_VARIABLES]
                    kept.append(tf.Variable("", trainable=False, collections=local))
                after.append(kept[-1].assign(summary))
        if getattr(spec, "host_call", None) is not None:  # each step's tensors, queued
            flat = [tf.convert_to_tensor(t) for t in tf.nest.flatten(spec.host_call[1])]
            shapes = [t.shape for t in flat]
            shapes = shapes if all(shape.is_fully_defined() for shape in shapes) else None
            with tf.init_scope():
                built["queue"] = tf.queue.FIFOQueue(2**30, [t.dtype for t in flat], shapes)
            with tf.control_dependencies([spec.train_op]):  # after the step's update
                after.append(built["queue"].enqueue(flat))
        with tf.control_dependencies(after):
            return i + 1, tf.identity(tf.cast(spec.loss, tf.float32))

    cond = lambda i, _: i < iterations  # noqa: E731
    v2 = tf.control_flow_v2_enabled()
    tf.disable_control_flow_v2()  # TF1's loop runs a small model's step 1.2-1.5x faster
    try:
        # name "": the model's ops, summaries and variables keep the names they have without one.
        _, loss = tf.while_loop(cond, body, [0, 0.0], parallel_iterations=1, name="")
    finally:
        if v2:
            tf.enable_control_flow_v2()
    with tf.control_dependencies([loss]):
        summaries[first:] = [variable.read_value() for variable in kept]
        step_after = tf.identity(tf.train.get_global_step())
    tf.add_to_collection(LOOP_STEP, step_after)
    hook = _LoopLengthHook(length, iterations, step_after, until, every)
    spec, pending = built["spec"], None
    scaffold = getattr(spec, "scaffold", None)
    if scaffold is not None and scaffold.saver is not None:
        made_in_loop = set(tf.get_default_graph().get_operations()[first_op:])
        saver = _built_outside(scaffold.saver, made_in_loop)
        savers = tf.get_collection_ref(tf.GraphKeys.SAVERS)
        savers[:] = [saver if s is scaffold.saver else s for s in savers]
        spec = spec._replace(scaffold=tf.train.Scaffold(saver=saver, copy_from_scaffold=scaffold))
    hooks = tuple(spec.training_hooks or ()) + (hook,)
    unneeded = dict(predictions={}, export_outputs=None)  # in-loop tensors a TRAIN spec drops
    spec = spec._replace(loss=loss, train_op=loss.op, training_hooks=hooks, **unneeded)
    if "queue" in built:
        values = tf.nest.flatten(built["queue"].dequeue())
        tensors = tf.nest.pack_sequence_as(spec.host_call[1], values)
        spec, pending = spec._replace(host_call=(spec.host_call[0], tensors)), built["queue"].size()
    return spec, pending


def _built_outside(saver, made_in_loop: set):
    """A Saver the model_fn built inside the loop, built again after it: its ops run only in
    the loop ("may not be fed"). An object-based one's graph proto, a constant, made here too."""
    filename = saver.saver_def and saver.saver_def.filename_tensor_name
    if not filename or tf.get_default_graph().get_tensor_by_name(filename).op not in made_in_loop:
        return saver
    var_list = saver._var_list
    if isinstance(var_list, (list, tuple)):
        var_list = [
            NoRestoreSaveable(tf.constant(tf.get_static_value(s.op)), s.name, device=s.device)
            if isinstance(s, NoRestoreSaveable) and s.op.op in made_in_loop
            else s
            for s in var_list
        ]
    rebuilt = copy.copy(saver)
    rebuilt._var_list, rebuilt.saver_def, rebuilt._is_built = var_list, None, False
    rebuilt.build()
    return rebuilt


def with_loss_line(spec, config, every: Optional[int], until, estimator=None):
    """The loss line every ``every`` steps; ``estimator``: one with a batch size (examples/sec)."""
    if not every:
        return spec
    output_dir = config.model_dir if config.save_summary_steps and config.is_chief else None
    hook = LossLoggingHook(every_n_steps=every, output_dir=output_dir, loss=spec.loss)
    fill_progress_totals([hook], until[0], estimator, until[1])
    return spec._replace(training_hooks=tuple(spec.training_hooks) + (hook,))


def without_second_loss_line(spec, hooks, is_chief):
    """No loss line beside a ``ProgressHook`` (the hook stays, silent, if it writes summaries)."""
    all_hooks = (*hooks, *spec.training_hooks, *(spec.training_chief_hooks if is_chief else ()))
    if not any(isinstance(hook, ProgressHook) for hook in all_hooks):
        return spec
    kept = [h for h in spec.training_hooks if not isinstance(h, LossLoggingHook) or h.output_dir]
    for hook in kept:
        if isinstance(hook, LossLoggingHook):
            hook.log_lines = False
    return spec._replace(training_hooks=tuple(kept))


def with_run_hooks(spec, config, hooks, steps_per_run: Optional[int]):
    """:func:`without_second_loss_line`; then, given ``steps_per_run``, the chief's
    ``CheckpointSaverHook`` as Estimator's, told how many steps a run makes: Estimator's
    fetches ``global_step`` again each step, 25-30 % of a small model's step."""
    spec = without_second_loss_line(spec, hooks, config.is_chief)
    if not steps_per_run or not (config.save_checkpoints_secs or config.save_checkpoints_steps):
        return spec
    existing = (*hooks, *spec.training_hooks, *spec.training_chief_hooks)
    if any(isinstance(hook, tf.train.CheckpointSaverHook) for hook in existing):
        return spec
    every = dict(save_secs=config.save_checkpoints_secs, save_steps=config.save_checkpoints_steps)
    what = dict(scaffold=spec.scaffold, save_graph_def=config.checkpoint_save_graph_def)
    saver_hook = tf.train.CheckpointSaverHook(config.model_dir, **every, **what)
    saver_hook._set_steps_per_run(steps_per_run)  # the hook's own (private) knob for this
    return spec._replace(training_chief_hooks=tuple(spec.training_chief_hooks) + (saver_hook,))
