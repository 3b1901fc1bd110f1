"""``ihprobe fv SOURCE``: every head's function-vector score (Todd et al.'s average indirect
effect), printed with the tasks it averages over and the verdict.

SOURCE is a checkpoint, a run directory (its last checkpoint) or a hub id, with a tokenizer that
reads text. Tasks are the built-in ones, or ``--task`` files of ``(x, y)`` pairs (the formats of
``ablate --task``); tasks the model does at chance are listed and left out.

    ihprobe fv runs/natural/checkpoints/step-020000 --shots 10 --prompts 25 --show 5
    ihprobe fv path/to/checkpoint --task antonyms.tsv --task capitals.json
    ihprobe fv path/to/checkpoint --html fv.html

``--html FILE`` also writes a page: the scores beside each head's prefix matching, as a table
and heatmaps, the tasks, and the attention viewer on a task prompt with both scores in its head
picker.
"""

from __future__ import annotations

from ihprobe.cli import _common as flags
from ihprobe.cli._stages import stage


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "fv",
        help="function-vector head scores (average indirect effect); top heads and verdict",
        description="Each head's mean output over clean few-shot prompts, patched into the "
        "last token of label-shuffled prompts: the rise in the answer's probability, averaged "
        "over the tasks the model does above chance.",
    )
    flags.add_sources(p, out=None, many=False)
    p.add_argument(
        "--task",
        action="append",
        default=None,
        help="task file of (x, y) pairs, repeatable (default: the built-in tasks)",
    )
    p.add_argument("--shots", type=flags.positive_int, default=10, help="examples per prompt")
    p.add_argument("--prompts", type=flags.positive_int, default=25, help="prompts per task")
    flags.add_seed(p, "seed of the examples, queries and shuffles")
    flags.add_show(p, "heads printed, best first", default=10)
    p.add_argument(
        "--html",
        metavar="FILE",
        help="also write a page: FV beside prefix matching, the tasks, the attention viewer "
        "(default: none)",
    )
    flags.add_model_flags(p)
    flags.add_placement(p)
    flags.add_quiet(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from ihprobe.causal.fv import fv_scores
    from ihprobe.causal.tasks import read_task
    from ihprobe.core.errors import IhprobeError
    from ihprobe.core.files import check_writable_file
    from ihprobe.io import models

    if args.prompts < 2:
        raise IhprobeError(f"--prompts {args.prompts}: pass at least 2 prompts per task.")
    tasks = [read_task(t) for t in args.task] if args.task else None  # checked before loading
    if args.html:
        check_writable_file(args.html, "--html", page=True)
    ckpt = flags.one_checkpoint(args)
    stage(f"loading {ckpt.label}")
    where = {"device": args.device, "dtype": args.dtype, **flags.placement(args)}
    model = models.load(ckpt.source, revision=ckpt.revision, **where)
    stage("FV scores: clean means, cached corrupted passes, one last-token pass per head")
    result = fv_scores(model, tasks, shots=args.shots, prompts=args.prompts, seed=args.seed)
    for layer, head, score in result.top_heads(args.show):
        print(f"L{layer}H{head}: {score:+.4f}")
    print(result.summary())
    if args.html:
        stage("prefix matching and the attention viewer, for the --html page")
        path = write_page(args.html, model, result)
        print(f"page: {path}")
    return 0


def write_page(path, model, result):
    """The ``--html`` page: :func:`~ihprobe.figures.fv.fv_section` and the attention viewer on
    the first clean prompt of the best-done task, opening on the top FV head (the top
    prefix-matching head when no task is done above chance)."""
    from ihprobe.figures.fv import fv_section
    from ihprobe.figures.report import Section, write_report
    from ihprobe.figures.viewer import attention_viewer, prefix_scores

    prefix = prefix_scores(model)
    task = max(result.tasks, key=lambda t: (t.above_chance, t.accuracy))
    prompt = task.clean.tokens[0, : int(task.clean.last[0]) + 1]
    top = result.top_heads(1)
    start = top[0][:2] if top else divmod(int(prefix.argmax()), model.cfg.n_heads)
    note = (
        f"The first clean prompt of task {task.name}: choose a layer and a head (each with its "
        "prefix matching, PS, and FV score), hover a token to see where it attends."
    )
    viewer = attention_viewer(model, prompt, start=start, fv=result, prefix=prefix)
    sections = [fv_section(result, prefix), Section("Attention on a task prompt", [note, viewer])]
    return write_report(path, f"ihprobe fv: {result.provenance.label}", sections)
