"""``python -m tfest_kit plot MODEL_DIR``: training loss and eval metrics drawn to a PNG.

Read from the Estimator's event files: ``MODEL_DIR`` (training), ``MODEL_DIR/eval*`` (each
evaluation), as ``tensorboard --logdir MODEL_DIR`` shows them.
"""

import argparse
import math
import os
import sys
from typing import Optional

from tfest_kit._model_dir import dir_entries, eval_dirs, metrics_by_step
from tfest_kit.cli import _subparser

__all__ = ["scalar_history", "check_model_dir", "plot", "add_parser", "run"]


def check_model_dir(command: str, model_dir: str) -> None:
    """Raises ``FileNotFoundError`` (naming ``command``) unless ``model_dir`` is a local dir."""
    if not os.path.isdir(model_dir):
        raise FileNotFoundError(
            f"{command}: MODEL_DIR {model_dir!r} is not a local directory. Pass the model_dir "
            "given to the Estimator (copy a remote one here first)."
        )


def scalar_history(log_dir: str) -> dict[str, list[tuple[int, float]]]:
    """``{tag: [(step, value), ...]}`` of the event files in ``log_dir``, by step."""
    history: dict[str, list[tuple[int, float]]] = {}
    for step, metrics in metrics_by_step(log_dir).items():
        for tag, value in metrics.items():
            history.setdefault(tag, []).append((step, value))
    return history


def plot(model_dir: str, out: Optional[str] = None) -> str:
    """Draws training loss and eval metrics over steps to a PNG; returns the path written.

    Args:
      model_dir: an Estimator ``model_dir``.
      out: the image to write; default ``MODEL_DIR/training.png``.

    Raises:
      FileNotFoundError: no such directory, or no scalar summaries in it.
      ImportError: matplotlib is not installed.
    """
    check_model_dir("plot", model_dir)
    out = out or os.path.join(model_dir, "training.png")
    out += "" if os.path.splitext(out)[1] else ".png"  # what matplotlib writes: say that name
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train = scalar_history(model_dir)
    evals = {os.path.basename(d): scalar_history(d) for d in eval_dirs(model_dir)}
    if not train and not any(evals.values()):
        below = [e for e in dir_entries(model_dir) if metrics_by_step(f"{model_dir}/{e}")]
        fix = "train with an Estimator (save_summary_steps > 0) first"
        if below:  # premade_estimators' output: one model_dir per estimator
            fix = f"plot one of the model_dirs below it: {', '.join(below)}"
        raise FileNotFoundError(f"plot: no scalar summaries in {model_dir!r} or its eval*/: {fix}.")
    # One panel per tag: loss first (train and each eval), then eval metrics, then the rest.
    runs = [("train", {"loss": train["loss"]} if "loss" in train else {}), *evals.items()]
    runs.append(("train", {t: p for t, p in train.items() if t != "loss"}))
    panels: dict[str, list[tuple[str, list]]] = {"loss": []}
    for name, history in runs:
        for tag, points in history.items():
            if tag != "global_step":  # the run's, not the model's
                panels.setdefault(tag, []).append((name, points))
    shown = [tag for tag, lines in panels.items() if lines]
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
    except OSError as e:  # makedirs' "[Errno 17] File exists: 'x'" for a file on the way
        fix = "give a FILE.png whose parents are directories you can write"
        raise OSError(f"plot: cannot write --out {out!r} ({e}): {fix}") from e
    finally:
        plt.close(fig)
    return out


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Registers ``plot`` on an ``argparse`` subparsers object."""
    summary = "draw training loss and eval metrics from the event files to a PNG"
    parser = _subparser(subparsers, run, summary)
    parser.add_argument("model_dir", metavar="MODEL_DIR", help="the Estimator model_dir")
    parser.add_argument("--out", metavar="FILE.png", help="default MODEL_DIR/training.png")
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
