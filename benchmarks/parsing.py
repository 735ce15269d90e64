"""Parsing recipe on CPU: F1 and training time of transformer_parsing_small on a synthetic PCFG
treebank (tests/synthetic_treebank.py), and constrained decoding speed at beam 21 vs beam 4.

Steps: write --trees training trees and 500 held-out test trees (different seeds), datagen with
--task=parsing, train --train_steps with the trainer CLI (dev F1 every 1000 steps, best kept),
then decode the test sentences with the best checkpoint at beam 21 (the paper's) and at beam 4,
reporting EVALB F1 (COLLINS.prm) and sentences/s of each. Prints a Markdown table for
benchmarks/RESULTS.md.

    python benchmarks/parsing.py [--trees 5000] [--train_steps 6000] [--work_dir /tmp/parsing_bench]
"""

import argparse
import os
import pathlib
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", type=int, default=5000)
    parser.add_argument("--test_trees", type=int, default=500)
    parser.add_argument("--train_steps", type=int, default=6000)
    parser.add_argument("--work_dir", default="/tmp/parsing_bench")
    parser.add_argument("--hparams", default="", help="overrides of transformer_parsing_small")
    args = parser.parse_args()

    from synthetic_treebank import write_treebank

    from t2t_lite.cli import datagen, trainer
    from t2t_lite.evaluation import evalb
    from t2t_lite.problems.trees import clean, read_trees
    from t2t_lite.runner import Runner

    work = pathlib.Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    for name, count, seed in (("train", args.trees, 10), ("dev", 200, 11),
                              ("test", args.test_trees, 12)):
        write_treebank(work / f"{name}.mrg", count, seed)
    data_dir, model_dir = str(work / "data"), str(work / "model")
    datagen.main(["--problem=synthetic_parse", "--task=parsing", f"--train={work / 'train.mrg'}",
                  f"--dev={work / 'dev.mrg'}", f"--test={work / 'test.mrg'}",
                  "--vocab_size=600", f"--data_dir={data_dir}"])
    start = time.perf_counter()
    trainer.main(["--problem=synthetic_parse", f"--data_dir={data_dir}",
                  "--hparams_set=transformer_parsing_small", f"--hparams={args.hparams}",
                  f"--model_dir={model_dir}", f"--train_steps={args.train_steps}",
                  "--eval_every=1000", "--eval_decode_examples=200", "--keep_best_by=f1"])
    training_seconds = time.perf_counter() - start

    runner = Runner.from_model_dir(os.path.join(model_dir, "best"))
    gold = [clean(tree) for tree in read_trees(str(work / "test.mrg"))]
    sentences = [" ".join(tree.words()) for tree in gold]
    rows = []
    for beam_size in (21, 4):
        translator = runner.translator(beam_size=beam_size)
        translator.translate(sentences[:32])  # tracing
        start = time.perf_counter()
        outputs = translator.translate(sentences)
        seconds = time.perf_counter() - start
        trees = [runner.problem.postprocess(s, t.text) for s, t in zip(sentences, outputs)]
        summary = evalb.evaluate([str(tree) for tree in gold], trees)
        rows.append((beam_size, summary, len(sentences) / seconds))
    print(f"\ntraining: {args.train_steps} steps in {training_seconds / 60:.1f} min "
          f"({args.trees} trees)\n")
    print("| beam | test F1 | recall | precision | sentences left out by EVALB | sentences/s |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for beam_size, summary, speed in rows:
        print(f"| {beam_size} | {summary.f1:.2f} | {summary.recall:.2f} | "
              f"{summary.precision:.2f} | {summary.errors} of {summary.sentences} | "
              f"{speed:.1f} |")


if __name__ == "__main__":
    main()
