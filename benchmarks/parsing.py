"""Parsing recipes on CPU: EVALB F1 of a trained parser against its training budget, and the
speed of constrained decoding at each beam size.

Treebanks (--treebank): `pcfg`, the toy of tests/synthetic_treebank.py (8-word sentences over a
few hundred words); `wsj_like`, benchmarks/wsj_like_treebank.py (the size and shape of the WSJ's
10% sample: 3,500 trees of ~21 words, ~9k word types, ~6.5% of test words unseen in training).
Training, dev and test trees come from different seeds.

Steps: datagen with --task=parsing, training with the trainer CLI for --train_steps updates or
--train_minutes of wall clock (dev F1 every --eval_every updates at --eval_beam, the best
checkpoint kept, with --average_last the average of the last N checkpoints, saved every
--save_every updates or, by default, as the trainer spaces them over a time budget's
cool-down), then the test sentences decoded by each of --checkpoints at each of --beams,
constrained to well-formed trees and scored by EVALB (COLLINS.prm), with --compare_limits also
without the nesting limits (problems.tree_constraint). Prints a Markdown table for
benchmarks/RESULTS.md. Run it alone: the minutes are wall-clock minutes on this machine.

    python benchmarks/parsing.py --treebank wsj_like --trees 3500 --train_minutes 30 \\
        --vocab_size 1000 --eval_beam 4 --average_last 10 --checkpoints best avg --beams 4 21

As results records (docs/results_pages.py): `--record PATH` writes the test table and
`--record_dev PATH` the dev evaluations of the training run (from its eval/history.json), in
the shape of the results pages' tables of the treebank: pcfg_test.json and pcfg_dev.json, or
wsj_like_30min.json and wsj_like_30min_dev.json in benchmarks/results/parsing/ (whose `path`
column is --record_label).
"""

import argparse
import itertools
import os
import pathlib
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
sys.path.insert(0, os.path.dirname(__file__))
import record  # noqa: E402


def write_treebanks(args, work):
    """train/dev/test .mrg files of --treebank under work, each from its own seed."""
    if args.treebank == "pcfg":
        from synthetic_treebank import write_treebank
    else:
        from wsj_like_treebank import write_treebank
    for name, count, seed in (("train", args.trees, 10), ("dev", args.dev_trees, 11),
                              ("test", args.test_trees, 12)):
        write_treebank(work / f"{name}.mrg", count, seed)


