"""``python -m tfest_kit inspect MODEL_DIR``: what an Estimator model_dir holds.

Checkpoints (damaged ones marked), each ``eval*/``'s latest evaluation and the exports in
``export/`` and ``export/*/``; ``--json`` prints JSON.
"""

import argparse
import json
import os
import sys

from tfest_kit._model_dir import (
    _checkpoints_on_disk,
    _read_state,
    checkpoint_damage,
    checkpoint_step,
    choose_checkpoint,
    complete_exports,
    dir_entries,
    eval_dirs,
    metrics_by_step,
    path_problem,
    read_export_metrics,
)
from tfest_kit.cli import _subparser
from tfest_kit.cli.plot import check_model_dir

__all__ = ["describe", "exports", "format_text", "add_parser", "run"]


def _checkpoints(model_dir: str) -> dict:
    """The checkpoints listed or found, read whole; ``latest``: the one an Estimator restores."""
    unreadable = path_problem(model_dir)  # TensorFlow reads no checkpoint there
    latest, problem, _ = (None, unreadable, {}) if unreadable else choose_checkpoint(model_dir)
    _, listed, _ = _read_state(model_dir)
    prefixes = sorted(
        set(listed) | set(_checkpoints_on_disk(model_dir)) | ({latest} if latest else set()),
        key=lambda p: (-1 if checkpoint_step(p) is None else checkpoint_step(p), p),
    )
    damage = (lambda p: None) if unreadable else checkpoint_damage
    entries = [{"path": p, "step": checkpoint_step(p), "damaged": damage(p)} for p in prefixes]
    return {"latest": latest, "state_file": problem, "checkpoints": entries}


def exports(model_dir: str) -> list[dict]:
    """The complete exports in ``model_dir/export/`` and in each exporter's ``export/*/``.

    Each is ``{"path" (its name is the version), "newest" (in its directory), "best_exporter"}``;
    :func:`describe` adds ``"damaged"`` (why its variables cannot be read, or None).
    """
    root, found = os.path.join(model_dir, "export"), []
    for paths in [complete_exports(os.path.join(root, n)) for n in ["", *dir_entries(root)]]:
        for p in paths:
            best = read_export_metrics(p) is not None
            found.append({"path": p, "newest": p == paths[-1], "best_exporter": best})
    return found


def describe(model_dir: str) -> dict:
    """Collects the checkpoints and the latest evaluations of ``model_dir``.

    Args:
      model_dir: an Estimator ``model_dir``.

    Returns:
      ``{"model_dir", "checkpoints": {"latest", "state_file", "checkpoints": [...]},
      "evaluations": [...], "exports": [...], "is_export", "export_dirs_below": [...],
      "model_dirs_below": [...]}`` (see :func:`exports`); ``state_file``: why its checkpoint is
      not the latest, or None; the last three tell, without checkpoints, an export (or a
      directory of them), a parent of exporters' directories or of model_dirs.

    Raises:
      FileNotFoundError: if ``model_dir`` is not a local directory.

    Example:

        damaged = [c for c in describe(model_dir)["checkpoints"]["checkpoints"] if c["damaged"]]
    """
    check_model_dir("inspect", model_dir)
    # Absolute: TensorFlow joins relative state entries onto it, the Keras bridge writes
    # absolute ones; so each checkpoint has one spelling.
    model_dir, evaluations = os.path.abspath(model_dir), []
    for directory in eval_dirs(model_dir):
        by_step = metrics_by_step(directory)
        step = max(by_step, default=None)
        metrics = {k: v for k, v in sorted(by_step.get(step, {}).items()) if k != "global_step"}
        evaluations.append({"dir": os.path.basename(directory), "step": step, "metrics": metrics})
    info = {"model_dir": model_dir, "checkpoints": _checkpoints(model_dir)}
    entries = [] if info["checkpoints"]["checkpoints"] else sorted(os.listdir(model_dir))
    info["is_export"] = "saved_model.pb" in entries or bool(complete_exports(model_dir))
    info["export_dirs_below"] = [e for e in entries if complete_exports(f"{model_dir}/{e}")]
    info["model_dirs_below"] = [e for e in entries if os.path.isfile(f"{model_dir}/{e}/checkpoint")]
    found = exports(model_dir)  # read whole here, not for signature's list of exports
    found = [dict(e, damaged=checkpoint_damage(e["path"] + "/variables/variables")) for e in found]
    return {**info, "evaluations": evaluations, "exports": found}


