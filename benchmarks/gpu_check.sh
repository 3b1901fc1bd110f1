#!/usr/bin/env bash
# The GPU check of issue 13, run where an accelerator is lent (the `device` tool):
#   bash benchmarks/gpu_check.sh            (from the repository root; PYTHON=... to choose)
# 1. bench_scale on cuda in bfloat16 (70m, 160m, 410m; 100 probe rows);
# 2. bench_train on cuda (ihprobe train vs HF Trainer vs a bare loop);
# 3. the DDP path: torchrun over every visible GPU (nccl when more than one; with one GPU the
#    job has world size 1, so DDP is not joined, and the results say so);
# then records the tables, with the device named, in benchmarks/RESULTS_scale.md.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export HF_HUB_OFFLINE=1
export IHPROBE_CACHE=${IHPROBE_CACHE:-$(mktemp -d)}
RESULTS=benchmarks/RESULTS_scale.md
DEVICE=$("$PYTHON" -c "import torch; print(torch.cuda.get_device_name())")
GPUS=$("$PYTHON" -c "import torch; print(torch.cuda.device_count())")
echo "device: $DEVICE ($GPUS visible)"

"$PYTHON" benchmarks/bench_scale.py --device cuda --dtype bfloat16 --sizes 70m,160m,410m \
    --rows 100 --repeats 3 --section gpu-scale

TRAIN=$("$PYTHON" benchmarks/bench_train.py --device cuda --steps 200 --repeats 3)
echo "$TRAIN"

RUN=$(mktemp -d)
START=$(date +%s)
"$PYTHON" -m torch.distributed.run --nproc-per-node "$GPUS" -m ihprobe train --out "$RUN/ddp" \
    --device cuda --steps 200 --n-checkpoints 2 --no-progress
SECONDS_DDP=$(( $(date +%s) - START ))
if [ "$GPUS" -gt 1 ]; then
    DDP="torchrun --nproc-per-node $GPUS (nccl): 200 updates in ${SECONDS_DDP} s, exit 0."
else
    DDP="torchrun --nproc-per-node 1: 200 updates in ${SECONDS_DDP} s, exit 0; one GPU means world size 1, so DDP and nccl were not joined."
fi

"$PYTHON" - "$RESULTS" "$DEVICE" "$TRAIN" "$DDP" <<'PY'
import sys
sys.path.insert(0, "benchmarks")
from pathlib import Path

from bench_scale import write_section

results, device, train, ddp = sys.argv[1:]
write_section(Path(results), "gpu-train", f"{device}.\n\n{train}\n\n{ddp}")
PY
echo "recorded in $RESULTS"
