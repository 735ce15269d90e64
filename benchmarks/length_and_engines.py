"""How the length penalty (alpha) and the engine change beam outputs on real text: BLEU, empty
outputs, outputs without final punctuation (truncations, where nearly every reference has it),
and the lines on which the TensorFlow and CTranslate2 engines' outputs differ, for checkpoints
of a real model (a half-trained and a converged one, say).

    python benchmarks/length_and_engines.py --model_dir /tmp/t2t_quality/en-ja/transformer_small \\
        --checkpoints ckpt-1500 best --source dev.en --reference dev.ja --alphas 0 0.6 1.0

Decodes with t2t-lite-decoder, scores with sacreBLEU's `none` tokenizer (see quality.py), prints
JSON lines and a Markdown table.
"""

import argparse
import json
import os
import subprocess
import sys

from quality import score


def decode(model, checkpoint, engine, alpha, beam_size, min_length, source, out):
    command = ["t2t-lite-decoder", f"--model_dir={model}", f"--engine={engine}",
               f"--alpha={alpha}", f"--beam_size={beam_size}", f"--min_length={min_length}",
               f"--decode_from_file={source}", f"--decode_to_file={out}"]
    if checkpoint:
        command.append(f"--checkpoint_path={checkpoint}")
    print("+", " ".join(command), file=sys.stderr, flush=True)
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode:
        sys.exit(result.stderr[-2000:])
    with open(out, encoding="utf-8") as f:
        return f.read().splitlines()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model_dir", required=True)
    parser.add_argument("--checkpoints", nargs="+", default=["latest"],
                        help="ckpt-N in the model_dir (or a checkpoint's path), `best`, "
                        "`avg` or `latest`")
    parser.add_argument("--source", required=True)
    parser.add_argument("--reference", required=True)
    parser.add_argument("--alphas", type=float, nargs="+", default=[0.0, 0.6, 1.0])
    parser.add_argument("--beam_size", type=int, default=4)
    parser.add_argument("--min_lengths", type=int, nargs="+", default=[1])
    parser.add_argument("--engines", nargs="+", default=["tensorflow", "ctranslate2"])
    parser.add_argument("--work_dir", default="/tmp/t2t_length_and_engines")
    args = parser.parse_args()
    os.makedirs(args.work_dir, exist_ok=True)
    rows = []
    for name in args.checkpoints:
        model, checkpoint = args.model_dir, None
        if name in ("best", "avg"):
            model = os.path.join(args.model_dir, name)
        elif name != "latest":
            checkpoint = os.path.join(args.model_dir, name)
        for min_length in args.min_lengths:
            for alpha in args.alphas:
                outputs = {}
                for engine in args.engines:
                    out = os.path.join(args.work_dir,
                                       f"{os.path.basename(name)}.{engine}.a{alpha}"
                                       f".m{min_length}.out")
                    outputs[engine] = decode(model, checkpoint, engine, alpha, args.beam_size,
                                             min_length, args.source, out)
                    row = {"checkpoint": name, "engine": engine, "alpha": alpha,
                           "min_length": min_length, "beam_size": args.beam_size,
                           **score(out, args.reference)}
                    if engine != args.engines[0]:
                        row["lines_differing_from_" + args.engines[0]] = sum(
                            a != b for a, b in zip(outputs[args.engines[0]], outputs[engine]))
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    print("\n| checkpoint | min_length | alpha | engine | BLEU | empty | no final punct. "
          "| lines differing |\n| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |")
    for row in rows:
        differing = next((v for k, v in row.items() if k.startswith("lines_differing")), "")
        print(f"| {row['checkpoint']} | {row['min_length']} | {row['alpha']} | {row['engine']} "
              f"| {row['bleu']} | {row['empty']} | {row['no_final_punctuation']} "
              f"| {differing} |")
    print(f"\nsacreBLEU: {rows[0]['signature']}")


if __name__ == "__main__":
    main()