def format_text(info: dict) -> str:
    """Renders :func:`describe`'s result for a terminal.

    Example:

        sys.stdout.write(format_text(describe(model_dir)))
    """
    model_dir, checkpoints = info["model_dir"], info["checkpoints"]
    lines = [f"model_dir: {model_dir}", ""]
    count = len(checkpoints["checkpoints"])
    lines.append(f"checkpoints ({count}):" if count else "checkpoints: none")
    if info.get("is_export"):
        lines.append(f"  note: an export: see python -m tfest_kit signature {model_dir}")
    if info.get("export_dirs_below"):  # MODEL_DIR/export/
        below = f"{model_dir}/{info['export_dirs_below'][0]}"
        lines.append(f"  note: exports below it: see python -m tfest_kit signature {below}")
    if info.get("model_dirs_below"):
        lines.append(f"  note: the model_dirs below it: {', '.join(info['model_dirs_below'])}")
    for c in checkpoints["checkpoints"]:
        # A state file copied from elsewhere names paths outside MODEL_DIR: show them whole.
        name = os.path.basename(c["path"]) if os.path.dirname(c["path"]) == model_dir else c["path"]
        mark = "  <- latest" if c["path"] == checkpoints["latest"] else ""
        note = f"  (damaged: {c['damaged']})" if c["damaged"] else ""
        step = "?" if c["step"] is None else c["step"]
        lines.append(f"  step {step:>8}  {name}{mark}{note}")
    if checkpoints["state_file"] and checkpoints["checkpoints"]:
        latest = "; the latest is the newest intact checkpoint" if checkpoints["latest"] else ""
        lines.append(f"  note: {checkpoints['state_file']}{latest}")
    lines.append("")
    if not info["evaluations"]:
        lines.append("evaluations: none")
    for ev in info["evaluations"]:
        at = f"at step {ev['step']}" if ev["step"] is not None else "unreadable (damaged events)"
        lines.append(f"latest evaluation {ev['dir']}/ {at}:")
        for tag, value in ev["metrics"].items():
            lines.append(f"  {tag:30} {f'{value:.6g}' if isinstance(value, float) else value}")
    lines += ["", "exports:" if info["exports"] else "exports: none"]
    for e in info["exports"]:
        mark = f"  (damaged: {e['damaged']})" if e["damaged"] else ""
        mark += "  <- newest" if e["newest"] else ""
        lines.append(f"  {os.path.relpath(e['path'], model_dir)}{mark}")
    return "\n".join(lines) + "\n"


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Registers ``inspect`` on an ``argparse`` subparsers object."""
    summary = "list the checkpoints, latest eval metrics and exports of a model_dir"
    parser = _subparser(subparsers, run, summary)
    parser.add_argument("model_dir", metavar="MODEL_DIR", help="the Estimator model_dir")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    return parser


def run(args: argparse.Namespace) -> int:
    """Runs ``inspect``; returns 0, or 1 if MODEL_DIR is not a readable directory."""
    try:
        info = describe(args.model_dir)
    except OSError as e:
        print(e, file=sys.stderr)
        return 1
    if args.json:  # strict JSON: a diverged run's NaN / Infinity metrics become null
        info = json.loads(json.dumps(info), parse_constant=lambda constant: None)
        print(json.dumps(info, indent=1, sort_keys=True, allow_nan=False))
    else:
        sys.stdout.write(format_text(info))
    return 0
