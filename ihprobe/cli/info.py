"""``ihprobe info SOURCE``: load a checkpoint and describe it (a quick check that it loads).

On a run directory it lists the checkpoints with step, tokens and ``duplicate_of``: an earlier
checkpoint whose weights are identical.
"""

from __future__ import annotations

import json

from ihprobe.cli import _common as flags
from ihprobe.cli._stages import stage


def register(subparsers) -> None:
    p = subparsers.add_parser("info", help="load a checkpoint and describe its architecture")
    flags.add_sources(p, out=None, many=False)
    flags.add_json(p)
    flags.add_model_flags(p)
    flags.add_placement(p)
    flags.add_quiet(p, "no stage lines")
    p.set_defaults(func=run)


def run(args) -> int:
    from pathlib import Path

    from ihprobe.io import models
    from ihprobe.io.runs import checkpoints

    path = Path(args.sources[0])
    if path.is_dir() and not (path / "config.json").is_file():
        rows = _checkpoint_rows(checkpoints(path))
        print(json.dumps(rows, indent=2) if args.json else _table(rows))
        return 0
    ckpt = flags.one_checkpoint(args)
    stage(f"loading {ckpt.label}")
    where = {"device": args.device, "dtype": args.dtype, **flags.placement(args)}
    model = models.load(ckpt.source, revision=ckpt.revision, **where)
    cfg = model.cfg
    prov = models.provenance(model)
    info = {
        "model": prov.model,
        "step": prov.step,
        "tokens": prov.tokens,
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


def _checkpoint_rows(found) -> list[dict]:
    """One row per checkpoint; ``duplicate_of`` from the weights hash."""
    from ihprobe.io.weights import weights_hash
    from ihprobe.series.repeats import Duplicates

    duplicates, rows = Duplicates(), []
    for index, c in enumerate(found, 1):
        stage(f"hashing {index}/{len(found)}: {c.label}")
        digest = weights_hash(c.source)
        rows.append(
            {
                "checkpoint": c.source,
                "step": c.step,
                "tokens": c.tokens,
                "duplicate_of": duplicates.check(c, digest),
            }
        )
    return rows


def _table(rows: list[dict]) -> str:
    lines = [f"{'step':>8} {'tokens':>12}  checkpoint"]
    for r in rows:
        same = f"  (same weights as {r['duplicate_of']})" if r["duplicate_of"] else ""
        lines.append(f"{r['step']!s:>8} {r['tokens']!s:>12}  {r['checkpoint']}{same}")
    return "\n".join(lines)
