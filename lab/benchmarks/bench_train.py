"""Training throughput: ``ihprobe.train`` vs HF ``Trainer`` vs a bare forward+backward loop.

All three train the same model (GPT-NeoX, 2 layers, 4 heads, d_model 64, C=64, B=32, SDPA
attention) with AdamW on the same batches, measured side by side in one process and
interleaved, so a busy machine slows all of them alike; the best of ``--repeats`` counts.
ihprobe's time is the whole ``train()`` call (model build, two checkpoints, logging
included); HF Trainer's is ``trainer.train()`` (its default optimiser); the bare loop
(forward, backward, the same fused AdamW step, nothing else; plain torch, at the run's
precision) counts its loop only.

    .venv/bin/python lab/benchmarks/bench_train.py [--steps 200] [--repeats 3] [--write]

``--write`` stores the table in lab/benchmarks/RESULTS_train.md. Targets: >= 1.5x HF Trainer,
>= 0.9x the bare loop.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import platform
import tempfile
import time
import warnings
from pathlib import Path

import torch

from ihprobe import TrainConfig, build_model, causal_lm_loss, train
from ihprobe.data import make_producer

RESULTS = Path(__file__).with_name("RESULTS_train.md")


def config(out: str, steps: int, device: str = "cpu", precision: str = "fp32") -> TrainConfig:
    return TrainConfig(
        precision=precision,
        out=out,
        producer="iid",
        producer_options={"vocab_size": 128},
        steps=steps,
        checkpoints="linear",
        n_checkpoints=1,
        progress=False,
        device=device,
    )


def batches(cfg: TrainConfig) -> list[torch.Tensor]:
    producer = make_producer(
        cfg.producer, batch_size=cfg.batch_size, context=cfg.context, **cfg.producer_options
    )
    return [producer.sample(step).tokens for step in range(cfg.total_steps)]


def time_ihprobe(cfg: TrainConfig, tmp: str) -> float:
    out = tempfile.mkdtemp(dir=tmp)
    begin = time.perf_counter()
    train(TrainConfig(**{**cfg.__dict__, "out": out}))
    return time.perf_counter() - begin


def time_bare(cfg: TrainConfig, data: list[torch.Tensor]) -> float:
    model = build_model(cfg, vocab_size=128).to(cfg.device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0, fused=True)
    device = torch.device(cfg.device)
    bf16 = torch.autocast(device.type, dtype=torch.bfloat16)  # the same precision as the run's
    begin = time.perf_counter()
    for tokens in data:
        with bf16 if cfg.precision == "bf16" else contextlib.nullcontext():
            loss = causal_lm_loss(model, tokens.to(cfg.device))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    if torch.cuda.is_initialized():
        torch.cuda.synchronize()
    return time.perf_counter() - begin


def tf32_matmuls(cfg: TrainConfig, fn):
    """``fn()`` with TF32 matmuls on cuda when the run's are (``--precision tf32``), as
    ``ihprobe.train`` runs them; the previous setting afterwards."""
    before = torch.backends.cuda.matmul.allow_tf32
    if cfg.precision == "tf32" and cfg.device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = True
    try:
        return fn()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def time_hf_trainer(cfg: TrainConfig, data: list[torch.Tensor], tmp: str) -> float:
    from transformers import PrinterCallback, Trainer, TrainingArguments

    rows = [{"input_ids": row, "labels": row} for tokens in data for row in tokens]
    args = TrainingArguments(
        output_dir=tempfile.mkdtemp(dir=tmp),
        per_device_train_batch_size=cfg.batch_size,
        max_steps=cfg.total_steps,
        learning_rate=cfg.lr,
        lr_scheduler_type="cosine",
        warmup_steps=max(1, round(cfg.warmup * cfg.total_steps)),
        weight_decay=cfg.weight_decay,
        max_grad_norm=cfg.grad_clip,
        logging_steps=cfg.log_every,
        save_strategy="no",
        report_to=[],
        use_cpu=cfg.device == "cpu",
        bf16=cfg.precision == "bf16",
        tf32=cfg.precision == "tf32" or None,
        dataloader_num_workers=0,
        disable_tqdm=True,
        seed=cfg.seed,
    )
    trainer = Trainer(model=build_model(cfg, vocab_size=128), args=args, train_dataset=rows)
    trainer.remove_callback(PrinterCallback)
    begin = time.perf_counter()
    trainer.train()
    return time.perf_counter() - begin


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--write", action="store_true", help="write lab/benchmarks/RESULTS_train.md"
    )
    parser.add_argument("--device", default="cpu", help="cpu or cuda (lab/benchmarks/gpu_check.sh)")
    parser.add_argument("--precision", default="fp32", help="fp32, tf32 or bf16 (all three)")
    opts = parser.parse_args()
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    with tempfile.TemporaryDirectory() as tmp:
        cfg = config(tmp, opts.steps, opts.device, opts.precision)
        data = batches(cfg)
        tokens = cfg.total_steps * cfg.tokens_per_update
        best = {"ihprobe train": [], "HF Trainer": [], "bare loop": []}
        for _ in range(opts.repeats):
            best["ihprobe train"].append(time_ihprobe(cfg, tmp))
            best["HF Trainer"].append(time_hf_trainer(cfg, data, tmp))
            best["bare loop"].append(tf32_matmuls(cfg, lambda: time_bare(cfg, data)))
    speed = {name: tokens / min(times) for name, times in best.items()}
    ours = speed["ihprobe train"]
    lines = [
        f"Training throughput, {opts.steps} updates of B=32 x C=64 tokens, GPT-NeoX 2x4 heads, "
        f"d_model 64, {opts.precision}, best of {opts.repeats} (torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, {platform.processor() or platform.machine()}).",
        "",
        "| trainer | tokens/s | ihprobe train / this |",
        "|---|---:|---:|",
    ]
    for name, value in speed.items():
        lines.append(f"| {name} | {value:,.0f} | {ours / value:.2f}x |")
    lines += [
        "",
        "Targets: >= 1.5x HF Trainer, >= 0.9x the bare loop. "
        "Command: `.venv/bin/python lab/benchmarks/bench_train.py --write`.",
    ]
    table = "\n".join(lines)
    print(table)
    if opts.write:
        RESULTS.write_text("# Trainer benchmark\n\n" + table + "\n")


if __name__ == "__main__":
    main()
