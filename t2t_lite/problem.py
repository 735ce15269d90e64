"""Problem: where examples come from, how they become ids, and how they are batched and scored.

datagen writes each split as `{name}-{split}-NNNNN-of-MMMMM` TFRecord shards in data_dir; every
shard is written under a temporary name and renamed when complete, so an interrupted datagen never
leaves a shard that reads as finished, and a finished split is never written again.
"""

import glob
import os

import tensorflow as tf

from t2t_lite import data
from t2t_lite.errors import UserError
from t2t_lite.registry import snake_case
from t2t_lite.text import EOS_ID

SPLITS = ("train", "dev", "test")


class Problem:
    """Subclasses define `text_pairs` and `vocabulary`; the rest is shared machinery."""

    num_shards = {"train": 10, "dev": 1, "test": 1}
    # True when datagen needs no download, so the trainer may run it without being asked.
    self_contained = False

    # Prefix of the data files; the registered name, or the snake_case class name.
    name = "problem"

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            cls.name = snake_case(cls.__name__)

    def text_pairs(self, split, raw_dir):
        """Yields (source, target) text pairs of `split`, reading or downloading into raw_dir."""
        raise NotImplementedError

    def vocabulary(self, data_dir):
        """The Vocabulary this problem's data in data_dir was encoded with."""
        raise NotImplementedError

    def build_vocabulary(self, data_dir, raw_dir):
        """Creates the vocabulary in data_dir if the problem learns one; returns it."""
        return self.vocabulary(data_dir)

    def decode_metrics(self, hypotheses, references):
        """Metrics of decoded texts against references; exact match by default."""
        matches = sum(h == r for h, r in zip(hypotheses, references))
        return {"sequence_accuracy": matches / max(1, len(references))}

    # Shared machinery.

    def shard_paths(self, split, data_dir):
        n = self.num_shards[split]
        return [os.path.join(data_dir, f"{self.name}-{split}-{i:05d}-of-{n:05d}")
                for i in range(n)]

    def has_data(self, data_dir, split):
        return all(os.path.exists(path) for path in self.shard_paths(split, data_dir))

    def generate_data(self, data_dir, raw_dir=None):
        """Writes the vocabulary and every missing split to data_dir; finished work is kept."""
        os.makedirs(data_dir, exist_ok=True)
        raw_dir = raw_dir or os.path.join(data_dir, "raw")
        vocabulary = self.build_vocabulary(data_dir, raw_dir)
        for split in SPLITS:
            if not self.has_data(data_dir, split):
                self._write_split(split, data_dir, raw_dir, vocabulary)

    def _write_split(self, split, data_dir, raw_dir, vocabulary):
        paths = self.shard_paths(split, data_dir)
        for stale in glob.glob(os.path.join(data_dir, f"{self.name}-{split}-*.incomplete")):
            os.remove(stale)
        temporary = [path + ".incomplete" for path in paths]
        writers = [tf.io.TFRecordWriter(path) for path in temporary]
        try:
            for i, (source, target) in enumerate(self.text_pairs(split, raw_dir)):
                example = data.serialize_example(vocabulary.encode(source) + [EOS_ID],
                                                 vocabulary.encode(target) + [EOS_ID])
                writers[i % len(writers)].write(example)
        finally:
            for writer in writers:
                writer.close()
        for path, final in zip(temporary, paths):
            os.replace(path, final)

    def dataset(self, split, data_dir, hparams, *, training, input_context=None, seed=None):
        """Batches of ({"inputs", "targets"}, targets) for `split`; see data.make_dataset."""
        if not self.has_data(data_dir, split):
            raise UserError(
                f"no {split} data for problem {self.name} in {data_dir}: run "
                f"`t2t-lite-datagen --problem={self.name} --data_dir={data_dir}` "
                "or pass --generate_data to the trainer")
        return data.make_dataset(self.shard_paths(split, data_dir), hparams.batch_size,
                                 hparams.max_length, training=training,
                                 input_context=input_context, seed=seed)
