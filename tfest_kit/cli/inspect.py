"""``python -m tfest_kit inspect MODEL_DIR``: what an Estimator model_dir holds.

Lists checkpoints (step, size, time), the latest evaluation of each ``eval*/`` directory,
and the SavedModel exports under ``export/*/`` with the best one marked when a best exporter
left its metrics beside it. ``--json`` prints the same as JSON.
"""

from __future__ import annotations

import argparse
import glob
import json
import logging
import math
import os
import re
import stat
import sys
import time
from typing import Any, Optional

from tfest_kit.cli.plot import check_model_dir, eval_dirs, scalar_history

__all__ = ["describe", "format_text", "add_parser", "run"]

# Written into each export by tfest_kit.serving.best_exporter (assets.extra/<this>).
_EXPORT_METRICS = "tfest_kit_eval_metrics.json"
_CKPT_STEP = re.compile(r"-(\d+)$")


def _stat(path: str) -> Optional[os.stat_result]:
    # A running Estimator deletes old checkpoints and exports between our listing and our stat.
    try:
        return os.stat(path)
    except OSError:
        return None


def _size(paths) -> int:
    stats = (_stat(p) for p in paths)
    return sum(st.st_size for st in stats if st is not None and stat.S_ISREG(st.st_mode))


def _tree_size(root: str) -> int:
    return sum(_size(os.path.join(d, f) for f in files) for d, _, files in os.walk(root))


def _when(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds))


def _checkpoint_state(model_dir: str) -> tuple[Optional[str], list[str], Optional[str]]:
    """Reads the ``checkpoint`` state file: (latest prefix, all prefixes, why unreadable).

    ``model_dir`` must be absolute: TensorFlow joins relative entries onto it and Keras-bridge
    models write absolute ones, so both compare equal to the ``*.index`` files found here.
    """
    from tfest_kit import logs
    from tfest_kit._tf import tf

    path = os.path.join(model_dir, "checkpoint")
    if not os.path.lexists(path):
        return None, [], None
    try:
        # TensorFlow logs its parse error as two warnings; the listing says it in one line.
        with logs.quieted(logging.ERROR):
            state = tf.train.get_checkpoint_state(model_dir)
    except (OSError, tf.errors.OpError) as e:
        return None, [], f"{type(e).__name__}: {e}"
    if state is None or not state.model_checkpoint_path:
        return None, [], "not a CheckpointState text proto with a model_checkpoint_path"
    fix = lambda p: os.path.normpath(os.path.join(model_dir, p))  # noqa: E731
    return (
        fix(state.model_checkpoint_path),
        [fix(p) for p in state.all_model_checkpoint_paths],
        None,
    )


def _checkpoints(model_dir: str) -> dict:
    from tfest_kit._model_dir import checkpoint_damage  # loads TensorFlow

    latest, listed, state_error = _checkpoint_state(model_dir)
    pattern = os.path.join(glob.escape(model_dir), "*.index")  # "lr[0.1]" is no pattern
    on_disk = [p[: -len(".index")] for p in glob.glob(pattern)]
    prefixes = sorted(
        set(listed) | set(on_disk) | ({latest} if latest else set()),
        key=lambda p: (-1 if _step(p) is None else _step(p), p),
    )
    entries = []
    for prefix in prefixes:
        files = glob.glob(glob.escape(prefix) + ".*")
        index = _stat(prefix + ".index")
        entries.append(
            {
                "path": prefix,
                "step": _step(prefix),
                "bytes": _size(files),
                "modified": _when(index.st_mtime) if index else None,
                "in_state_file": prefix in listed or prefix == latest,
                "complete": index is not None,
                # Why restoring it would fail (truncated data, garbled index), else None.
                "damaged": checkpoint_damage(prefix) if index is not None else None,
            }
        )
    return {
        "latest": latest,
        "checkpoints": entries,
        "state_file": latest is not None,
        "state_file_error": state_error,
        "latest_missing": latest is not None
        and not any(e["complete"] for e in entries if e["path"] == latest),
    }


