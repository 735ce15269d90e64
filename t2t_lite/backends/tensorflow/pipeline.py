"""The data's TensorFlow side: TFRecord shards written and read, and the tf.data input pipeline
(shards -> parsed ids -> token-budget batches). Problems go through this module only.

Batches are formed by length bucket so that each holds about `batch_size` tokens, as in
tensor2tensor: short sentences come many to a batch, long ones few, and little is padding.
"""

import contextlib
import re

import tensorflow as tf

from t2t_lite.data.buckets import buckets
from t2t_lite.utils.errors import UserError

_FEATURES = {
    "inputs": tf.io.VarLenFeature(tf.int64),
    "targets": tf.io.VarLenFeature(tf.int64),
}


def serialize_example(inputs, targets):
    """A tf.train.Example with int64 features `inputs` and `targets`, serialized with its feature
    map in key order (protobuf's default order varies per process), so that the same corpus
    always gives the same bytes and a data set can be verified by checksums."""
    feature = {
        name: tf.train.Feature(int64_list=tf.train.Int64List(value=ids))
        for name, ids in (("inputs", inputs), ("targets", targets))
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString(
        deterministic=True)


class ShardWriter:
    """Writes examples to the TFRecord files `paths`, example i to file i % len(paths); a context
    manager that closes them."""

    def __init__(self, paths):
        self._writers = [tf.io.TFRecordWriter(path) for path in paths]
        self._written = 0

    def write(self, inputs, targets):
        self._writers[self._written % len(self._writers)].write(serialize_example(inputs, targets))
        self._written += 1

    @property
    def counts(self):
        """The examples written to each file: dealt in turn, the first files hold one more."""
        n = len(self._writers)
        return [(self._written + n - 1 - i) // n for i in range(n)]

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        for writer in self._writers:
            writer.close()


def parse_example(serialized):
    parsed = tf.io.parse_single_example(serialized, _FEATURES)
    return {name: tf.cast(tf.sparse.to_dense(value), tf.int32) for name, value in parsed.items()}


def example_length(example):
    """The padded size an example adds to a batch: its longer side."""
    return tf.maximum(tf.shape(example["inputs"])[0], tf.shape(example["targets"])[0])


def batch_by_tokens(dataset, batch_size, max_length):
    """Groups examples by length into padded batches of at most `batch_size` tokens (see
    t2t_lite.data.buckets). Examples longer than `max_length` (kept in evaluation) come one
    per batch."""
    boundaries, batch_sizes = buckets(batch_size, max_length)
    return dataset.bucket_by_sequence_length(
        example_length, boundaries, batch_sizes,
        padded_shapes={"inputs": [None], "targets": [None]})


def to_features_and_labels(batch):
    return {"inputs": batch["inputs"], "targets": batch["targets"]}, batch["targets"]


def read_examples(paths, *, shuffle, input_context=None, seed=None):
    """The parsed examples of the shards at `paths`, once: this input pipeline's share of them.

    Under several input pipelines (one per replica, see Trainer.distribute) each reads whole
    shards when there are at least as many shards as pipelines; otherwise each reads every n-th
    example of the shards, read in the same order everywhere so that the shares are disjoint
    and complete.
    """
    pipelines = input_context.num_input_pipelines if input_context else 1
    by_example = len(paths) < pipelines
    files = tf.data.Dataset.from_tensor_slices(sorted(paths))
    if pipelines > 1 and not by_example:
        files = files.shard(pipelines, input_context.input_pipeline_id)
    if shuffle and not by_example:
        files = files.shuffle(len(paths), seed=seed, reshuffle_each_iteration=True)
        dataset = files.interleave(tf.data.TFRecordDataset, cycle_length=min(len(paths), 8),
                                   num_parallel_calls=tf.data.AUTOTUNE,
                                   deterministic=seed is not None)
    else:
        dataset = tf.data.TFRecordDataset(files)
    if by_example:
        dataset = dataset.shard(pipelines, input_context.input_pipeline_id)
    return dataset.map(parse_example, num_parallel_calls=tf.data.AUTOTUNE)


def read_in_written_order(paths):
    """The parsed examples of the shards at `paths` (in shard order) in the order they were
    written (ShardWriter deals example i to shard i % len(paths)), as numpy arrays."""
    files = tf.data.Dataset.from_tensor_slices(list(paths))
    return files.interleave(tf.data.TFRecordDataset, cycle_length=len(paths),
                            block_length=1).map(parse_example).as_numpy_iterator()


def make_dataset(paths, batch_size, max_length, *, training, input_context=None, seed=None):
    """Shards at `paths` -> ({"inputs", "targets"}, targets) batches, padded with 0.

    Training data is sharded per input pipeline, shuffled, repeated, and stripped of examples
    longer than `max_length`; evaluation data is read once, in order, in full.
    """
    dataset = read_examples(paths, shuffle=training, input_context=input_context, seed=seed)
    if training:
        dataset = dataset.shuffle(10_000, seed=seed).repeat()
        dataset = dataset.filter(lambda example: example_length(example) <= max_length)
    dataset = batch_by_tokens(dataset, batch_size, max_length)
    return dataset.map(to_features_and_labels).prefetch(tf.data.AUTOTUNE)


def count_records(paths):
    """How many records each TFRecord file at `paths` holds, or None for a file that does not
    read to its end (cut short, or a record that fails its CRC): how shards written before
    records were kept are checked."""
    counts = []
    for path in paths:
        try:
            counts.append(sum(1 for _ in tf.data.TFRecordDataset(path)))
        except (tf.errors.DataLossError, tf.errors.OutOfRangeError):
            counts.append(None)
    return counts


@contextlib.contextmanager
def damaged_data_named(problem, data_dir):
    """Turns TensorFlow's DataLossError, met reading a shard of data_dir that changed in place
    (a record failing its CRC, at any size: Problem finds cut shards before reading), into one
    line naming data_dir and the datagen run of `problem` that finds and rewrites it."""
    try:
        yield
    except tf.errors.DataLossError as error:
        # TFRecord's "corrupted record at N" (a checkpoint's damage is DamagedCheckpoint's),
        # without the op names around it.
        cause = re.search(r"\w+ record at \d+", error.message or str(error))
        if cause is None:
            raise
        raise UserError(f"a shard in {data_dir} is damaged ({cause[0]}; changed since datagen "
                        f"wrote it?): run {problem.datagen_command(data_dir)} to check every "
                        "shard and write a damaged split again") from None
