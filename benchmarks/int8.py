"""What int8 costs and saves on a trained model: the size of its CTranslate2 export in float32
and int8, and how many greedy translations and scores change, on `--lines` random sources of the
model's own symbols (an algorithmic model such as the demo's) or on `--source` (a text file).

    python benchmarks/int8.py --model_dir=/tmp/t2t_demo [--lines 1000] [--source src.txt]
        [--record benchmarks/results/decoding/int8_demo.json]

The numbers back the README's `--quantization` row: "4x smaller", "about 1 in 100 greedy
outputs differs" (CTranslate2 int8 against CTranslate2 float32, whose outputs are t2t_lite's).
"""

import argparse
import os
import random
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import record  # noqa: E402


def random_sources(vocabulary, lines, seed):
    """Symbol sequences of 1 to 20 of the vocabulary's own tokens (specials excluded)."""
    symbols = [token for token in vocabulary.tokens() if not token.startswith("<")]
    generator = random.Random(seed)
    return [" ".join(generator.choice(symbols) for _ in range(generator.randint(1, 20)))
            for _ in range(lines)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model_dir", required=True)
    parser.add_argument("--lines", type=int, default=1000)
    parser.add_argument("--source", help="translate this file's lines instead of random ones")
    parser.add_argument("--seed", type=int, default=1)
    record.add_record_flag(parser)
    args = parser.parse_args()

    from t2t_lite.runner import Runner

    runner = Runner.from_model_dir(args.model_dir)
    if args.source:
        with open(args.source, encoding="utf-8") as f:
            sources = [line.rstrip("\n") for line in f]
    else:
        sources = random_sources(runner.vocabulary, args.lines, args.seed)
    sizes = {}
    with tempfile.TemporaryDirectory() as scratch:
        for quantization in ("float32", "int8"):
            export = runner.export("ctranslate2", os.path.join(scratch, quantization),
                                   quantization=quantization)
            sizes[quantization] = os.path.getsize(os.path.join(export, "model.bin"))
    translations = {q: runner.translator(beam_size=1, engine="ctranslate2",
                                         quantization=q).translate(sources)
                    for q in ("float32", "int8")}
    pairs = list(zip(translations["float32"], translations["int8"]))
    differ = sum(a.text != b.text for a, b in pairs)
    score_changes = [abs(a.score - b.score) for a, b in pairs if a.text == b.text]
    print(f"model_dir {args.model_dir}, {len(sources)} sources "
          f"({'from ' + args.source if args.source else f'random, seed {args.seed}'})")
    print(f"model.bin: float32 {sizes['float32']} bytes, int8 {sizes['int8']} bytes "
          f"({sizes['float32'] / sizes['int8']:.2f}x smaller)")
    print(f"greedy outputs that differ (int8 vs float32): {differ} of {len(sources)}")
    print(f"|score change| where the outputs agree: median {statistics.median(score_changes):.4f}"
          f", max {max(score_changes):.4f}")
    if args.record:
        where = f"from {args.source}" if args.source else f"random, seed {args.seed}"
        record.write_record(
            args.record, "CTranslate2 int8 against float32 on a trained model: size and "
            f"agreement, {len(sources)} sources ({where}), greedy",
            ["model", "model.bin float32 (bytes)", "model.bin int8 (bytes)",
             f"greedy outputs that differ (of {len(sources)})",
             {"name": "median absolute score change", "digits": 4},
             {"name": "max absolute score change", "digits": 4}],
            [[args.model_dir, sizes["float32"], sizes["int8"], differ,
              round(statistics.median(score_changes), 4), round(max(score_changes), 4)]],
            notes=["CTranslate2 int8 against CTranslate2 float32 (whose outputs are t2t_lite's), "
                   "greedy; the score change is taken where the int8 and float32 outputs agree"])


if __name__ == "__main__":
    main()
