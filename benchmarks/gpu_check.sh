#!/usr/bin/env bash
# The GPU path, measured: one prepared run for a machine with an NVIDIA GPU (see docs/gpu.md).
#
#   bash benchmarks/gpu_check.sh            # from the repository root, or from anywhere
#   OUT=/some/dir bash benchmarks/gpu_check.sh
#
# 1. installs tensorflow[and-cuda]==2.15.1 over requirements-2.15.txt into .venv-2.15 (made by
#    `make setup STACK=2.15` first if missing); offline, from wheels downloaded beforehand with
#    `pip download -r requirements-2.15.txt "tensorflow[and-cuda]==2.15.1" -d WHEELS`: WHEELS=that dir;
# 2. records the GPU (nvidia-smi) and what TensorFlow sees;
# 3. runs `make demo STACK=2.15` on the GPU and, beside it, on the CPU (CUDA_VISIBLE_DEVICES=-1), each
#    into a fresh model_dir, timed;
# 4. runs the suite's fast part (-m "not slow"): tests/conftest.py pins every test to the CPU,
#    so this checks that the CUDA build of TensorFlow passes it, not GPU speed;
# 5. runs `python -m benchmarks --quick` on the GPU and on the CPU (the harness hides the GPU
#    unless CUDA_VISIBLE_DEVICES names one, so it is set here for the GPU run);
# 6. writes summary.md: the GPU, the versions, each step's status and time, the demo's results
#    and the two benchmark tables.
#
# Everything goes to $OUT (default benchmarks/results/gpu_check): one log per step, the
# benchmark tables (quick_gpu.md/.json, quick_cpu.md/.json) and summary.md. A failing step
# does not stop the others; the exit status is 1 if any failed, 2 if no GPU is visible. In a dry
# run (ALLOW_NO_GPU=1 and no GPU) nvidia-smi's failure is expected and does not count.
#
# Settings (environment variables):
#   OUT           where logs and figures go
#   WHEELS        a directory of wheels to install from, offline (pip --no-index)
#   SKIP_INSTALL  1: use .venv-2.15 as it is (a dry run, or wheels already installed)
#   ALLOW_NO_GPU  1: go on without a GPU (a dry run on a CPU machine: both runs on the CPU;
#                 exit status 0 if every step but nvidia-smi passed)
#   DEMO_ARGS     flags for `make demo` (default: the demo's own, ~500 steps)
#   PYTEST_ARGS   what pytest runs (default: -m "not slow" -n 8)
#   BENCH_ARGS    flags for python -m benchmarks (default: --quick)
#   STEP_TIMEOUT  seconds each step may take (default 1800)
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 1
OUT="${OUT:-$ROOT/benchmarks/results/gpu_check}"
mkdir -p "$OUT" || exit 1
OUT="$(cd "$OUT" && pwd)"
PY="$ROOT/.venv-2.15/bin/python"
STEP_TIMEOUT="${STEP_TIMEOUT:-1800}"
DEMO_ARGS="${DEMO_ARGS:-}"
PYTEST_ARGS="${PYTEST_ARGS:--m 'not slow' -n 8}"
BENCH_ARGS="${BENCH_ARGS:---quick}"
SUMMARY="$OUT/summary.md"
FAILED=0
DRY_RUN=""
STATUS_LINES=()

say() { printf '[gpu_check] %s\n' "$*" >&2; }

# step NAME COMMAND…: runs COMMAND with a timeout, its output to $OUT/NAME.log; records the
# exit status and the wall time.
step() {
    local name="$1"
    shift
    local log="$OUT/$name.log" start end status
    say "$name: $* (log: $log)"
    start=$(date +%s.%N)
    timeout "$STEP_TIMEOUT" bash -c "$*" >"$log" 2>&1
    status=$?
    end=$(date +%s.%N)
    local secs
    secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
    STATUS_LINES+=("| $name | $status | $secs |")
    if [ "$status" -ne 0 ]; then
        FAILED=1
        say "$name: exit status $status after $secs s; last lines:"
        tail -n 15 "$log" >&2
    fi
    return "$status"
}

# --- 1. the environment ------------------------------------------------------------------
if [ ! -x "$PY" ]; then
    step setup "make setup STACK=2.15" || exit 1
