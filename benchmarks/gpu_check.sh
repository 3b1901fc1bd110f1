#!/usr/bin/env bash
# The prepared device job on a lent GPU machine, from the repository root:
#   bash benchmarks/gpu_check.sh [benchmarks/device_job.py flags]      (PYTHON=... to choose)
# The machine needs torch and transformers; the other wheels travel in $WHEELS (default
# wheels/, README "On a GPU") and are installed from there, offline, when one is missing.
# Writes benchmarks/RESULTS_device.md (section device-cuda) within about 8 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python}
WHEELS=${WHEELS:-wheels}
if ! "$PYTHON" -c "import transformer_lens, datasets, plotly, pwlf" 2>/dev/null; then
    if [ -d "$WHEELS" ]; then
        "$PYTHON" -m pip install -q --no-index --no-deps "$WHEELS"/*.whl
    else
        echo "transformer-lens, datasets, plotly or pwlf is missing and there is no $WHEELS/" >&2
        exit 2
    fi
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export HF_HUB_OFFLINE=1
export IHPROBE_CACHE=${IHPROBE_CACHE:-$(mktemp -d)}
# the natural-text law grid's GPU cells and second seeds, K at a time, for the time left
# (resumable: finished runs are reused); set IHPROBE_NATURAL_GPU= (empty) to skip it
export IHPROBE_NATURAL_GPU=${IHPROBE_NATURAL_GPU-"$PYTHON -m studies.natural_law.queue --per-device 8 --seconds 240"}
exec "$PYTHON" benchmarks/device_job.py "$@"
