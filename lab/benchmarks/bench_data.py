"""Data producers vs the trainer: is generating a batch cheap next to training on it?

For every producer (batch 32, context 64) this times ``sample(step)`` over consecutive steps and,
side by side (alternating rounds, medians), a bare forward + backward + AdamW step of the default
tiny model: GPT-NeoX, 2 layers, 4 heads, d_model 64, context 64, batch 32, built from
transformers with the producer's vocabulary, both on one thread. Goal: generation <= 10% of a
training step. Producers built position by position generate the rows of consecutive steps in
one call, so the time per batch is an average over consecutive steps, as a trainer sees it.

    python lab/benchmarks/bench_data.py [--rounds 3] [--out lab/benchmarks/RESULTS_data.md]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

from ihprobe.data import make_producer

BATCH, CONTEXT, STEPS = 32, 64, 1000
GOAL = 0.10
PRODUCERS = {  # label -> (name, options)
    "natural": ("natural", {}),
    "bi-induct": ("bi-induct", {}),
    "semi-natural (0.9, 0.9)": ("semi-natural", {"repetition": 0.9, "reliability": 0.9}),
    "markov order 1 (V=128)": ("markov", {}),
    "markov order 2 (V=128)": ("markov", {"order": 2}),
    "markov + repetition (0.9, 0.9)": ("markov", {"repetition": 0.9, "reliability": 0.9}),
    "iid (V=128)": ("iid", {}),
}


def tiny_trainer(vocab_size: int):
    """One AdamW step of the trainer's default model (GPT-NeoX 2 x 4 heads, d_model 64)."""
    from ihprobe import TrainConfig, build_model

    model = build_model(TrainConfig(context=CONTEXT, batch_size=BATCH), vocab_size).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step(tokens):
        model(input_ids=tokens, labels=tokens).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def time_per_call(fn, n: int) -> float:
    t = time.perf_counter()
    for i in range(n):
        fn(i)
    return (time.perf_counter() - t) / n


def measure(name: str, options: dict, rounds: int, steps: int) -> tuple[int, float, float]:
    """(vocab size, seconds per batch, seconds per training step), medians of ``rounds``."""
    producer = make_producer(name, batch_size=BATCH, context=CONTEXT, total_steps=STEPS, **options)
    train_step = tiny_trainer(producer.vocab_size)  # caches are built above, outside the timing
    batch = producer.sample(0).tokens
    train_step(batch)  # warm-up
    gen, train, offset = [], [], 1
    for _ in range(rounds):
        gen.append(time_per_call(lambda i, o=offset: producer.sample(o + i), steps))
        offset += steps
        train.append(time_per_call(lambda i: train_step(batch), 10))
    return producer.vocab_size, statistics.median(gen), statistics.median(train)


def main() -> int:
    torch.set_num_threads(1)  # one thread for both sides: stable ratios on a shared machine
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=64, help="consecutive batches per round")
    parser.add_argument("--out", help="also write the markdown table to this file")
    args = parser.parse_args()

    rows, failed = [], []
    for label, (name, options) in PRODUCERS.items():
        vocab, g, t = measure(name, options, args.rounds, args.steps)
        ratio = g / t
        if ratio > GOAL:
            failed.append(label)
        rows.append(
            f"| {label} | {vocab} | {g * 1e3:.2f} | {BATCH * CONTEXT / g / 1e3:,.0f}k "
            f"| {t * 1e3:.1f} | {BATCH * CONTEXT / t / 1e3:,.0f}k | {100 * ratio:.1f}% "
            f"| {'ok' if ratio <= GOAL else 'OVER'} |"
        )
        print(rows[-1], flush=True)
    header = [
        f"Producers at batch {BATCH} x context {CONTEXT}, {args.steps} consecutive batches per "
        f"round, medians of {args.rounds} rounds alternating with 10 training steps; "
        f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f} at the end (the ratio is what counts).",
        "",
        "| producer | vocab | ms / batch | tokens/s made | ms / train step | tokens/s trained "
        "| generation / step | goal <= 10% |",
        "|---|---|---|---|---|---|---|---|",
    ]
    note = [
        "",
        "The time per batch of row-by-row producers (semi-natural, markov) is the average over "
        "consecutive steps, whose rows are generated in blocks. These ratios are against a CPU "
        "training step; on an accelerator a step of this tiny model takes a few ms, so a trainer "
        "there should prefetch batches in a background thread.",
    ]
    table = "\n".join(header + rows + note) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write("# Data producer benchmark\n\n" + table)
    print("\n" + table)
    if failed:
        print(f"over the 10% goal: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
