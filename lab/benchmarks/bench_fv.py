"""FV scores: the cached fast path vs one patched pass per head, side by side (issue 61).

``ihprobe.fv_scores`` patches each head's clean mean into the last position of the corrupted
prompts. The reference loop (``method="reference"``) runs one whole patched pass per head, all
the task's prompts in one batch; the fast path (``method="fast"``) runs each corrupted prompt
once with its KV cache kept and then only the last token, once per head. Both run here on a
model of Pythia-160m's shape with random weights (GPT-NeoX, 12 layers x 12 heads, d_model 768,
vocabulary 50,304) on the CPU, one thread, each in a process of its own so that its peak
resident memory is its own. Compute is CPU time (user + system of that process); both include
loading, the prompts and the clean pass, which they share.

It prints a markdown table and writes it to ``lab/benchmarks/RESULTS_fv.md``.
Run: ``nice .venv/bin/python lab/benchmarks/bench_fv.py [--prompts 4] [--shots 10]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch

PYTHIA_160M = {
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
    "vocab_size": 50304,
    "max_position_embeddings": 2048,
    "rotary_pct": 0.25,
    "use_parallel_residual": True,
}
WORDS = (
    "the of and to in is that for it as with was on be by this are or from at which but not "
    "have an they you one had all were can there their has more when will would been if so "
    "what out about into than them some could time only other new these two may then do first"
).split()
GOALS = {"compute": 10.0, "wall": 5.0}


def build(directory: Path, config: dict = PYTHIA_160M) -> Path:
    """The random Pythia-160m-shaped checkpoint (``config``: another GPT-NeoX shape) with a
    byte-level BPE of the task's words, and the task file: a list of 3-5 words -> its first
    word (prompts of several lengths)."""
    import random

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM, PreTrainedTokenizerFast

    torch.manual_seed(0)
    model = GPTNeoXForCausalLM(GPTNeoXConfig(**config, bos_token_id=0, eos_token_id=0))
    model.save_pretrained(directory)
    rng = random.Random(0)
    lists = [rng.sample(WORDS, rng.choice((3, 4, 5))) for _ in range(60)]
    task = directory / "first_item.tsv"
    task.write_text("".join(f"{', '.join(w)}\t{w[0]}\n" for w in lists))
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    text = [
        f"Q: {x}\nA: {y}\n\n"
        for x, y in (line.split("\t") for line in task.read_text().splitlines())
    ]
    trainer = trainers.BpeTrainer(
        vocab_size=512,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=["<|endoftext|>"],
    )
    bpe.train_from_iterator(text, trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token="<|endoftext|>", pad_token="<|endoftext|>"
    )
    tokenizer.save_pretrained(directory)
    return task


def one(directory: str, method: str, shots: int, prompts: int) -> None:
    """Score in this process; print JSON: times, peak memory, the probabilities."""
    import ihprobe

    torch.set_num_threads(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = ihprobe.load(directory)
    task = Path(directory) / "first_item.tsv"
    cpu, wall = time.process_time(), time.perf_counter()
    result = ihprobe.fv_scores(model, [task], shots=shots, prompts=prompts, method=method)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    found = result.tasks[0]
    print(
        json.dumps(
            {
                "cpu": cpu,
                "wall": wall,
                "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "method": result.settings["method"],
                "tokens": int(found.corrupted.valid.sum()),
                "lengths": sorted(set((found.corrupted.last + 1).tolist())),
                "probabilities": found.probabilities.tolist(),
            }
        )
    )


def run(directory: Path, method: str, shots: int, prompts: int) -> dict:
    argv = [sys.executable, __file__, "--one", str(directory), method]
    argv += ["--shots", str(shots), "--prompts", str(prompts)]
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--one", nargs=2, metavar=("DIRECTORY", "METHOD"))
    parser.add_argument("--shots", type=int, default=10)
    parser.add_argument("--prompts", type=int, default=4)
    args = parser.parse_args()
    if args.one:
        one(*args.one, args.shots, args.prompts)
        return
    with tempfile.TemporaryDirectory() as tmp:
        build(Path(tmp))
        fast = run(Path(tmp), "fast", args.shots, args.prompts)
        reference = run(Path(tmp), "reference", args.shots, args.prompts)
    gap = max(
        abs(a - b)
        for ra, rb in zip(fast["probabilities"], reference["probabilities"], strict=True)
        for a, b in zip(ra, rb, strict=True)
    )
    effect = max(
        abs(p - r[0]) for r in zip(*reference["probabilities"], strict=True) for p in r[1:]
    )
    compute, wall = reference["cpu"] / fast["cpu"], reference["wall"] / fast["wall"]
    lines = [
        "# FV scores: cached fast path vs one patched pass per head",
        "",
        f"Pythia-160m's shape (GPT-NeoX, 12 x 12 heads, d_model 768, vocabulary 50,304), "
        f"random weights; one task (first_item), {args.prompts} prompts of {args.shots} shots "
        f"({fast['tokens']} tokens, lengths {fast['lengths']}); 145 groups (144 heads + the "
        f"baseline). torch {torch.__version__}, 1 CPU thread, {platform.processor() or 'cpu'}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} (shared machine). "
        "Each method in a process of its own; times include the clean pass both share.",
        "",
        "| method | CPU s | wall s | peak RSS MB |",
        "|---|---|---|---|",
        *(
            f"| {r['method']} | {r['cpu']:.1f} | {r['wall']:.1f} | {r['peak_mb']:.0f} |"
            for r in (reference, fast)
        ),
        "",
        f"Compute (CPU time) reference / fast: **{compute:.1f}x** (goal >= "
        f"{GOALS['compute']:g}x); wall: **{wall:.1f}x** (goal >= {GOALS['wall']:g}x); peak "
        f"memory fast / reference: {fast['peak_mb'] / reference['peak_mb']:.2f}x.",
        f"Largest difference between the two methods' probabilities: {gap:.2e} (largest "
        f"indirect effect {effect:.2e}).",
    ]
    table = "\n".join(lines) + "\n"
    print(table)
    (Path(__file__).parent / "RESULTS_fv.md").write_text(table)


if __name__ == "__main__":
    main()
