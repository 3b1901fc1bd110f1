"""``ihprobe info SOURCE``: load a checkpoint and describe it (a quick check that it loads)."""

from __future__ import annotations

import json


def register(subparsers) -> None:
    p = subparsers.add_parser("info", help="load a checkpoint and describe its architecture")
    p.add_argument("source", help="checkpoint directory, run directory or hub id")
    p.add_argument("--revision", help="hub revision, e.g. step1000")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    from pathlib import Path

    from ihprobe import models

    path = Path(args.source)
    if path.is_dir() and not (path / "config.json").is_file():
        found = models.checkpoints(path)
        rows = [{"checkpoint": c.source, "step": c.step, "tokens": c.tokens} for c in found]
        print(
            json.dumps(rows, indent=2)
            if args.json
            else "\n".join(f"{r['step']!s:>8} {r['tokens']!s:>12}  {r['checkpoint']}" for r in rows)
        )
        return 0
    model = models.load(args.source, revision=args.revision)
    cfg = model.cfg
    info = {
        "model": models.provenance(model).model,
        "architecture": type(model.original_model).__name__,
        "n_layers": cfg.n_layers,
        "n_heads": cfg.n_heads,
        "n_key_value_heads": getattr(cfg, "n_key_value_heads", None) or cfg.n_heads,
        "d_model": cfg.d_model,
        "d_head": cfg.d_head,
        "n_ctx": cfg.n_ctx,
        "d_vocab": cfg.d_vocab,
    }
    print(
        json.dumps(info, indent=2) if args.json else "\n".join(f"{k}: {v}" for k, v in info.items())
    )
    return 0
