"""What the no-blank-ending rule (t2t_lite.decoding.visible_ending, applied by
t2t_lite.decoding.search's `blank`) costs the TensorFlow search:
the same model_dir translates the same file with the rule and with it switched off, interleaved
by round, after a warm-up batch; prints seconds and empty outputs per run.

    python benchmarks/visible_ending_cost.py --model_dir MODEL_DIR/avg --source dev.en --rounds 2
"""

import argparse
import time

from t2t_lite.backends.tensorflow import translator as translator_module
from t2t_lite.runner import Runner


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model_dir", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    runner = Runner.from_model_dir(args.model_dir)
    with open(args.source, encoding="utf-8") as f:
        lines = f.read().splitlines()
    with_rule = translator_module.blank_ids
    for round_ in range(args.rounds):
        for rule in (True, False):
            translator_module.blank_ids = with_rule if rule else (lambda vocabulary: ())
            translator = runner.translator()
            translator.translate(lines[:8])  # the trace, outside the timing
            start = time.time()
            outputs = translator.translate(lines)
            print(f"round {round_}  rule {'on ' if rule else 'off'}  "
                  f"{time.time() - start:.2f} s  empty {sum(not o.text for o in outputs)}",
                  flush=True)
    translator_module.blank_ids = with_rule


if __name__ == "__main__":
    main()
