"""Packed training batches against length buckets on Keras's JAX backend (hparams packed_length,
t2t_lite/data/packing.py): the share of padding in an epoch's batches, and the real target
tokens a second the JAX trainer's update step learns from, on a real corpus.

The corpus: the first --pairs pairs of ../shared/corpora/small_parallel_enja (English to
Japanese), tokenized by a SentencePiece unigram model of --vocab pieces trained on them, EOS
added, as datagen makes them. Buckets: TrainingBatches at --batch_size tokens and max_length
--length; packed: PackedBatches of rows of --length tokens, --batch_size / --length rows.
Padding: 1 - real tokens / slots, source and target together, over a whole epoch. Speed:
JaxTrainer.train_step of --hparams_set, each batch shape compiled first (one batch of each
shape, untimed), then --steps updates timed, each read back; target tokens/s counts real
target tokens only.

    KERAS_BACKEND=jax python benchmarks/packing.py \\
        [--record benchmarks/results/training/packing.json]
"""

import argparse
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import record  # noqa: E402

CORPUS = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "corpora",
                      "small_parallel_enja")


def corpus_examples(pairs, vocab):
    import sentencepiece as spm

    with open(os.path.join(CORPUS, "train.en"), encoding="utf-8") as f:
        sources = [next(f).strip() for _ in range(pairs)]
    with open(os.path.join(CORPUS, "train.ja"), encoding="utf-8") as f:
        targets = [next(f).strip() for _ in range(pairs)]
    with tempfile.TemporaryDirectory() as directory:
        text = os.path.join(directory, "text")
        with open(text, "w", encoding="utf-8") as f:
            f.write("\n".join(sources + targets) + "\n")
        spm.SentencePieceTrainer.train(input=text, model_prefix=os.path.join(directory, "sp"),
                                       vocab_size=vocab, model_type="unigram", pad_id=0,
                                       eos_id=1, unk_id=2, bos_id=-1, minloglevel=2,
                                       hard_vocab_limit=False)
        model = spm.SentencePieceProcessor(model_file=os.path.join(directory, "sp.model"))
    return [{"inputs": np.array(model.encode(s) + [1], "int32"),
             "targets": np.array(model.encode(t) + [1], "int32")}
            for s, t in zip(sources, targets)]


def padding_fraction(data, steps):
    real = slots = 0
    for _ in range(steps):
        features, _ = next(data)
        for side in ("inputs", "targets"):
            real += int((features[side] != 0).sum())
            slots += features[side].size
    return 1 - real / slots


def speed(trainer, data, steps):
    """Compiles every shape of an epoch, then times `steps` updates: (ms/update, target
    tokens/s)."""
    shapes = {}
    for _ in range(sum(data.steps_per_bucket)):
        batch = next(data)
        shapes.setdefault(batch[1].shape, batch)
    for batch in shapes.values():
        trainer.train_step([batch])
    tokens, start = 0, time.perf_counter()
    for _ in range(steps):
        batch = next(data)
        tokens += trainer.train_step([batch])["tokens"]
    seconds = time.perf_counter() - start
    return 1000 * seconds / steps, tokens / seconds, len(shapes)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=20000)
    parser.add_argument("--vocab", type=int, default=4000)
    parser.add_argument("--hparams_set", default="transformer_tiny")
    parser.add_argument("--batch_size", type=int, default=2048)
    parser.add_argument("--length", type=int, default=64)
    parser.add_argument("--steps", type=int, default=30)
    record.add_record_flag(parser, example="training/packing.json")
    args = parser.parse_args()
    import keras

    assert keras.config.backend() == "jax", "run with KERAS_BACKEND=jax"
    from t2t_lite import registry
    from t2t_lite.backends.jax.trainer import JaxTrainer
    from t2t_lite.data.numpy_pipeline import TrainingBatches
    from t2t_lite.data.packing import PackedBatches

    examples = corpus_examples(args.pairs, args.vocab)
    hparams = registry.hparams(args.hparams_set).override(
        f"batch_size={args.batch_size},max_length={args.length}")
    makers = {"length buckets": lambda: TrainingBatches(examples, args.batch_size, args.length),
              f"packed rows of {args.length}": lambda: PackedBatches(
                  examples, args.length, args.batch_size // args.length)}
    rows = []
    for name, make in makers.items():
        data = make()
        epoch = sum(data.steps_per_bucket)
        padding = padding_fraction(data, epoch)
        keras.utils.set_random_seed(1)
        ms, tokens_per_second, shapes = speed(JaxTrainer(hparams, args.vocab), make(),
                                              args.steps)
        rows.append([name, epoch, shapes, round(padding, 3), round(ms), round(tokens_per_second)])
        print(rows[-1], flush=True)
    base = rows[0][5]
    for row in rows:
        row.append(round(row[5] / base, 2))
    columns = ["batches", "updates an epoch", "batch shapes", "padding fraction", "ms/update",
               "target tokens/s", {"name": "speed vs buckets", "digits": 2}]
    for row in rows:
        print(dict(zip(["batches"] + columns[1:-1] + ["speed vs buckets"], row)))
    if args.record:
        record.write_record(
            args.record, "Packed training batches against length buckets (JAX, CPU)", columns,
            rows, notes=[
                f"Corpus: the first {args.pairs:,} pairs of small_parallel_enja (en to ja), a "
                f"{args.vocab}-piece SentencePiece unigram model, EOS added",
                f"{args.hparams_set}, batch_size {args.batch_size} tokens, max_length and "
                f"packed_length {args.length}; {args.steps} updates timed after one of each "
                "batch shape (compiled)",
                "Padding fraction: 1 - real tokens / slots, source and target, over one epoch; "
                "target tokens/s: real target tokens only"])


if __name__ == "__main__":
    main()
