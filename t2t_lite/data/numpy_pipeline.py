"""The JAX path's input pipeline, in numpy: the same length buckets and token budgets as the
tf.data pipeline (t2t_lite.data.buckets), from shards read without TensorFlow
(t2t_lite.data.records).

Two differences, both for XLA, which compiles one program per input shape: every batch of a
bucket has the same shape (rows: the bucket's batch size, times the number of devices the batch
is split over; length: the bucket's longest, padded with PAD, which adds no token to the loss),
and the order is fixed by (seed, epoch), a permutation per epoch, so that the position in the
data is two numbers a checkpoint holds and a resumed run continues exactly.
"""

import numpy as np

from t2t_lite.data.buckets import buckets, nothing_fits

_LENGTH_MULTIPLE = 8  # longer-than-max_length evaluation examples: widths rounded up to this


class _Examples:
    """Examples in memory: their inputs, targets and padded size (the longer side)."""

    def __init__(self, examples):
        self.inputs, self.targets = [], []
        for example in examples:
            self.inputs.append(example["inputs"])
            self.targets.append(example["targets"])
        self.lengths = np.array([max(len(a), len(b)) for a, b in zip(self.inputs, self.targets)],
                                "int64")

    def batch(self, members, rows, width):
        """({"inputs", "targets"}, targets): `members` in int32 [rows, width], PAD-padded."""
        inputs = np.zeros((rows, width), "int32")
        targets = np.zeros((rows, width), "int32")
        for row, i in enumerate(members):
            inputs[row, : len(self.inputs[i])] = self.inputs[i]
            targets[row, : len(self.targets[i])] = self.targets[i]
        return {"inputs": inputs, "targets": targets}, targets


def examples_in_memory(examples):
    """The examples' inputs, targets and padded sizes, as lists and an array."""
    return _Examples(examples)


class DealtBatches:
    """An endless iterator over epochs, each a list of batch plans (`_batches_of(epoch)`,
    fixed by the seed and the epoch) made into batches one by one (`_batch(plan)`); `position`
    (a dict: epoch, batch) is where it is, and `position = saved` continues from there. The
    bucketed and the packed training batches deal alike."""

    _epoch, _index, _order = 0, 0, None

    def _batches_of(self, epoch):
        raise NotImplementedError

    def _batch(self, plan):
        raise NotImplementedError

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
            self._order = self._batches_of(self._epoch)
        if self._index == len(self._order):
            self._epoch, self._index = self._epoch + 1, 0
            self._order = self._batches_of(self._epoch)
        plan = self._order[self._index]
        self._index += 1
        return self._batch(plan)


class TrainingBatches(DealtBatches):
    """An endless iterator of training batches of the examples no longer than max_length:
    epoch after epoch, each a new permutation, bucketed by length and dealt in a shuffled
    order. `position` (a dict) is where it is; `position = saved` continues from there.

    In a multi-host run each process holds its own share of the examples and deals batches of
    its devices' rows; every process must run the same program at each step, so they agree on
    `steps_per_bucket`, the batches of each bucket an epoch deals (the largest share's, set by
    the trainer after an all-gather): the deal order depends on these numbers and the seed only,
    and a process whose share makes fewer batches of a bucket deals all-PAD batches in their
    place, which add no token to the loss."""

    def __init__(self, examples, batch_size, max_length, *, seed=0, devices=1, shared=False):
        kept = _Examples(examples)
        self.examples = kept
        self.boundaries, sizes = buckets(batch_size, max_length)
        self.rows = [devices * size for size in sizes[:-1]]
        self.widths = [boundary - 1 for boundary in self.boundaries]
        self._kept = np.flatnonzero(kept.lengths <= max_length)
        if not len(self._kept) and not shared:
            raise ValueError(nothing_fits("max_length", max_length))
        self._bucket = np.searchsorted(self.boundaries, kept.lengths, side="right")
        counts = np.bincount(self._bucket[self._kept], minlength=len(self.rows))
        self.steps_per_bucket = [-(-int(n) // rows) for n, rows in zip(counts, self.rows)]
        self.seed = seed

    def _batches_of(self, epoch):
        """[(bucket, example indices)] of one epoch, in the order they are dealt."""
        order = np.random.default_rng([self.seed, epoch]).permutation(self._kept)
        batches = []
        for bucket, (rows, steps) in enumerate(zip(self.rows, self.steps_per_bucket)):
            members = order[self._bucket[order] == bucket]
            batches += [(bucket, members[i * rows:(i + 1) * rows]) for i in range(steps)]
        deal = np.random.default_rng([self.seed, epoch, 1]).permutation(len(batches))
        return [batches[i] for i in deal]

    def _batch(self, plan):
        bucket, members = plan
        return self.examples.batch(members, self.rows[bucket], self.widths[bucket])


def evaluation_batches(examples, batch_size, max_length, devices=1):
    """Batches of every example once, in order within each bucket (a full bucket is dealt
    when it fills, the rest at the end); longer-than-max_length ones one per batch (per
    device), their width rounded up to a multiple of 8."""
    kept = _Examples(examples)
    boundaries, sizes = buckets(batch_size, max_length)
    waiting = [[] for _ in sizes]  # the last: longer than max_length
    bucket_of = np.searchsorted(boundaries, kept.lengths, side="right")
    for i, bucket in enumerate(bucket_of):
        waiting[bucket].append(i)
        if len(waiting[bucket]) == devices * sizes[bucket]:
            yield _evaluation_batch(kept, waiting[bucket], boundaries, sizes, bucket, devices)
            waiting[bucket] = []
    for bucket, members in enumerate(waiting):
        if members:
            yield _evaluation_batch(kept, members, boundaries, sizes, bucket, devices)


def _evaluation_batch(kept, members, boundaries, sizes, bucket, devices):
    if bucket < len(boundaries):
        width = boundaries[bucket] - 1
    else:  # longer than max_length, one per batch: a width per length (rounded up)
        width = -(-int(kept.lengths[members].max()) // _LENGTH_MULTIPLE) * _LENGTH_MULTIPLE
    return kept.batch(members, devices * sizes[bucket], width)
