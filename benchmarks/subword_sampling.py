"""A copy of a quality.py direction whose training split is K BPE-dropout samples of each pair.

BPE-dropout (Provilkov et al. 2020, "BPE-Dropout: Simple and Effective Subword Regularization")
and subword sampling (Kudo 2018) segment each training sentence anew each time it is seen, a
regularizer for small corpora trained for many epochs. This made the data of the records before
datagen could (`--bpe_dropout`, both sides; this can also sample the source only): it
writes K samples of each pair (SentencePiece's own sampling: `enable_sampling`, where alpha is
the probability of dropping a merge of a BPE model), dev and test unchanged, with the same
vocabulary; the trainer then sees a pair in K segmentations over its epochs. Its stats.json counts
one sample's target tokens, so that the time budget's epochs are epochs of the corpus's pairs.
Two calls write different samples: SentencePiece's sampling did not repeat across processes even
after its set_random_generator_seed (85,237 to 85,369 target tokens a sample in five calls on
7,000 ja-en pairs), so this takes no seed.

    python benchmarks/quality.py ... --train_pairs 7000 --work_dir /work/plain   # datagen, once
    python benchmarks/subword_sampling.py --from_dir /work/plain/ja-en_7000 \\
        --to_dir /work/sampled/ja-en_7000 --samples 16 --alpha 0.1 --sides both
    python benchmarks/quality.py ... --train_pairs 7000 --work_dir /work/sampled

The second quality.py call finds its data made (datagen checks it and goes on) and trains on it.
"""

import argparse
import json
import os
import shutil

from t2t_lite import registry
from t2t_lite.data.split_writer import write_split
from t2t_lite.utils.files import write_text_atomically


def copy_direction(from_dir, to_dir):
    """to_dir/files (the training files copied, dev and test links kept) and to_dir/data without
    the training split; the problem.json names to_dir's files, as datagen checks. Returns the
    data_dir and the problem's name."""
    os.makedirs(to_dir)
    shutil.copytree(os.path.join(from_dir, "files"), os.path.join(to_dir, "files"),
                    symlinks=True)
    data = os.path.join(to_dir, "data")
    shutil.copytree(os.path.join(from_dir, "data"), data, ignore=shutil.ignore_patterns(
        "*-train-*", "*-train.stats.json", ".*.lock"))
    (problem_json,) = [name for name in os.listdir(data) if name.endswith(".problem.json")]
    with open(os.path.join(data, problem_json), encoding="utf-8") as f:
        problem = json.load(f)
    for split, paths in problem["files"].items():
        problem["files"][split] = [os.path.join(to_dir, "files", os.path.basename(path))
                                   for path in paths]
    write_text_atomically(os.path.join(data, problem_json), json.dumps(problem, indent=2) + "\n")
    return data, problem_json[:-len(".problem.json")]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from_dir", required=True, help="a direction folder of quality.py's "
                        "--work_dir (files/ and data/), e.g. /work/plain/ja-en_7000")
    parser.add_argument("--to_dir", required=True, help="the new direction folder (must not "
                        "exist), inside the --work_dir of the quality.py call that trains on it")
    parser.add_argument("--samples", type=int, default=16, help="segmentations of each pair")
    parser.add_argument("--alpha", type=float, default=0.1,
                        help="BPE-dropout's probability of dropping a merge")
    parser.add_argument("--sides", choices=("both", "source"), default="both",
                        help="sample the targets' segmentation too, or the sources' only")
    args = parser.parse_args()
    if os.path.exists(args.to_dir):
        parser.error(f"{args.to_dir} exists: give a new --to_dir")
    data, name = copy_direction(args.from_dir, args.to_dir)
    # The problem datagen made (its pairs, shard names, vocabulary and stats file), with the
    # setting of datagen's --bpe_dropout (not recorded: the data stays the set's for datagen),
    # so that its training split is written as that flag writes it, or with unsampled targets.
    made = registry.problem(name, data)
    vocabulary = made.vocabulary(data)

    class SourceOnly(type(made)):
        def encode_pair(self, split, pair, vocabulary):
            inputs, _ = super().encode_pair(split, pair, vocabulary)
            return inputs, made.encode_pair(split, pair, vocabulary)[1]

    sampled = {**made.spec, "bpe_dropout": {"alpha": args.alpha, "samples": args.samples}}
    problem = (SourceOnly if args.sides == "source" else type(made))(name, sampled)
    write_split(problem, "train", data, None, vocabulary)
    stats = problem.stats("train", data)
    plain = made.stats("train", os.path.join(args.from_dir, "data"))["target_tokens"]
    print(f"{args.samples} samples of {stats['examples'] // args.samples:,} pairs (alpha "
          f"{args.alpha}, {args.sides}): {stats['target_tokens']:,} target tokens a sample, "
          f"{plain:,} unsampled")


if __name__ == "__main__":
    main()
