"""``python -m tfest_kit inspect MODEL_DIR``: what an Estimator model_dir holds.

Lists checkpoints (step, size, time), the latest evaluation of each ``eval*/`` directory,
and the SavedModel exports under ``export/*/`` with the best one marked when a best exporter
left its metrics beside it. ``--json`` prints the same as JSON.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import stat
import sys
import time
from typing import Any, Optional

from tfest_kit._model_dir import (
    _is_complete,
    _read_state,
    _step,
    checkpoint_damage,
    eval_dirs,
    metrics_by_step,
    read_export_metrics,
)
from tfest_kit.cli.plot import check_model_dir

__all__ = ["describe", "format_text", "add_parser", "run"]

_FIX_STATE = "Fix: tf.train.update_checkpoint_state(MODEL_DIR, '<model.ckpt-N below>')."


def _stat(path: str) -> Optional[os.stat_result]:
    try:  # a running Estimator deletes old checkpoints and exports between listing and stat
        return os.stat(path)
    except OSError:
        return None


def _size(paths) -> int:
    stats = (_stat(p) for p in paths)
    return sum(st.st_size for st in stats if st is not None and stat.S_ISREG(st.st_mode))


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _checkpoints(model_dir: str) -> dict:
    """The checkpoints the state file lists and the ``*.index`` files found (absolute paths)."""
    latest, listed, state_error = None, [], None
    if os.path.lexists(os.path.join(model_dir, "checkpoint")):
        latest, listed, state_error = _read_state(model_dir)
    on_disk = [p[: -len(".index")] for p in glob.glob(glob.escape(model_dir) + "/*.index")]
    prefixes = sorted(
        set(listed) | set(on_disk) | ({latest} if latest else set()),
        key=lambda p: (-1 if _step(p) is None else _step(p), p),
    )
    entries = []
    for prefix in prefixes:
        index = _stat(prefix + ".index")
        entries.append(
            {
                "path": prefix,
                "step": _step(prefix),
                "bytes": _size(glob.glob(glob.escape(prefix) + ".*")),
                "modified": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(index.st_mtime))
                if index
                else None,
                "in_state_file": prefix in listed or prefix == latest,
                "complete": index is not None,
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


def _exports(model_dir: str) -> list[dict]:
    """Versions under ``export/<exporter>/`` (EvalSpec exporters) and ``export/`` itself."""
    base = os.path.join(model_dir, "export")
    # export_saved_model(model_dir + "/export", …) puts versions straight into export/.
    exporters = [(".", base)] if os.path.isdir(base) else []
    for name in _listdir(base):
        path = os.path.join(base, name)
        if os.path.isdir(path) and not name.isdigit() and not name.startswith("temp-"):
            exporters.append((name, path))
    found = []
    for name, path in exporters:
        versions = []
        for entry in sorted((e for e in _listdir(path) if e.isdigit()), key=int):
            version = os.path.join(path, entry)
            if os.path.isdir(version):
                walk = os.walk(version)
                versions.append(
                    {
                        "path": version,
                        "version": int(entry),
                        "bytes": sum(
                            _size(os.path.join(d, f) for f in files) for d, _, files in walk
                        ),
                        "complete": _is_complete(version),
                        "metrics": read_export_metrics(version),
                        "best": False,
                    }
                )
        temp = [e for e in _listdir(path) if e.startswith("temp-")]  # being written, or crashed
        if name != "." or versions or temp:
            best_by = _mark_best(versions)
            found.append(
                {"name": name, "dir": path, "versions": versions, "temp": temp, "best_by": best_by}
            )
    return found


def _mark_best(versions: list[dict]) -> Optional[dict]:
    """Marks the best export; returns the ``{"monitor", "mode"}`` compared, or None.

    Only exports of the newest one's monitor compare, as the best exporter compares after a
    restart: once its monitor was switched, the older values are of another metric.
    """

    def finite(value: Any) -> bool:  # the exporter skips NaN, which would win no comparison
        return (
            isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        )

    scored = [v for v in versions if v["complete"] and finite((v["metrics"] or {}).get("value"))]
    if not scored:
        return None
    monitor, mode = scored[-1]["metrics"].get("monitor"), scored[-1]["metrics"].get("mode")
    same = [v for v in scored if v["metrics"].get("monitor") == monitor]
    (max if mode == "max" else min)(same, key=lambda v: v["metrics"]["value"])["best"] = True
    return {"monitor": monitor, "mode": mode}


def describe(model_dir: str) -> dict:
    """Collects checkpoints, latest evaluations and exports of ``model_dir``.

    Returns:
      ``{"model_dir", "checkpoints": {...}, "evaluations": [...], "exports": [...]}``.

    Raises:
      FileNotFoundError: if ``model_dir`` is not a directory (the message says what to pass).
    """
    check_model_dir("inspect", model_dir)
    # Absolute: TensorFlow joins relative state entries onto it, the Keras bridge writes
    # absolute ones; so each checkpoint has one spelling.
    model_dir = os.path.abspath(model_dir)
    evaluations = []
    for directory in eval_dirs(model_dir):
        by_step = metrics_by_step(directory)
        step = max(by_step, default=None)
        metrics = {k: v for k, v in sorted(by_step.get(step, {}).items()) if k != "global_step"}
        evaluations.append({"dir": os.path.basename(directory), "step": step, "metrics": metrics})
    return {
        "model_dir": model_dir,
        "checkpoints": _checkpoints(model_dir),
        "evaluations": evaluations,
        "exports": _exports(model_dir),
    }


def _human(size: float) -> str:
    for unit in ("B", "KB", "MB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"


def _number(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _checkpoint_lines(model_dir: str, ckpts: dict) -> list[str]:
    lines = []
    if ckpts["state_file_error"]:
        lines.append(
            f"warning: {ckpts['state_file_error']}: Estimator ignores it and would train from "
            f"step 0 (tfest_kit resumes from the newest intact checkpoint). {_FIX_STATE}"
        )
    elif ckpts["latest_missing"]:
        lines.append(
            f"warning: the `checkpoint` state file names {ckpts['latest']} as latest, but its "
            "files are gone: Estimator fails with 'not a valid checkpoint'. Restore them, or "
            + _FIX_STATE
        )
    if not ckpts["checkpoints"]:
        files = _listdir(model_dir)
        lines.append(
            f"checkpoints: none (no `checkpoint` state file, no *.index files). {files[:20]}"
        )
        export_like = any(f.isdigit() or f.startswith(("temp-", "saved_model.pb")) for f in files)
        if export_like:
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
        note = f"  (damaged: {c['damaged']})" if c["damaged"] else note
        # A state file copied from elsewhere names paths outside MODEL_DIR: show them whole.
        name = c["path"]
        name = os.path.basename(name) if os.path.dirname(name) == model_dir else name
        step = "?" if c["step"] is None else c["step"]
        modified = c["modified"] or "-"
        lines.append(
            f"  step {step:>8}  {_human(c['bytes']):>9}  {modified:19}  {name}{mark}{note}"
        )
    return lines


def _export_lines(model_dir: str, exports: list[dict]) -> list[str]:
    if not exports:
        return ["exports: none (no export/<exporter>/<version>/ directories)"]
    lines = []
    for exporter in exports:
        lines.append(f"exports {os.path.relpath(exporter['dir'], model_dir)}/:")
        if not exporter["versions"]:
            lines.append("  (no numbered export directories)")
        best_by = exporter["best_by"] or {}
        monitors = {str(v["metrics"].get("monitor")) for v in exporter["versions"] if v["metrics"]}
        others = sorted(monitors - {str(best_by.get("monitor"))})
        if best_by and others:  # a switched exporter: say why BEST ignores some exports
            mode = f" ({best_by['mode']})" if best_by["mode"] else ""
            lines.append(
                f"  (BEST compares only the {best_by['monitor']} exports{mode}, as the exporter "
                f"now does; the ones for {', '.join(others)} are from before its monitor was "
                "switched)"
            )
        for v in exporter["versions"]:
            m = v["metrics"]
            extra = ["incomplete"] * (not v["complete"])
            extra += [f"{m.get('monitor')}={_number(m.get('value'))}"] if m else []
            extra += ["BEST"] * v["best"]
            lines.append(
                f"  {v['version']:>12}  {_human(v['bytes']):>9}  {'  '.join(extra)}".rstrip()
            )
        lines += [
            f"  {name}  (unfinished: an export being written now, or left by one that crashed; "
            "delete it when no export is running)"
            for name in exporter["temp"]
        ]
    return lines


def format_text(info: dict) -> str:
    """Renders :func:`describe`'s result for a terminal."""
    model_dir = info["model_dir"]
    lines = [f"model_dir: {model_dir}", ""]
    lines += _checkpoint_lines(model_dir, info["checkpoints"]) + [""]
    if not info["evaluations"]:
        lines.append("evaluations: none (no eval/ or eval_<name>/ directory)")
    for ev in info["evaluations"]:
        if ev["step"] is None:
            lines.append(f"evaluation {ev['dir']}/: no scalar summaries yet")
        else:
            lines.append(f"latest evaluation {ev['dir']}/ at step {ev['step']}:")
            lines += [f"  {tag:30} {_number(value)}" for tag, value in ev["metrics"].items()]
    lines += ["", *_export_lines(model_dir, info["exports"])]
    return "\n".join(lines).rstrip() + "\n"


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Registers ``inspect`` on an ``argparse`` subparsers object."""
    parser = subparsers.add_parser(
        "inspect",
        help="list checkpoints, latest eval metrics and exports of a model_dir",
        description=__doc__.split("\n\n")[1],
    )
    parser.add_argument("model_dir", metavar="MODEL_DIR", help="the Estimator model_dir")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Runs ``inspect``; returns 0, or 1 if MODEL_DIR is not a readable directory."""
    try:
        info = describe(args.model_dir)
    except OSError as e:
        print(e if str(e).startswith("inspect:") else f"inspect: cannot read: {e}", file=sys.stderr)
        return 1
    if args.json:  # strict JSON: a diverged run's NaN / Infinity metrics become null
        info = json.loads(json.dumps(info), parse_constant=lambda constant: None)
        print(json.dumps(info, indent=1, sort_keys=True, allow_nan=False))
    else:
        sys.stdout.write(format_text(info))
    return 0
