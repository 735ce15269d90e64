"""What the no-blank-ending rule (t2t_lite.decoding.visible_ending, applied by
t2t_lite.decoding.search's `blank`, which t2t_lite.decoding.translator gives it) costs the
TensorFlow search: the same model_dir translates the same file with the rule and with it
switched off, interleaved by round, after a warm-up batch; prints seconds and empty outputs per
run.

    python benchmarks/visible_ending_cost.py --model_dir MODEL_DIR/avg --source dev.en --rounds 2
        [--record benchmarks/results/decoding/visible_ending_cost.json]
"""

import argparse
import os
import sys
import time

from t2t_lite.decoding import translator as translator_module  # the home of blank_ids' use
from t2t_lite.runner import Runner

sys.path.insert(0, os.path.dirname(__file__))
import record  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model_dir", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--rounds", type=int, default=2)
    record.add_record_flag(parser)
    args = parser.parse_args()
    runner = Runner.from_model_dir(args.model_dir)
    with open(args.source, encoding="utf-8") as f:
        lines = f.read().splitlines()
    with_rule = translator_module.blank_ids
    seconds, empty = {}, {}
    for round_ in range(args.rounds):
        for rule in (True, False):
            translator_module.blank_ids = with_rule if rule else (lambda vocabulary: ())
            translator = runner.translator()
            translator.translate(lines[:8])  # the trace, outside the timing
            start = time.time()
            outputs = translator.translate(lines)
            seconds[round_, rule] = time.time() - start
            empty[rule] = empty.get(rule, 0) + sum(not o.text for o in outputs)
            print(f"round {round_}  rule {'on ' if rule else 'off'}  "
                  f"{seconds[round_, rule]:.2f} s  empty {sum(not o.text for o in outputs)}",
                  flush=True)
    translator_module.blank_ids = with_rule
    if args.record:
        record.write_record(
            args.record, "What the no-blank-ending rule costs the TensorFlow search: seconds to "
            f"decode {len(lines):,} lines of {os.path.basename(args.source)}, beam "
            f"{runner.hparams.beam_size}, rule on and off",
            ["run", "round", {"name": "rule on (s)", "digits": 2},
             {"name": "rule off (s)", "digits": 2}],
            [[1, round_, round(seconds[round_, True], 2), round(seconds[round_, False], 2)]
             for round_ in range(args.rounds)],
            notes=[f"The model: {args.model_dir}, beam {runner.hparams.beam_size}, its "
                   "hparams' alpha and min_length; a warm-up batch of 8 lines (the trace) "
                   "outside the timing",
                   f"Empty outputs over the rounds: {empty[True]} with the rule, {empty[False]} "
                   "without",
                   "run: this run (one; a table of several runs numbers them)"])


if __name__ == "__main__":
    main()
