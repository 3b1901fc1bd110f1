#!/usr/bin/env bash
# The prepared device job on a lent GPU machine, from the repository root:
#   bash lab/benchmarks/gpu_check.sh [lab/benchmarks/device_job.py flags, e.g. --budget 520]
# Environment (all optional):
#   PYTHON    the interpreter that has torch and transformers (default: python)
#   WHEELS    a folder of the other wheels (README "On a GPU"; default wheels/), installed
#             offline into $SITE (default /tmp/ihprobe-site) when one is missing
#   IHPROBE_CACHE   the cache root; the natural-text study needs the corpus in it (`make corpus`
#             there, or a copy of corpora/ and corpus/ from a machine that built it, its
#             files' paths and modification times kept: the tokenized stream is keyed on them)
#   IHPROBE_NATURAL_GPU   the study's GPU step (default below; empty: skip it)
#   IHPROBE_DEVICE_OUT    a folder to gather what the job wrote into, for a machine that is
#             given back afterwards: the results files (the natural-text studies' in
#             natural_law/), the study's log, and its finished runs, the grid's, size arm's and
#             late study's (records and final checkpoint, without training state) as
#             natural-runs.tar.xz in parts of at most 15 MiB: unpack them at the repository root
#             and run each study's command for that cell and seed to record it
# Writes lab/benchmarks/RESULTS_device.md (section device-cuda) within the job's budget, and the
# cuda sections of RESULTS_fastpath.md and RESULTS_series.md where those steps run.
set -uo pipefail
cd "$(dirname "$0")/../.."  # the repository root
PYTHON=${PYTHON:-python}
WHEELS=${WHEELS:-wheels}
SITE=${SITE:-/tmp/ihprobe-site}
if ! "$PYTHON" -c "import transformer_lens, datasets, plotly, pwlf" 2>/dev/null; then
    if [ -d "$WHEELS" ]; then
        "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
            --upgrade --target "$SITE" "$WHEELS"/*.whl || exit 2
        export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
    else
        echo "transformer-lens, datasets, plotly or pwlf is missing and there is no $WHEELS/" >&2
        exit 2
    fi
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export HF_HUB_OFFLINE=1
# a package the wheels assume the machine has (numpy, pandas, scipy, einops, jaxtyping, ...):
# one line naming it, not a traceback from the first step
if ! said=$("$PYTHON" -c "import ihprobe, transformer_lens" 2>&1); then
    echo "ihprobe cannot be imported here ($(echo "$said" | tail -n 1)); add that package's wheel to $WHEELS/" >&2
    exit 2
fi
export IHPROBE_CACHE=${IHPROBE_CACHE:-$(mktemp -d)}
# the natural-text size arm's runs, then the law grid's GPU cells and second seeds, 8 at a
# time (K = 8 summed more tokens/s than 16 on an H200, RESULTS_device.md), until the job's budget
# is spent (resumable: finished runs are reused); set IHPROBE_NATURAL_GPU= (empty) to skip it
export IHPROBE_NATURAL_GPU=${IHPROBE_NATURAL_GPU-"$PYTHON -m lab.studies.natural_law.queue --per-device 8 --seconds 100000"}
"$PYTHON" lab/benchmarks/device_job.py "$@"
status=$?
if [ -n "${IHPROBE_DEVICE_OUT:-}" ]; then
    mkdir -p "$IHPROBE_DEVICE_OUT"
    cp lab/benchmarks/RESULTS_device.md lab/benchmarks/RESULTS_fastpath.md lab/benchmarks/RESULTS_series.md \
        "$IHPROBE_DEVICE_OUT"/ 2>/dev/null
    cp "${TMPDIR:-/tmp}"/ihprobe-natural-study.log "$IHPROBE_DEVICE_OUT"/natural-study.log 2>/dev/null
    mkdir -p "$IHPROBE_DEVICE_OUT"/natural_law
    cp lab/studies/natural_law/results*.csv lab/studies/natural_law/RESULTS*.md \
        "$IHPROBE_DEVICE_OUT"/natural_law/ 2>/dev/null
    finished=()
    for result in runs/studies/law-natural*/*/seed*/result.json; do
        [ -f "$result" ] || continue
        run=$(dirname "$result")
        last=$(ls -d "$run"/checkpoints/step-* 2>/dev/null | tail -1)
        finished+=($(find "$run" -maxdepth 1 -type f) ${last:+"$last"})
    done
    if [ ${#finished[@]} -gt 0 ]; then
        tar -cf - "${finished[@]}" | xz -T0 -6 | split -b 15M -d - "$IHPROBE_DEVICE_OUT"/natural-runs.tar.xz.part-
    fi
    echo "gathered into $IHPROBE_DEVICE_OUT: $(ls "$IHPROBE_DEVICE_OUT" | tr '\n' ' ')"
fi
exit $status
