"""``python -m tfest_kit inspect MODEL_DIR``: what an Estimator model_dir holds.

Lists checkpoints (step, size, time), the latest evaluation of each ``eval*/`` directory,
and the SavedModel exports under ``export/*/`` with the best one marked when a best exporter
left its metrics beside it. ``--json`` prints the same as JSON.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys
import time
from typing import Any, Optional

from tfest_kit._cli_plot import eval_dirs, scalar_history

__all__ = ["describe", "format_text", "add_parser", "run"]

# Written into each export by tfest_kit.serving.best_exporter (assets.extra/<this>).
_EXPORT_METRICS = "tfest_kit_eval_metrics.json"
_CKPT_STEP = re.compile(r"-(\d+)$")


def _size(paths) -> int:
    return sum(os.path.getsize(p) for p in paths if os.path.isfile(p))


def _tree_size(root: str) -> int:
    return sum(_size(os.path.join(d, f) for f in files) for d, _, files in os.walk(root))


def _when(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds))


def _checkpoint_state(model_dir: str) -> tuple[Optional[str], list[str]]:
    """Reads the ``checkpoint`` state file: (latest prefix, all prefixes)."""
    from tfest_kit._tf import tf

    state = tf.train.get_checkpoint_state(model_dir)
    if state is None:
        return None, []
    fix = lambda p: p if os.path.isabs(p) else os.path.join(model_dir, p)  # noqa: E731
    return fix(state.model_checkpoint_path), [fix(p) for p in state.all_model_checkpoint_paths]


def _checkpoints(model_dir: str) -> dict:
    latest, listed = _checkpoint_state(model_dir)
    on_disk = [p[: -len(".index")] for p in glob.glob(os.path.join(model_dir, "*.index"))]
    prefixes = sorted(set(listed) | set(on_disk), key=lambda p: (_step(p) or -1, p))
    entries = []
    for prefix in prefixes:
        files = glob.glob(glob.escape(prefix) + ".*")
        index = prefix + ".index"
        entries.append(
            {
                "path": prefix,
                "step": _step(prefix),
                "bytes": _size(files),
                "modified": _when(os.path.getmtime(index)) if os.path.exists(index) else None,
                "in_state_file": prefix in listed,
                "complete": os.path.exists(index),
            }
        )
    return {"latest": latest, "checkpoints": entries, "state_file": latest is not None}


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
    for entry in sorted(os.listdir(exporter_dir)):
        path = os.path.join(exporter_dir, entry)
        if not (entry.isdigit() and os.path.isdir(path)):
            continue
        complete = os.path.exists(os.path.join(path, "saved_model.pb")) and os.path.exists(
            os.path.join(path, "variables", "variables.index")
        )
        versions.append(
            {
                "path": path,
                "version": int(entry),
                "bytes": _tree_size(path),
                "complete": complete,
                "metrics": _read_metrics(path),
                "best": False,
            }
        )
    _mark_best(versions)
    return versions


def _exports(model_dir: str) -> list[dict]:
    """Versions under ``export/<exporter>/`` (EvalSpec exporters) and ``export/`` itself."""
    base = os.path.join(model_dir, "export")
    if not os.path.isdir(base):
        return []
    exporters = []
    # export_saved_model(model_dir + "/export", …) puts versions straight into export/.
    direct = _versions(base)
    if direct:
        exporters.append({"name": ".", "dir": base, "versions": direct})
    for name in sorted(os.listdir(base)):
        exporter_dir = os.path.join(base, name)
        if os.path.isdir(exporter_dir) and not name.isdigit():
            exporters.append(
                {"name": name, "dir": exporter_dir, "versions": _versions(exporter_dir)}
            )
    return exporters


def _mark_best(versions: list[dict]) -> None:
    """Marks the export with the best monitored value, if a best exporter recorded values."""
    scored = [
        v
        for v in versions
        if v["complete"] and v["metrics"] and isinstance(v["metrics"].get("value"), (int, float))
    ]
    if not scored:
        return
    maximise = scored[-1]["metrics"].get("mode") == "max"
    best = (max if maximise else min)(scored, key=lambda v: v["metrics"]["value"])
    best["best"] = True


def describe(model_dir: str) -> dict:
    """Collects checkpoints, latest evaluations and exports of ``model_dir``.

    Args:
      model_dir: an Estimator ``model_dir``.

    Returns:
      ``{"model_dir", "checkpoints": {...}, "evaluations": [...], "exports": [...]}``.

    Raises:
      FileNotFoundError: if ``model_dir`` is not a directory.

    Example:

        info = describe("/tmp/model")
        print(info["checkpoints"]["latest"])
    """
    if not os.path.isdir(model_dir):
        raise FileNotFoundError(f"inspect: MODEL_DIR {model_dir!r} is not a directory")
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


def format_text(info: dict) -> str:
    """Renders :func:`describe`'s result for a terminal."""
    model_dir = info["model_dir"]
    lines = [f"model_dir: {model_dir}", ""]
    ckpts = info["checkpoints"]
    if not ckpts["checkpoints"]:
        lines.append(
            f"checkpoints: none (no `checkpoint` state file, no *.index files). "
            f"Files here: {sorted(os.listdir(model_dir))[:20]}"
        )
    else:
        lines.append(f"checkpoints ({len(ckpts['checkpoints'])}):")
        if not ckpts["state_file"]:
            lines.append("  (no `checkpoint` state file; listing *.index files)")
        for c in ckpts["checkpoints"]:
            mark = "  <- latest" if c["path"] == ckpts["latest"] else ""
            note = "" if c["complete"] else "  (missing .index: incomplete)"
            lines.append(
                f"  step {c['step'] if c['step'] is not None else '?':>8}  "
                f"{_human(c['bytes']):>9}  {c['modified'] or '-':19}  "
                f"{os.path.basename(c['path'])}{mark}{note}"
            )
    lines.append("")
    if not info["evaluations"]:
        lines.append("evaluations: none (no eval/ or eval_<name>/ directory)")
    for ev in info["evaluations"]:
        if ev["step"] is None:
            lines.append(f"evaluation {ev['dir']}/: no scalar summaries yet")
            continue
        lines.append(f"latest evaluation {ev['dir']}/ at step {ev['step']}:")
        for tag, value in ev["metrics"].items():
            lines.append(f"  {tag:30} {_format_metric(value)}")
    lines.append("")
    if not info["exports"]:
        lines.append("exports: none (no export/<exporter>/<version>/ directories)")
    for exporter in info["exports"]:
        lines.append(f"exports {os.path.relpath(exporter['dir'], model_dir)}/:")
        if not exporter["versions"]:
            lines.append("  (no numbered export directories)")
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


def run(args: argparse.Namespace) -> int:
    """Runs ``inspect``; returns 0, or 1 if MODEL_DIR does not exist."""
    try:
        info = describe(args.model_dir)
    except FileNotFoundError as e:
        print(str(e), file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(info, indent=1, sort_keys=True))
    else:
        sys.stdout.write(format_text(info))
    return 0