fi
if [ "${SKIP_INSTALL:-0}" != 1 ]; then
    # The CUDA libraries come as pip wheels (nvidia-*-cu12) with TensorFlow's and-cuda extra;
    # requirements-2.15.txt keeps every other package at the version the suite passed with.
    source_args=""
    if [ -n "${WHEELS:-}" ]; then
        source_args="--no-index --find-links $(printf '%q' "$WHEELS")"
    fi
    step install "'$PY' -m pip install $source_args -r requirements-2.15.txt 'tensorflow[and-cuda]==2.15.1'" || {
        say "cannot install tensorflow[and-cuda]==2.15.1 (offline? set WHEELS, see the top of this file)"
        exit 1
    }
fi

# --- 2. the GPU --------------------------------------------------------------------------
step gpu_info "nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; nvidia-smi -L"
step tf_devices "CUDA_VISIBLE_DEVICES=0 '$PY' -c 'import tensorflow as tf; print(tf.__version__); print(tf.config.list_physical_devices(\"GPU\")); print(tf.sysconfig.get_build_info().get(\"cuda_version\"), tf.sysconfig.get_build_info().get(\"cudnn_version\"))'"
devices_status=$?
if ! grep -q "PhysicalDevice(name='/physical_device:GPU" "$OUT/tf_devices.log"; then
    if [ "${ALLOW_NO_GPU:-0}" != 1 ]; then
        say "TensorFlow sees no GPU (see $OUT/tf_devices.log and $OUT/gpu_info.log); stopping"
        exit 2
    fi
    # Without a GPU nvidia-smi fails (or is missing): expected here, so only TensorFlow's answer
    # counts so far.
    FAILED=$((devices_status != 0))
    DRY_RUN=" (dry run: no GPU found, ALLOW_NO_GPU=1)"
    say "no GPU found: a dry run (ALLOW_NO_GPU=1); nvidia-smi's failure does not count, and the 'gpu' runs below run on the CPU"
fi

# --- 3. make demo, GPU and CPU -----------------------------------------------------------
# -o: the venv counts as set up (else make may rebuild it from requirements-2.15.txt, which would
# reinstall the CPU build and need the network).
STAMP=".venv-2.15/.installed-python$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
for device in gpu cpu; do
    visible=0
    [ "$device" = cpu ] && visible=-1
    rm -rf "$OUT/demo_$device"
    step "demo_$device" "CUDA_VISIBLE_DEVICES=$visible make -o $STAMP demo STACK=2.15 ARGS=\"--model_dir=$OUT/demo_$device/model --cache_dir=$OUT/demo_cache $DEMO_ARGS\""
done

# --- 4. the suite's fast part --------------------------------------------------------------
step tests "'$PY' -m pytest $PYTEST_ARGS -q -p no:cacheprovider"

# --- 5. benchmarks --quick, GPU and CPU --------------------------------------------------
for device in gpu cpu; do
    visible=0
    [ "$device" = cpu ] && visible=-1
    step "bench_$device" "CUDA_VISIBLE_DEVICES=$visible '$PY' -m benchmarks $BENCH_ARGS --out-dir '$OUT' --stem quick_$device"
done

# --- 6. summary.md -----------------------------------------------------------------------
{
    echo "# GPU check$DRY_RUN, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo
    echo "GPU (nvidia-smi):"
    echo
    echo '```'
    cat "$OUT/gpu_info.log" 2>/dev/null
    echo '```'
    echo
    echo "TensorFlow, its GPUs, CUDA / cuDNN it was built with:"
    echo
    echo '```'
    grep -v -e "^20[0-9][0-9]-" -e "^WARNING" -e "^To enable" "$OUT/tf_devices.log" 2>/dev/null
    echo '```'
    echo
    echo "| step | exit status | seconds |"
    echo "|---|---|---|"
    printf '%s\n' "${STATUS_LINES[@]}"
    echo
    for device in gpu cpu; do
        echo "make demo on the $device: $(grep -E '^(trained|eval:)' "$OUT/demo_$device.log" 2>/dev/null | tr '\n' ' ')"
        echo
    done
    echo "Suite (-m \"not slow\"): $(tail -n 1 "$OUT/tests.log" 2>/dev/null)"
    echo
    for device in gpu cpu; do
        echo "## benchmarks $BENCH_ARGS on the $device"
        echo
        cat "$OUT/quick_$device.md" 2>/dev/null || echo "(no table: see bench_$device.log)"
        echo
    done
} >"$SUMMARY"
say "summary: $SUMMARY"
if [ "$FAILED" = 0 ]; then
    say "every step passed${DRY_RUN:+ (nvidia-smi aside)}$DRY_RUN"
else
    say "a step failed (see above)$DRY_RUN: exit status 1"
fi
exit "$FAILED"
