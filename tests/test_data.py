"""The input pipeline: token budgets, complete epochs, length filtering."""

import collections

import numpy as np

from t2t_lite.config import HParams
from t2t_lite.data import bucket_boundaries
from t2t_lite.problems.algorithmic import AlgorithmicReverse
from t2t_lite.text import PAD_ID


class SmallReverse(AlgorithmicReverse):
    num_examples = {"train": 2000, "dev": 600, "test": 10}
    num_shards = {"train": 2, "dev": 2, "test": 1}


def examples_in(batches):
    seen = collections.Counter()
    for features, labels in batches:
        assert (features["targets"].numpy() == labels.numpy()).all()
        for inputs, targets in zip(features["inputs"].numpy(), labels.numpy()):
            seen[(tuple(inputs[inputs != PAD_ID]), tuple(targets[targets != PAD_ID]))] += 1
    return seen


def test_bucket_boundaries_are_tensor2tensors():
    assert bucket_boundaries(30) == [8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 22, 24, 26,
                                     28]


def test_eval_batches_respect_the_token_budget_and_cover_every_example_once(tmp_path):
    problem = SmallReverse()
    problem.generate_data(str(tmp_path))
    hparams = HParams(batch_size=64, max_length=32)
    batches = list(problem.dataset("dev", str(tmp_path), hparams, training=False))
    for features, _ in batches:
        inputs, targets = features["inputs"].numpy(), features["targets"].numpy()
        assert len(inputs) * max(inputs.shape[1], targets.shape[1]) <= hparams.batch_size
    vocabulary = problem.vocabulary(str(tmp_path))
    expected = collections.Counter(
        (tuple(vocabulary.encode(s) + [1]), tuple(vocabulary.encode(t) + [1]))
        for s, t in problem.text_pairs("dev", None))
    assert examples_in(batches) == expected
    # Batching by length keeps padding low: well under what one fixed-size batch would waste.
    real = sum((f["targets"].numpy() != 0).sum() for f, _ in batches)
    assert real / sum(f["targets"].numpy().size for f, _ in batches) > 0.85


def test_training_batches_drop_examples_over_max_length(tmp_path):
    problem = SmallReverse()
    problem.generate_data(str(tmp_path))
    hparams = HParams(batch_size=256, max_length=12)
    dataset = problem.dataset("train", str(tmp_path), hparams, training=True, seed=3)
    lengths = [max(f["inputs"].shape[1], f["targets"].shape[1]) for f, _ in dataset.take(200)]
    assert max(lengths) <= 12 and np.mean(lengths) > 4