def _step(prefix: str) -> Optional[int]:
    match = _CKPT_STEP.search(prefix)
    return int(match.group(1)) if match else None


def _evaluations(model_dir: str) -> list[dict]:
    results = []
    for directory in eval_dirs(model_dir):
        history = scalar_history(directory)
        if not history:
            results.append({"dir": os.path.basename(directory), "step": None, "metrics": {}})
            continue
        step = max(points[-1][0] for points in history.values())
        metrics = {
            tag: dict(points)[step]
            for tag, points in sorted(history.items())
            if tag != "global_step" and step in dict(points)
        }
        results.append({"dir": os.path.basename(directory), "step": step, "metrics": metrics})
    return results


def _read_metrics(export_dir: str) -> Optional[dict]:
    path = os.path.join(export_dir, "assets.extra", _EXPORT_METRICS)
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"inspect: ignoring unreadable {path}: {e}", file=sys.stderr)
        return None


def _versions(exporter_dir: str) -> list[dict]:
    versions = []
    for entry in _listdir(exporter_dir):
        path = os.path.join(exporter_dir, entry)
        if not (entry.isdigit() and os.path.isdir(path)):
            continue
        versions.append(
            {
                "path": path,
                "version": int(entry),
                "bytes": _tree_size(path),
                "complete": _is_complete(path),
                "metrics": _read_metrics(path),
                "best": False,
            }
        )
    # Oldest first by number, not by name: "10" sorts before "9" as a string.
    versions.sort(key=lambda v: v["version"])
    return versions


def _is_complete(export_dir: str) -> bool:
    """The rule of ``tfest_kit._model_dir._is_complete``, repeated with ``os``.

    Importing ``_model_dir`` would load TensorFlow, which this module imports only inside the
    one function that needs it (``_checkpoint_state``), so that it loads without TensorFlow as
    ``python -m tfest_kit doctor`` needs. A graph in either form counts:
    ``best_exporter(as_text=True)`` writes ``saved_model.pbtxt``.
    """
    has_graph = any(
        _stat(os.path.join(export_dir, name)) is not None
        for name in ("saved_model.pb", "saved_model.pbtxt")
    )
    return has_graph and _stat(os.path.join(export_dir, "variables", "variables.index")) is not None


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _temp_exports(exporter_dir: str) -> list[str]:
    """``temp-*`` directories: an export being written now, or one a crash left behind."""
    return [e for e in _listdir(exporter_dir) if e.startswith("temp-")]


def _exports(model_dir: str) -> list[dict]:
    """Versions under ``export/<exporter>/`` (EvalSpec exporters) and ``export/`` itself."""
    base = os.path.join(model_dir, "export")
    if not os.path.isdir(base):
        return []
    exporters = []
    # export_saved_model(model_dir + "/export", …) puts versions straight into export/.
    direct = _versions(base)
    if direct or _temp_exports(base):
        exporters.append(_exporter(".", base, direct))
    for name in _listdir(base):
        exporter_dir = os.path.join(base, name)
        if os.path.isdir(exporter_dir) and not name.isdigit() and not name.startswith("temp-"):
            exporters.append(_exporter(name, exporter_dir, _versions(exporter_dir)))
    return exporters


def _exporter(name: str, exporter_dir: str, versions: list[dict]) -> dict:
    return {
        "name": name,
        "dir": exporter_dir,
        "versions": versions,
        "temp": _temp_exports(exporter_dir),
        "best_by": _mark_best(versions),
    }


