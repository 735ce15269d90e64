"""The JAX path's data, read without TensorFlow (t2t_lite.data.records, numpy_pipeline): the
shards' examples as tf.data reads them, cut shards refused, batches within the same token budgets
in one shape per bucket, every example once an epoch, and a position that resumes exactly."""

import collections
import os
import shutil

import numpy as np
import pytest

from t2t_lite import registry
from t2t_lite.backends.tensorflow import pipeline
from t2t_lite.data import records
from t2t_lite.data.buckets import buckets
from t2t_lite.data.numpy_pipeline import TrainingBatches, evaluation_batches
from t2t_lite.utils.errors import UserError


@pytest.mark.slow  # reads 20,500 examples twice: ~5 s
def test_shards_read_without_tensorflow_are_what_tf_data_reads(short_reverse_data):
    problem = registry.problem("test_short_reverse")
    for split, count in (("train", 20_000), ("dev", 500)):
        paths = problem.shard_paths(split, short_reverse_data)
        ours = list(records.read_in_written_order(paths))
        theirs = list(pipeline.read_in_written_order(paths))
        assert len(ours) == len(theirs) == count
        for a, b in zip(ours, theirs):
            for name in ("inputs", "targets"):
                assert a[name].dtype == np.int32
                np.testing.assert_array_equal(a[name], b[name])


def test_a_shard_cut_short_is_an_error_naming_it(short_reverse_data, tmp_path):
    problem = registry.problem("test_short_reverse")
    (path,) = problem.shard_paths("dev", short_reverse_data)
    cut = str(tmp_path / os.path.basename(path))
    shutil.copy(path, cut)
    os.truncate(cut, os.path.getsize(cut) - 5)
    with pytest.raises(UserError, match=f"{cut} is cut short .*run datagen again"):
        list(records.read_in_written_order([cut]))


def synthetic(n, longest, seed=0):
    """n examples of random lengths 1..longest on each side, example i's first id i + 2."""
    rng = np.random.default_rng(seed)
    return [{"inputs": np.array([i + 2] + [5] * (rng.integers(1, longest + 1) - 1), "int32"),
             "targets": np.full(rng.integers(1, longest + 1), 7, "int32")} for i in range(n)]


def example_ids(batch):
    """The indices of the examples in a batch (its rows that are not padding)."""
    features, _ = batch
    return [int(row[0]) - 2 for row in features["inputs"] if row.any()]


@pytest.mark.parametrize("devices", [1, 2])
def test_an_epoch_deals_every_short_enough_example_once_in_budgets(devices):
    """Examples up to 40 long, max_length 32, 256 tokens a device: each epoch holds every
    example of at most 32 tokens exactly once; each batch has its bucket's shape, a multiple of
    the devices in rows, at most 256 tokens of room a device, and its examples fit its width."""
    examples = synthetic(3000, 40)
    kept = [i for i, e in enumerate(examples)
            if max(len(e["inputs"]), len(e["targets"])) <= 32]
    assert 0 < len(kept) < len(examples)
    data = TrainingBatches(examples, 256, 32, seed=3, devices=devices)
    boundaries, sizes = buckets(256, 32)
    shapes = {(devices * size, boundary - 1) for size, boundary in zip(sizes, boundaries)}
    for epoch in range(2):
        seen = []
        for _ in range(len(data._batches_of(epoch))):
            batch = next(data)
            features, labels = batch
            assert features["inputs"].shape == features["targets"].shape == labels.shape
            rows, width = labels.shape
            assert (rows, width) in shapes and rows % devices == 0
            assert rows // devices * width <= 256
            seen += example_ids(batch)
        assert sorted(seen) == kept


def test_the_order_changes_by_epoch_and_a_restored_position_continues_exactly():
    examples = synthetic(500, 20)
    data = TrainingBatches(examples, 64, 16, seed=1)
    per_epoch = len(data._batches_of(0))
    first = [example_ids(next(data)) for _ in range(per_epoch)]
    second = [example_ids(next(data)) for _ in range(per_epoch)]
    assert first != second  # a new permutation each epoch
    for skip in (3, per_epoch - 1, per_epoch + 2):  # the last crosses an epoch's end
        data = TrainingBatches(examples, 64, 16, seed=1)
        for _ in range(skip):
            next(data)
        resumed = TrainingBatches(examples, 64, 16, seed=1)
        resumed.position = dict(data.position)
        assert [example_ids(next(resumed)) for _ in range(5)] == [
            example_ids(next(data)) for _ in range(5)]


