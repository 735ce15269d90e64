"""Input pipeline vs. model: does training ever wait for data?

Measures, in one process and interleaved over --rounds:
  pipeline  the training input pipeline alone (TFRecord shards -> parse -> length filter ->
            token-budget buckets -> padded batches): examples/s, target tokens/s, padding;
  model     training steps of the hparams set fed by that pipeline, and fed by the same
            batches already in memory (what it would do if data were free): target tokens/s.
The pipeline must be several times faster than the model consumes, and the two model numbers
equal within noise.

By default it runs on a synthetic corpus written to a temporary directory: WMT-like lengths
(log-normal, median 24 subwords, target ~1.1x source) and Zipf-distributed ids over a
32768-piece vocabulary. --problem and --data_dir measure real data made by t2t-lite-datagen.

    python benchmarks/input_pipeline.py [--hparams_set=transformer_small] [--rounds=2]
        [--record benchmarks/results/training/input_pipeline.json]
"""

import argparse
import os
import platform
import sys
import tempfile
import time

import numpy as np
import tensorflow as tf

from t2t_lite import registry
from t2t_lite.config import EOS_ID, PAD_ID
from t2t_lite.backends.tensorflow import pipeline as data
from t2t_lite.backends.tensorflow.trainer import Trainer

sys.path.insert(0, os.path.dirname(__file__))
import record  # noqa: E402


def write_synthetic_corpus(directory, examples, vocab_size, shards=10, seed=0):
    """Shards of random ids with WMT-like lengths; returns their paths."""
    rng = np.random.default_rng(seed)
    source_lengths = np.clip(rng.lognormal(np.log(24), 0.6, examples), 1, 400).astype(int)
    target_lengths = np.clip(source_lengths * rng.lognormal(0.1, 0.15, examples), 1, 400)
    paths = [os.path.join(directory, f"synthetic-train-{i:05d}-of-{shards:05d}")
             for i in range(shards)]
    writers = [tf.io.TFRecordWriter(path) for path in paths]
    for i, (source, target) in enumerate(zip(source_lengths, target_lengths.astype(int))):
        ids = (rng.zipf(1.2, source + target) % (vocab_size - 3) + 3).tolist()
        writers[i % shards].write(data.serialize_example(ids[:source] + [EOS_ID],
                                                         ids[source:] + [EOS_ID]))
    for writer in writers:
        writer.close()
    return paths


def measure_pipeline(dataset, seconds):
    """Batches/s, examples/s, target tokens/s and padding fraction of `seconds` of iteration."""
    iterator = iter(dataset)
    for _ in range(20):  # fill the shuffle buffer and the buckets first
        next(iterator)
    batches = examples = target_tokens = real = slots = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        features, targets = next(iterator)
        inputs, targets = features["inputs"].numpy(), targets.numpy()
        batches += 1
        examples += len(targets)
        target_tokens += int((targets != PAD_ID).sum())
        real += int((inputs != PAD_ID).sum()) + int((targets != PAD_ID).sum())
        slots += inputs.size + targets.size
    elapsed = time.perf_counter() - start
    return {"batches/s": batches / elapsed, "examples/s": examples / elapsed,
            "target tokens/s": target_tokens / elapsed, "padding": 1 - real / slots}


def unbucketed_padding(paths, max_length, examples_per_batch, batches=300):
    """Padding fraction of the same examples in shuffled fixed-size batches, for comparison."""
    dataset = data.read_examples(paths, shuffle=True).shuffle(10_000).filter(
        lambda example: data.example_length(example) <= max_length).padded_batch(
        examples_per_batch)
    real = slots = 0
    for batch in dataset.take(batches).as_numpy_iterator():
        for ids in batch.values():
            real, slots = real + int((ids != PAD_ID).sum()), slots + ids.size
    return 1 - real / slots


