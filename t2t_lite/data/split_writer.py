"""datagen's writing of one split: its pairs encoded into TFRecord shards and a stats.json, each
written under a temporary name and renamed when the split is complete (see t2t_lite.data.problem),
so that an interrupted datagen never leaves a shard that reads as finished."""

import collections
import contextlib
import glob
import json
import logging
import os

from t2t_lite.data import shard_records
from t2t_lite.data.corpus import is_empty
from t2t_lite.utils.files import write_refusals_named, write_text_atomically
from t2t_lite.utils.progress import Progress

logger = logging.getLogger("t2t_lite")


def write_split(problem, split, data_dir, raw_dir, vocabulary):
    """Writes `problem`'s `split` to data_dir: its text_pairs encoded by its encode_pair, in
    as many passes as it has segmentations of the split (BPE-dropout's several). Each pass writes
    one segmentation of every pair, so that the trainer's reader (interleaved shards, a shuffle
    buffer) meets a pair's segmentations about an epoch apart, not in one burst; the stats count
    one pass's target tokens, so that a time budget's epochs are epochs of the pairs."""
    import t2t_lite.backends.tensorflow.pipeline as pipeline  # TFRecords, by TensorFlow

    paths = problem.shard_paths(split, data_dir)
    temporary = [path + ".incomplete" for path in paths]
    passes = problem.segmentations(split)
    lengths = collections.Counter()
    examples = skipped = target_tokens = 0
    with (write_refusals_named(f"write the {split} data of {problem.name}", data_dir),
          Progress(f"{problem.name} {split}: read", "pairs") as progress):
        try:
            with pipeline.ShardWriter(temporary) as shards:
                for segmentation in range(passes):
                    for pair in problem.text_pairs(split, raw_dir):
                        if progress.done == 0:
                            expected = problem.expected_pairs(split, raw_dir)
                            progress.total = expected and expected * passes
                        progress.update(1)
                        if is_empty(pair):
                            skipped += segmentation == 0
                            continue
                        inputs, targets = problem.encode_pair(split, pair, vocabulary)
                        shards.write(inputs, targets)
                        lengths[max(len(inputs), len(targets))] += 1
                        examples, target_tokens = examples + 1, target_tokens + len(targets)
            stats = {"examples": examples, "skipped_empty": skipped,
                     "target_tokens": round(target_tokens / passes),
                     "lengths": {str(n): lengths[n] for n in sorted(lengths)},
                     "shards": {os.path.basename(final): shard_records.describe(path, count)
                                for path, final, count in zip(temporary, paths, shards.counts)}}
            write_stats(problem, split, data_dir, stats)
            for path, final in zip(temporary, paths):
                os.replace(path, final)
        except BaseException:  # a full disk, a bad line, Ctrl-C: no partial shards stay
            remove_incomplete(data_dir, problem.name, split)
            raise
    skipped_note = f"; skipped {skipped:,} pairs with an empty side" if skipped else ""
    logger.info("%s %s: %s examples in %d shards%s", problem.name, split, f"{examples:,}",
                len(paths), skipped_note)


def write_stats(problem, split, data_dir, stats):
    """Writes `stats` as `problem`'s stats.json of `split` (see t2t_lite.data.problem)."""
    write_text_atomically(problem.stats_path(split, data_dir), json.dumps(stats, indent=1) + "\n")


def remove_incomplete(data_dir, name, split="*"):
    """Removes the unfinished shards of problem `name`'s `split` (default: of every split)."""
    pattern = os.path.join(glob.escape(data_dir), f"{glob.escape(name)}-{split}-*.incomplete")
    for path in glob.glob(pattern):
        with contextlib.suppress(OSError):  # a shard writer would overwrite it anyway
            os.remove(path)
