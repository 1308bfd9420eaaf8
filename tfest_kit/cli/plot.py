"""``python -m tfest_kit plot MODEL_DIR``: training loss and eval metrics drawn to a PNG.

The curves are read from the event files the Estimator writes: ``MODEL_DIR`` for training
summaries, ``MODEL_DIR/eval*`` for each evaluation; ``tensorboard --logdir MODEL_DIR`` shows
the same curves.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import Optional

from tfest_kit._model_dir import eval_dirs, metrics_by_step

__all__ = ["scalar_history", "check_model_dir", "plot", "add_parser", "run"]

_MAX_PANELS = 9


def check_model_dir(command: str, model_dir: str) -> None:
    """Raises ``FileNotFoundError`` (starting with ``command``) unless ``model_dir`` is a local
    directory; the message says what to pass instead."""
    if os.path.isdir(model_dir):
        return
    if "://" in model_dir:
        raise FileNotFoundError(
            f"{command}: MODEL_DIR {model_dir!r} is a remote path, which {command} does not "
            "read. Copy the model_dir here first (e.g. gsutil -m cp -r), or point TensorBoard "
            "at it: tensorboard --logdir " + model_dir
        )
    if os.path.exists(model_dir):
        raise FileNotFoundError(
            f"{command}: MODEL_DIR {model_dir!r} is not a directory but a file. Pass the "
            f"directory that holds it: {os.path.dirname(os.path.abspath(model_dir))!r}"
        )
    raise FileNotFoundError(
        f"{command}: MODEL_DIR {model_dir!r} is not a directory: it does not exist. Pass the "
        "model_dir given to the Estimator (the one holding `checkpoint` and events files)"
    )


def scalar_history(log_dir: str) -> dict[str, list[tuple[int, float]]]:
    """``{tag: [(step, value), ...]}`` of the event files in ``log_dir``, by step.

    Read as early stopping and the best exporter read them (:func:`metrics_by_step`).
    """
    history: dict[str, list[tuple[int, float]]] = {}
    for step, metrics in metrics_by_step(log_dir).items():
        for tag, value in metrics.items():
            history.setdefault(tag, []).append((step, value))
    return history


def _with_loss_named_loss(train: dict) -> dict:
    """Names ``loss`` the training loss a graph with its own ``loss`` op (to_estimator's)
    made ``loss_1``, so that it is drawn with the eval loss."""
    numbered = [t for t in train if t.startswith("loss_") and t[len("loss_") :].isdigit()]
    if "loss" in train or not numbered:
        return train
    renamed = dict(train)
    renamed["loss"] = renamed.pop(min(numbered, key=lambda t: int(t[len("loss_") :])))
    return renamed


def plot(model_dir: str, out: Optional[str] = None) -> str:
    """Draws training loss and eval metrics over steps to a PNG; returns the path written.

    Args:
      model_dir: an Estimator ``model_dir``.
      out: the image to write; default ``MODEL_DIR/training.png``.

    Raises:
      FileNotFoundError: no such directory, or no scalar summaries in it.
      ValueError: ``out`` is a directory or not a format matplotlib writes.
      OSError: ``out`` cannot be written.
      ImportError: matplotlib is not installed.
    """
    check_model_dir("plot", model_dir)
    out = out or os.path.join(model_dir, "training.png")
    plt = _pyplot()
    _check_out(out)
    train = _with_loss_named_loss(scalar_history(model_dir))
    evals = {os.path.basename(d): scalar_history(d) for d in eval_dirs(model_dir)}
    if not train and not any(evals.values()):
        raise FileNotFoundError(
            f"plot: no scalar summaries in {model_dir!r} or its eval*/ directories. "
            f"It holds: {sorted(os.listdir(model_dir))}. Train with an Estimator "
            "(save_summary_steps > 0) first."
        )
    # One panel per tag: loss first (train and each eval), then eval metrics, then the rest.
    runs = [("train", {"loss": train["loss"]} if "loss" in train else {}), *evals.items()]
    runs.append(("train", {t: p for t, p in train.items() if t != "loss"}))
    panels: dict[str, list[tuple[str, list]]] = {"loss": []}
    for name, history in runs:
        for tag, points in history.items():
            if tag != "global_step":  # the run's, not the model's
                panels.setdefault(tag, []).append((name, points))
    panels = {tag: lines for tag, lines in panels.items() if lines}
    shown = list(panels)[:_MAX_PANELS]
    if len(panels) > len(shown):
        print(
            f"plot: {len(panels) - len(shown)} more scalars not drawn: {list(panels)[len(shown) :]}"
        )
    cols = min(3, len(shown))
    rows = math.ceil(len(shown) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    for ax in axes.flat[len(shown) :]:
        ax.set_visible(False)
    for ax, tag in zip(axes.flat, shown):
        for label, points in panels[tag]:
            steps, values = zip(*points)
            ax.plot(steps, values, marker="o" if len(points) < 20 else None, ms=3, label=label)
        ax.set(title=tag, xlabel="step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle(os.path.abspath(model_dir), fontsize="small")
    fig.tight_layout()
    try:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        fig.savefig(out, dpi=100)
    except OSError as e:
        raise OSError(
            f"plot: cannot write {out!r}: {e.strerror or e}. Pass --out with a writable path"
        ) from e
    finally:
        plt.close(fig)
    return out


def _pyplot():
    try:
        import matplotlib
    except ImportError as e:
        raise ImportError(
            f"plot: matplotlib is needed to draw ({e}). Fix: pip install matplotlib==3.9.2"
        ) from e
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _check_out(out: str) -> None:
    """Fails before any reading if matplotlib would not write ``out`` where it says."""
    if os.path.isdir(out):
        raise ValueError(
            f"plot: --out {out!r} is a directory. Name the image file, e.g. "
            f"--out {os.path.join(out, 'training.png')}"
        )
    from matplotlib.backend_bases import FigureCanvasBase

    formats = sorted(FigureCanvasBase.get_supported_filetypes())
    # Without a known extension matplotlib would fail, or silently write OUT.png instead.
    if os.path.splitext(out)[1].lstrip(".").lower() not in formats:
        raise ValueError(
            f"plot: --out {out!r} must end in an image format matplotlib writes: "
            f"{', '.join('.' + f for f in formats)}. E.g. --out {os.path.splitext(out)[0]}.png"
        )


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Registers ``plot`` on an ``argparse`` subparsers object."""
    parser = subparsers.add_parser(
        "plot",
        help="draw training loss and eval metrics from the event files to a PNG",
        description=__doc__.split("\n\n")[1],
    )
    parser.add_argument("model_dir", metavar="MODEL_DIR", help="the Estimator model_dir")
    parser.add_argument("--out", metavar="FILE.png", help="default MODEL_DIR/training.png")
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Runs ``plot``; returns 0 on success, 1 if there is nothing to draw or --out is unusable."""
    try:
        path = plot(args.model_dir, args.out)
    except (OSError, ValueError, ImportError) as e:
        print(str(e) if str(e).startswith("plot:") else f"plot: {e}", file=sys.stderr)
        return 1
    print(f"wrote {path}")
    return 0