def measure_training(trainer, dataset, steps):
    """Target tokens/s of `steps` updates after two warm-up updates (tracing)."""
    iterator = trainer.distribute(lambda context: dataset)
    for _ in range(2):
        trainer.train_step(iterator)
    tokens = 0.0
    start = time.perf_counter()
    for _ in range(steps):
        tokens += trainer.train_step(iterator)["tokens"]
    return tokens / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hparams_set", default="transformer_small")
    parser.add_argument("--hparams", default="", help="overrides, e.g. batch_size=4096")
    parser.add_argument("--problem", help="measure this problem's data in --data_dir instead")
    parser.add_argument("--data_dir")
    parser.add_argument("--examples", type=int, default=100_000, help="synthetic corpus size")
    parser.add_argument("--vocab_size", type=int, default=2**15, help="synthetic vocabulary")
    parser.add_argument("--pipeline_seconds", type=float, default=15)
    parser.add_argument("--train_steps", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=2)
    record.add_record_flag(parser)
    args = parser.parse_args()

    hparams = registry.hparams(args.hparams_set).override(args.hparams)
    with tempfile.TemporaryDirectory() as directory:
        if args.problem:
            problem = registry.problem(args.problem, args.data_dir)
            vocab_size = problem.vocabulary(args.data_dir).size
            paths = problem.shard_paths("train", args.data_dir)

            def training_data():
                return problem.dataset("train", args.data_dir, hparams, training=True)
        else:
            vocab_size = args.vocab_size
            paths = write_synthetic_corpus(directory, args.examples, vocab_size)

            def training_data():
                return data.make_dataset(paths, hparams.batch_size, hparams.max_length,
                                         training=True)

        trainer = Trainer(hparams, vocab_size)
        first_batches = training_data().take(40).cache()
        for _ in first_batches:  # one full pass fills the cache
            pass
        in_memory = first_batches.repeat()
        print(f"# {platform.node()}, {os.cpu_count()} CPUs, TensorFlow {tf.__version__}, "
              f"{args.hparams_set} ({trainer.model.count_params():,} parameters, vocabulary "
              f"{vocab_size}), batch_size {hparams.batch_size} tokens, max_length "
              f"{hparams.max_length}")
        rows = []
        for round_number in range(1, args.rounds + 1):
            pipeline = measure_pipeline(training_data(), args.pipeline_seconds)
            fed = measure_training(trainer, training_data(), args.train_steps)
            cached = measure_training(trainer, in_memory, args.train_steps)
            print(f"round {round_number}: pipeline "
                  + "  ".join(f"{k} {v:,.3f}" if k == "padding" else f"{k} {v:,.0f}"
                              for k, v in pipeline.items())
                  + f"  |  model target tokens/s: fed by the pipeline {fed:,.0f}, from memory "
                  f"{cached:,.0f}  |  pipeline / model {pipeline['target tokens/s'] / fed:.1f}x",
                  flush=True)
            rows.append([1, round_number, round(pipeline["examples/s"]),
                         round(pipeline["target tokens/s"]), round(pipeline["padding"], 3),
                         round(fed), round(cached),
                         round(pipeline["target tokens/s"] / fed, 1)])
        per_batch = round(pipeline["examples/s"] / pipeline["batches/s"])
        unbucketed = unbucketed_padding(paths, hparams.max_length, per_batch)
        print(f"padding of the same examples in shuffled batches of {per_batch} without length "
              f"buckets: {unbucketed:.3f}")
        if args.record:
            corpus = (f"{args.problem}'s training data" if args.problem else
                      f"{args.examples:,} synthetic WMT-like pairs")
            record.write_record(
                args.record, f"Input pipeline alone against {args.hparams_set}'s training steps "
                f"fed by it or from memory, {corpus}, batch_size {hparams.batch_size} tokens",
                ["run", "round", "pipeline examples/s", "pipeline target tokens/s",
                 {"name": "padding (source + target)", "digits": 3},
                 "model target tokens/s, fed by the pipeline",
                 "model target tokens/s, from memory",
                 {"name": "pipeline / model (times)", "digits": 1}], rows,
                notes=[f"{args.hparams_set} ({trainer.model.count_params():,} parameters, "
                       f"vocabulary {vocab_size}), max_length {hparams.max_length}"
                       + (f", overrides {args.hparams}" if args.hparams else ""),
                       f"Pipeline for {args.pipeline_seconds:g} s, model for {args.train_steps} "
                       "updates after 2 warm-up updates, each round; pipeline and model timed "
                       "in one process, interleaved by round",
                       "Target tokens/s counts non-padding target tokens (the unit of the "
                       "trainer's progress line)",
                       "Padding: the share of the batch slots, source and target together; the "
                       f"same examples in shuffled batches of {per_batch} without length buckets: "
                       f"{unbucketed:.3f}",
                       "run: this run (one; a table of several runs numbers them)"])


if __name__ == "__main__":
    main()