def _mark_best(versions: list[dict]) -> Optional[dict]:
    """Marks the best export, if a best exporter recorded values; returns what it compared.

    Only exports recorded for the newest one's monitor compare, in its mode: that is what the
    exporter itself compares after a restart. Once its monitor was switched (``loss`` to
    ``accuracy``, say), the older exports' values are of another metric, often in the other
    direction, and comparing them would mark a loss-era export BEST by its small "accuracy".

    Args:
      versions: one exporter directory's versions, oldest first; the best gets ``best=True``.

    Returns:
      ``{"monitor", "mode"}`` the exports were compared by, or None if none has a value.
    """
    scored = [
        v
        for v in versions
        if v["complete"] and v["metrics"] and _is_number(v["metrics"].get("value"))
    ]
    if not scored:
        return None
    newest = scored[-1]["metrics"]
    monitor, mode = newest.get("monitor"), newest.get("mode")
    same = [v for v in scored if v["metrics"].get("monitor") == monitor]
    best = (max if mode == "max" else min)(same, key=lambda v: v["metrics"]["value"])
    best["best"] = True
    return {"monitor": monitor, "mode": mode}


def _is_number(value: Any) -> bool:
    # A NaN would win no comparison, and never lose one either (the exporter skips them).
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def describe(model_dir: str) -> dict:
    """Collects checkpoints, latest evaluations and exports of ``model_dir``.

    Args:
      model_dir: an Estimator ``model_dir``.

    Returns:
      ``{"model_dir", "checkpoints": {...}, "evaluations": [...], "exports": [...]}``.

    Raises:
      FileNotFoundError: if ``model_dir`` is not a directory (the message says what to pass).

    Example:

        info = describe("/tmp/model")
        print(info["checkpoints"]["latest"])
    """
    check_model_dir("inspect", model_dir)
    # Relative and absolute spellings of one checkpoint must compare equal (see _checkpoint_state).
    model_dir = os.path.abspath(model_dir)
    return {
        "model_dir": os.path.abspath(model_dir),
        "checkpoints": _checkpoints(model_dir),
        "evaluations": _evaluations(model_dir),
        "exports": _exports(model_dir),
    }