def train(args, work):
    """datagen then the trainer CLI, each run as its command runs (console.run: progress logged
    to stderr, such as the budget's plan and choices and the time account; a user error one
    line and exit 2); returns (model_dir, training minutes)."""
    from t2t_lite.cli import console, datagen, trainer

    data_dir, model_dir = str(work / "data"), str(work / "model")
    console.run(datagen.main, [
        "--problem=synthetic_parse", "--task=parsing", f"--train={work / 'train.mrg'}",
        f"--dev={work / 'dev.mrg'}", f"--test={work / 'test.mrg'}",
        f"--vocab_size={args.vocab_size}", f"--data_dir={data_dir}"])
    budget = ([f"--train_minutes={args.train_minutes}", "--train_steps=1000000"]
              if args.train_minutes else [f"--train_steps={args.train_steps}"])
    averaging = ([f"--average_last={args.average_last}"] if args.average_last else []) + (
        [f"--save_every={args.save_every}"] if args.save_every else [])
    start = time.perf_counter()
    console.run(trainer.main, [
        "--problem=synthetic_parse", f"--data_dir={data_dir}",
        f"--hparams_set={args.hparams_set}", f"--hparams={args.hparams}",
        f"--model_dir={model_dir}", f"--eval_every={args.eval_every}",
        f"--eval_decode_examples={args.dev_trees}",
        f"--eval_beam_size={args.eval_beam}", "--keep_best_by=f1",
        *([f"--random_seed={args.seed}"] if args.seed is not None else []), *budget,
        *averaging])
    return model_dir, (time.perf_counter() - start) / 60


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--treebank", choices=["pcfg", "wsj_like"], default="pcfg")
    parser.add_argument("--trees", type=int, default=5000)
    parser.add_argument("--dev_trees", type=int, default=200)
    parser.add_argument("--test_trees", type=int, default=500)
    parser.add_argument("--vocab_size", type=int, default=600)
    parser.add_argument("--hparams_set", default="transformer_parsing_small")
    parser.add_argument("--hparams", default="", help="overrides of --hparams_set")
    parser.add_argument("--train_steps", type=int, default=6000)
    parser.add_argument("--train_minutes", type=float, help="a wall-clock budget instead")
    parser.add_argument("--eval_every", type=int, default=1000)
    parser.add_argument("--eval_beam", type=int, default=1, help="the dev evaluations' beam")
    parser.add_argument("--average_last", type=int, default=0)
    parser.add_argument("--seed", type=int, help="the trainer's --random_seed (the same "
                        "initialization and data order again; another seed measures how far "
                        "the seed alone moves F1); default: unseeded, as the records before "
                        "2026-12-01")
    parser.add_argument("--save_every", type=int, help="with --average_last; default: the "
                        "trainer's (with --train_minutes, spread over the budget's cool-down)")
    parser.add_argument("--checkpoints", nargs="+", choices=["best", "avg", "last"],
                        default=["best"])
    parser.add_argument("--beams", nargs="+", type=int, default=[21, 4])
    parser.add_argument("--compare_limits", action="store_true",
                        help="decode also without the training trees' nesting limits")
    parser.add_argument("--work_dir", default="/tmp/parsing_bench")
    record.add_record_flag(parser)  # the test table
    record.add_record_flag(parser, "--record_dev", "the dev evaluations during training",
                           "parsing/pcfg_dev.json")
    parser.add_argument("--record_label", metavar="NAME",
                        help="wsj_like: this run's name in the records' `path` column (e.g. "
                        "old, new); given, its rows are added to those of the records already "
                        "there (runs with other flags, as backends.py's), else they replace "
                        "them, named `this run`")
    args = parser.parse_args()

    from t2t_lite.evaluation import evalb
    from t2t_lite.problems.trees import clean, read_trees
    from t2t_lite.runner import Runner

    work = pathlib.Path(args.work_dir)
    if (work / "model").exists():  # the trainer would resume it: not a fresh run's numbers
        print(f"parsing.py: error: {work / 'model'} holds an earlier run, which the trainer "
              "would resume: move it aside, or give another --work_dir", file=sys.stderr)
        sys.exit(2)
    work.mkdir(parents=True, exist_ok=True)
    write_treebanks(args, work)
    load_before = os.getloadavg()[0]
    model_dir, minutes = train(args, work)
    gold = [clean(tree) for tree in read_trees(str(work / "test.mrg"))]
    sentences = [" ".join(tree.words()) for tree in gold]
    rows = []
    for checkpoint in args.checkpoints:
        path = model_dir if checkpoint == "last" else os.path.join(model_dir, checkpoint)
        runner = Runner.from_model_dir(path)
        limits = runner.vocabulary.max_depth, runner.vocabulary.max_opens_in_a_row
        for limited, beam_size in itertools.product(
                (True, False) if args.compare_limits else (True,), args.beams):
            # Without the nesting limits: as data made before datagen recorded them decodes.
            runner.vocabulary.max_depth = limits[0] if limited else None
            translator = runner.translator(beam_size=beam_size)
            translator.translate(sentences[:32])  # tracing
            start = time.perf_counter()
            outputs = translator.translate(sentences)
            seconds = time.perf_counter() - start
            trees = [runner.problem.postprocess(s, t.text).text
                     for s, t in zip(sentences, outputs)]
            summary = evalb.evaluate([str(tree) for tree in gold], trees)
            label = f"{limits[0]}, {limits[1]}" if limited else "none"
            rows.append((checkpoint, label, beam_size, summary, len(sentences) / seconds))
    print(f"\n{args.treebank}: {args.trees} training trees, {args.hparams_set} "
          f"{args.hparams or ''}, vocabulary {args.vocab_size}; training {minutes:.1f} min; "
          f"load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after\n")
    print("| checkpoint | nesting limits | beam | test F1 | recall | precision | tagging | "
          "sentences left out by EVALB | sentences/s |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for checkpoint, limits, beam_size, summary, speed in rows:
        print(f"| {checkpoint} | {limits} | {beam_size} | {summary.f1:.2f} | "
              f"{summary.recall:.2f} | "
              f"{summary.precision:.2f} | {summary.tagging_accuracy:.2f} | "
              f"{summary.errors} of {summary.sentences} | {speed:.1f} |")
    if args.record:
        write_test_record(args, model_dir, minutes, rows, len(sentences))
    if args.record_dev:
        write_dev_record(args, model_dir)


def checkpoint_label(model_dir, checkpoint):
    """best (STEP), avg or last (STEP): the checkpoint as the records name it."""
    from t2t_lite.model_dir import ModelDir

    if checkpoint == "best":
        return f"best ({ModelDir(os.path.join(model_dir, 'best')).read_info()['step']:,})"
    if checkpoint == "last":
        return f"last ({ModelDir(model_dir).read_history()[-1]['step']:,})"
    return checkpoint


def training_notes(args, minutes):
    spacing = (f"a checkpoint every {args.save_every} updates" if args.save_every
               else "saved as the trainer spaces them")
    averaging = (f"; avg: the average of the last {args.average_last}, {spacing}"
                 if args.average_last else "")
    return [f"{args.trees:,} training trees (seed 10), {args.dev_trees} dev trees (seed 11), "
            f"{args.test_trees} test trees (seed 12) of the {args.treebank} treebank",
            (f"{args.record_label}: " if args.record_label else "")
            + f"{args.hparams_set}" + (f" with {args.hparams}" if args.hparams else "")
            + f", vocabulary {args.vocab_size}"
            + (f", --random_seed={args.seed}" if args.seed is not None else ", unseeded")
            + "; trained "
            + (f"{args.train_minutes:g} minutes" if args.train_minutes else
               f"{args.train_steps:,} steps") + f" in {minutes:.1f} min; dev evaluations every "
            f"{args.eval_every:,} updates at beam {args.eval_beam}, the best kept by dev F1"
            + averaging,
            "search constrained to well-formed trees; nesting limits D, R: at most D deep and R "
            "opens in a row, read from the training trees (none: without them); EVALB with "
            "COLLINS.prm"]


def write_test_record(args, model_dir, minutes, rows, sentences):
    """The test table: pcfg's (a row per beam, with the checkpoint and nesting limits only when
    they vary) or wsj_like's (a row per checkpoint, limits and beam, named by --record_label)."""
    title = (f"Parsing the {args.treebank} treebank's test sentences: {args.hparams_set}, "
             "constrained beam search, EVALB")
    scores = [{"name": "test F1", "digits": 2}, {"name": "recall", "digits": 2},
              {"name": "precision", "digits": 2}]
    if args.treebank == "wsj_like":
        columns = (["path", "checkpoint", "nesting limits", "beam"] + scores
                   + [{"name": "tagging", "digits": 2}, f"left out by EVALB (of {sentences})",
                      {"name": "sentences/s", "digits": 1}])
        table = [[args.record_label or "this run", checkpoint_label(model_dir, checkpoint),
                  limits, beam, round(s.f1, 2), round(s.recall, 2), round(s.precision, 2),
                  round(s.tagging_accuracy, 2), s.errors, round(speed, 1)]
                 for checkpoint, limits, beam, s, speed in rows]
    else:
        varies = len(args.checkpoints) > 1 or args.compare_limits
        columns = ((["checkpoint", "nesting limits"] if varies else []) + ["beam"] + scores
                   + [f"sentences left out by EVALB (of {sentences})",
                      {"name": "sentences/s", "digits": 1}])
        table = [([checkpoint_label(model_dir, checkpoint), limits] if varies else [])
                 + [beam, round(s.f1, 2), round(s.recall, 2), round(s.precision, 2), s.errors,
                    round(speed, 1)] for checkpoint, limits, beam, s, speed in rows]
    record.write_record(args.record, title, columns, table,
                        notes=training_notes(args, minutes),
                        extend=bool(args.record_label) and args.treebank == "wsj_like")


def write_dev_record(args, model_dir):
    """The trainer's dev evaluations (eval/history.json), and the average's (avg/info.json)."""
    from t2t_lite.model_dir import ModelDir

    history = [entry for entry in ModelDir(model_dir).read_history()
               if "f1" in entry["metrics"]]
    best = ModelDir(os.path.join(model_dir, "best")).read_info() or {}
    average = ModelDir(os.path.join(model_dir, "avg")).read_info() if args.average_last else None
    decoding = "greedy" if args.eval_beam == 1 else f"beam {args.eval_beam}"
    title = (f"Dev F1 while training {args.hparams_set} on the {args.treebank} treebank "
             f"(evaluated every {args.eval_every:,} updates and at the end)")
    notes = [f"{args.dev_trees} dev trees of seed 11"
             + (f", {decoding}" if args.treebank != "wsj_like" else "")  # else a column
             + ", nesting limits as in the test table"]
    if args.treebank == "wsj_like":
        rows = []
        for number, entry in enumerate(history, 1):
            label = "the end" if number == len(history) else "step"
            if entry["step"] == best.get("step"):
                label += " (best)"
            rows.append([args.record_label or "this run", label, entry["step"], decoding,
                         round(entry["metrics"]["f1"], 2)])
        if average and "metrics" in average:
            steps = [int(re.search(r"ckpt-(\d+)", path).group(1))
                     for path in average["averaged_checkpoints"]]
            rows.append([args.record_label or "this run",
                         f"average of the last {len(steps)} ({steps[0]:,}-{steps[-1]:,})",
                         steps[-1], decoding, round(average["metrics"]["f1"], 2)])
        columns = ["path", "checkpoint", "updates", "dev decoding",
                   {"name": "dev F1", "digits": 2}]
        record.write_record(args.record_dev, title, columns, rows,
                            notes=notes,
                            extend=bool(args.record_label))
    else:
        record.write_record(
            args.record_dev, title, ["step", {"name": "dev F1", "digits": 2},
                                     f"dev sentences left out by EVALB (of {args.dev_trees})"],
            [[entry["step"], round(entry["metrics"]["f1"], 2),
              round(entry["metrics"]["evalb_errors"] * args.dev_trees)] for entry in history],
            notes=notes)


if __name__ == "__main__":
    main()
