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

from t2t_lite.data.buckets import nothing_fits
from t2t_lite.data.numpy_pipeline import DealtBatches, examples_in_memory

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


class PackedBatches(DealtBatches):
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
            raise ValueError(nothing_fits("packed_length", length))
        order = np.random.default_rng([seed, 0, 2]).permutation(kept)
        sizes = [np.array([len(x) for x in side], "int64")
                 for side in (self.examples.inputs, self.examples.targets)]
        self._packed = pack(*sizes, order, length)
        self.steps_per_bucket = [-(-len(self._packed) // self.rows)]
        self.seed = seed

    def _batches_of(self, epoch):
        """steps_per_bucket[0] lists of rows (packed example indices), the rows in a new order
        each epoch; those past the last row are empty (all-PAD batches)."""
        order = np.random.default_rng([self.seed, epoch, 3]).permutation(len(self._packed))
        return [[self._packed[r] for r in order[i * self.rows:(i + 1) * self.rows]]
                for i in range(self.steps_per_bucket[0])]

    def _batch(self, rows):
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