def test_evaluation_batches_hold_every_example_once_longer_ones_one_a_device():
    examples = synthetic(700, 50, seed=2)
    batches = list(evaluation_batches(examples, 128, 32, devices=2))
    seen = collections.Counter(i for batch in batches for i in example_ids(batch))
    assert sorted(seen) == list(range(700)) and set(seen.values()) == {1}
    for batch in batches:
        features, labels = batch
        rows, width = labels.shape
        assert rows % 2 == 0
        ids = example_ids(batch)
        longest = max(max(len(examples[i]["inputs"]), len(examples[i]["targets"])) for i in ids)
        assert longest <= width
        if longest > 32:
            assert len(ids) <= 2 and width % 8 == 0 and width - longest < 8  # 1 a device


def test_process_shares_are_disjoint_and_read_only_their_own_shards(short_reverse_data):
    """A multi-host run's shares (records.read_in_written_order's `share`): with at least as many
    shards as processes, each process reads only shards index, index + count, ... (a missing
    shard of another share is never opened); with fewer, every count-th example; either way the
    shares together are the data, each example in one share."""
    (dev,) = registry.problem("test_short_reverse").shard_paths("dev", short_reverse_data)
    one = [tuple(e["inputs"]) + (-1,) + tuple(e["targets"])
           for e in records.read_in_written_order([dev])]
    assert len(one) == 500

    def share(paths, index, count):
        return [tuple(e["inputs"]) + (-1,) + tuple(e["targets"])
                for e in records.read_in_written_order(paths, share=(index, count))]

    assert share([dev, "/missing/shard", dev], 0, 2) == [e for e in one for _ in range(2)]
    with pytest.raises(OSError, match="/missing/shard"):
        share([dev, "/missing/shard", dev], 1, 2)
    shares = [share([dev], index, 3) for index in range(3)]  # fewer shards than processes
    assert [len(s) for s in shares] == [167, 167, 166]
    assert [e for i in range(167) for s in shares for e in s[i:i + 1]] == one


def test_processes_with_uneven_shares_deal_the_same_bucket_at_every_step():
    """Two processes' TrainingBatches over uneven shares (200 and 60 examples), agreeing on the
    largest share's batches per bucket: at every step both deal a batch of the same shape (the
    same bucket), the smaller share's extra batches all PAD (no token in the loss), and each
    epoch deals every example of each share once."""
    examples = synthetic(260, 40, seed=4)
    shares = [TrainingBatches(part, 128, 32, seed=9, devices=2, shared=True)
              for part in (examples[:200], examples[200:])]
    own = [list(s.steps_per_bucket) for s in shares]
    agreed = [max(counts) for counts in zip(*own)]
    assert sum(agreed) > sum(own[1])  # the smaller share makes fewer batches
    for s in shares:
        s.steps_per_bucket = agreed
    steps = sum(agreed)
    for epoch in range(2):
        seen = [collections.Counter(), collections.Counter()]
        padding = 0
        for _ in range(steps):
            batches = [next(s) for s in shares]
            assert batches[0][1].shape == batches[1][1].shape
            for i, (features, labels) in enumerate(batches):
                seen[i].update(example_ids((features, labels)))
                padding += not labels.any()
        assert shares[0].position == shares[1].position == {"epoch": epoch, "batch": steps}
        kept = [i for i, e in enumerate(examples)
                if max(len(e["inputs"]), len(e["targets"])) <= 32]
        assert sorted(seen[0]) == [i for i in kept if i < 200] and set(seen[0].values()) == {1}
        assert sorted(seen[1]) == [i for i in kept if i >= 200] and set(seen[1].values()) == {1}
        assert padding == sum(steps - sum(counts) for counts in own)
