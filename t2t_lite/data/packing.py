"""Packed training batches (hparams packed_length=L, JAX): several examples in each row of L
tokens, with segment ids and per-example positions, as tensor2tensor's packed problems
(`transformer_packed_tpu`) and Flax's WMT example feed TPUs. Every batch has one shape, [rows,
L], and nearly no padding: the length buckets' padding (and their several shapes) go.

Rows are packed once, from a permutation of the examples by the seed: next-fit over the last
few open rows, an example going to the first whose inputs and targets both have room. Each
epoch deals the rows in a new order, so that the batches change from epoch to epoch while the
position stays two numbers (epoch, batch). The model keeps examples apart (attention within a
segment, positions from 0 in each: t2t_lite.models.transformer).
"""

import numpy as np

from t2t_lite.data.numpy_pipeline import examples_in_memory

_OPEN_ROWS = 16  # rows still taking examples: more pack tighter and cost more time


def pack(input_lengths, target_lengths, order, length):
    """Rows (lists of example indices, in `order`'s order) of at most `length` input and
    `length` target tokens each."""
    rows, room = [], []  # room: [inputs, targets] left in each open row
    first_open = 0
    for i in order:
        need = (input_lengths[i], target_lengths[i])
        for row in range(first_open, len(rows)):
            if room[row][0] >= need[0] and room[row][1] >= need[1]:
                rows[row].append(i)
                room[row][0] -= need[0]
                room[row][1] -= need[1]
                break
        else:
            rows.append([i])
            room.append([length - need[0], length - need[1]])
            first_open = max(first_open, len(rows) - _OPEN_ROWS)
    return rows


class PackedBatches:
    """An endless iterator of packed batches ({"inputs", "targets", "inputs_segmentation",
    "targets_segmentation", "inputs_position", "targets_position"}, targets) of the examples
    no longer than `length`, `rows` rows a device; TrainingBatches's position, seed and
    steps_per_bucket (one "bucket": all batches have one shape) for multi-host runs."""

    def __init__(self, examples, length, rows, *, seed=0, devices=1, shared=False):
        self.examples = examples_in_memory(examples)
        self.length = length
        self.rows = devices * rows
        kept = np.flatnonzero(self.examples.lengths <= length)
        if not len(kept) and not shared:
            raise ValueError(f"no training example is at most packed_length={length} long")
        order = np.random.default_rng([seed, 0, 2]).permutation(kept)
        sizes = [np.array([len(x) for x in side], "int64")
                 for side in (self.examples.inputs, self.examples.targets)]
        self._packed = pack(*sizes, order, length)
        self.steps_per_bucket = [-(-len(self._packed) // self.rows)]
        self.seed = seed
        self._epoch, self._index, self._order = 0, 0, None

    @property
    def position(self):
        return {"epoch": self._epoch, "batch": self._index}

    @position.setter
    def position(self, saved):
        self._epoch, self._index, self._order = int(saved["epoch"]), int(saved["batch"]), None

    def __iter__(self):
        return self

    def __next__(self):
        if self._order is None:
            self._order = np.random.default_rng([self.seed, self._epoch, 3]).permutation(
                len(self._packed))
        if self._index == self.steps_per_bucket[0]:
            self._epoch, self._index = self._epoch + 1, 0
            self._order = np.random.default_rng([self.seed, self._epoch, 3]).permutation(
                len(self._packed))
        start = self._index * self.rows
        self._index += 1
        return self.batch([self._packed[r] for r in self._order[start:start + self.rows]])

    def batch(self, rows):
        """The packed batch of `rows` (lists of example indices; fewer than self.rows: the
        rest all PAD, segment 0)."""
        shape = (self.rows, self.length)
        features = {name: np.zeros(shape, "int32") for name in (
            "inputs", "targets", "inputs_segmentation", "targets_segmentation",
            "inputs_position", "targets_position")}
        for r, members in enumerate(rows):
            for side, sequences in (("inputs", self.examples.inputs),
                                    ("targets", self.examples.targets)):
                at = 0
                for segment, i in enumerate(members, 1):
                    n = len(sequences[i])
                    features[side][r, at:at + n] = sequences[i]
                    features[f"{side}_segmentation"][r, at:at + n] = segment
                    features[f"{side}_position"][r, at:at + n] = np.arange(n)
                    at += n
        return features, features["targets"]