def _human(size: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return str(size)


def _format_metric(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _checkpoint_lines(model_dir: str, ckpts: dict) -> list[str]:
    lines = []
    if ckpts["state_file_error"]:
        lines.append(
            f"warning: the `checkpoint` state file is unreadable ({ckpts['state_file_error']}): "
            "Estimator ignores it and would train from step 0 (tfest_kit's estimators and "
            "train_and_evaluate resume from the newest intact checkpoint). Fix: rewrite it with "
            "tf.train.update_checkpoint_state(MODEL_DIR, '<newest model.ckpt-N below>')."
        )
    elif ckpts["latest_missing"]:
        lines.append(
            f"warning: the `checkpoint` state file names {ckpts['latest']} as latest, but its "
            "files are gone: Estimator.train/evaluate fail with 'The passed save_path is not a "
            "valid checkpoint'. Fix: restore those files, or point the state file at one listed "
            "below with tf.train.update_checkpoint_state(MODEL_DIR, '<model.ckpt-N>')."
        )
    if not ckpts["checkpoints"]:
        files = _listdir(model_dir)
        lines.append(
            f"checkpoints: none (no `checkpoint` state file, no *.index files). "
            f"Files here: {files[:20]}"
        )
        graphs = {"saved_model.pb", "saved_model.pbtxt"}
        if graphs & set(files) or any(f.isdigit() or f.startswith("temp-") for f in files):
            lines.append(
                "  This looks like an export, not a model_dir: see it with "
                f"`python -m tfest_kit signature {model_dir}`."
            )
        return lines
    lines.append(f"checkpoints ({len(ckpts['checkpoints'])}):")
    if not ckpts["state_file"] and not ckpts["state_file_error"]:
        lines.append("  (no `checkpoint` state file; listing *.index files)")
    for c in ckpts["checkpoints"]:
        mark = "  <- latest" if c["path"] == ckpts["latest"] else ""
        note = "" if c["complete"] else "  (listed in `checkpoint`, but its files are missing)"
        if c["damaged"]:
            note = f"  (damaged: {c['damaged']})"
        # A state file copied from elsewhere names paths outside MODEL_DIR: show them whole.
        name = c["path"]
        if os.path.dirname(name) == model_dir:
            name = os.path.basename(name)
        step = c["step"] if c["step"] is not None else "?"
        lines.append(
            f"  step {step:>8}  {_human(c['bytes']):>9}  {c['modified'] or '-':19}  "
            f"{name}{mark}{note}"
        )
    return lines


def _evaluation_lines(evaluations: list[dict]) -> list[str]:
    if not evaluations:
        return ["evaluations: none (no eval/ or eval_<name>/ directory)"]
    lines = []
    for ev in evaluations:
        if ev["step"] is None:
            lines.append(f"evaluation {ev['dir']}/: no scalar summaries yet")
            continue
        lines.append(f"latest evaluation {ev['dir']}/ at step {ev['step']}:")
        for tag, value in ev["metrics"].items():
            lines.append(f"  {tag:30} {_format_metric(value)}")
    return lines


def _export_lines(model_dir: str, exports: list[dict]) -> list[str]:
    if not exports:
        return ["exports: none (no export/<exporter>/<version>/ directories)"]
    lines = []
    for exporter in exports:
        lines.append(f"exports {os.path.relpath(exporter['dir'], model_dir)}/:")
        if not exporter["versions"]:
            lines.append("  (no numbered export directories)")
        lines += _best_by_note(exporter)
        for v in exporter["versions"]:
            extra = []
            if not v["complete"]:
                extra.append("incomplete")
            if v["metrics"]:
                m = v["metrics"]
                extra.append(f"{m.get('monitor')}={_format_metric(m.get('value'))}")
            if v["best"]:
                extra.append("BEST")
            lines.append(
                f"  {v['version']:>12}  {_human(v['bytes']):>9}  {'  '.join(extra)}".rstrip()
            )
        for name in exporter.get("temp", []):
            lines.append(
                f"  {name}  (unfinished: an export being written now, or left by one that "
                "crashed; delete it when no export is running)"
            )
    return lines


def _best_by_note(exporter: dict) -> list[str]:
    """Explains BEST when the exports were made for different monitors (a switched exporter)."""
    best_by = exporter.get("best_by")
    if not best_by:
        return []
    others = sorted(
        {
            str(v["metrics"].get("monitor"))
            for v in exporter["versions"]
            if v["metrics"] and v["metrics"].get("monitor") != best_by["monitor"]
        }
    )
    if not others:
        return []
    mode = f" ({best_by['mode']})" if best_by["mode"] else ""
    return [
        f"  (BEST compares only the {best_by['monitor']} exports{mode}, as the exporter now "
        f"does; the ones for {', '.join(others)} are from before its monitor was switched)"
    ]


def format_text(info: dict) -> str:
    """Renders :func:`describe`'s result for a terminal.

    Example:

        sys.stdout.write(format_text(describe("/tmp/model")))
    """
    model_dir = info["model_dir"]
    lines = [f"model_dir: {model_dir}", ""]
    lines += _checkpoint_lines(model_dir, info["checkpoints"])
    lines.append("")
    lines += _evaluation_lines(info["evaluations"])
    lines.append("")
    lines += _export_lines(model_dir, info["exports"])
    return "\n".join(lines).rstrip() + "\n"


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Registers ``inspect`` on an ``argparse`` subparsers object."""
    parser = subparsers.add_parser(
        "inspect",
        help="list checkpoints, latest eval metrics and exports of a model_dir",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    parser.add_argument("model_dir", metavar="MODEL_DIR", help="the Estimator model_dir")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.set_defaults(func=run)
    return parser


def _finite(value: Any) -> Any:
    """``value`` with every NaN or infinite float replaced by None (JSON's null)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def run(args: argparse.Namespace) -> int:
    """Runs ``inspect``; returns 0, or 1 if MODEL_DIR is not a readable directory."""
    try:
        info = describe(args.model_dir)
    except OSError as e:
        message = str(e) if str(e).startswith("inspect:") else f"inspect: cannot read: {e}"
        print(message, file=sys.stderr)
        return 1
    if args.json:
        # Strict JSON: a diverged run's NaN / Infinity metrics become null.
        print(json.dumps(_finite(info), indent=1, sort_keys=True, allow_nan=False))
    else:
        sys.stdout.write(format_text(info))
    return 0
