"""The input pipeline: token budgets, complete epochs, length filtering, per-worker shares,
and what it reports."""

import bisect
import collections

import numpy as np
import pytest
import tensorflow as tf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from t2t_lite.backends.jax.backend import compile_hint
from t2t_lite.config import EOS_ID, PAD_ID, HParams
from t2t_lite.data.buckets import bucket_boundaries
from t2t_lite.backends.tensorflow.pipeline import read_examples
from t2t_lite.problems.algorithmic import AlgorithmicReverse
from t2t_lite.backends.tensorflow.trainer import Trainer
from t2t_lite.utils.errors import UserError


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


@pytest.fixture(scope="module")
def small_reverse_dir(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("small_reverse"))
    SmallReverse().generate_data(path)
    return path


def encoded_pairs(problem, split):
    vocabulary = problem.vocabulary(None)
    return collections.Counter((tuple(vocabulary.encode(s) + [EOS_ID]),
                                tuple(vocabulary.encode(t) + [EOS_ID]))
                               for s, t in problem.text_pairs(split, None))


def test_training_batches_cover_every_kept_example_once_per_epoch(small_reverse_dir):
    problem = SmallReverse()
    hparams = HParams(batch_size=64, max_length=12)
    multiplicity = encoded_pairs(problem, "train")
    kept = {x: n for x, n in multiplicity.items() if max(map(len, x)) <= hparams.max_length}
    assert 0 < len(kept) < len(multiplicity)
    dataset = problem.dataset("train", small_reverse_dir, hparams, training=True, seed=5)
    counts = collections.Counter()
    for features, labels in dataset:
        inputs, targets = features["inputs"].numpy(), labels.numpy()
        assert len(inputs) * max(inputs.shape[1], targets.shape[1]) <= hparams.batch_size
        counts += examples_in([(features, labels)])
        if sum(counts.values()) > 2.5 * sum(kept.values()):
            break
    assert set(counts) == set(kept)  # everything kept is seen, nothing dropped is
    # Each epoch is a permutation and each length bucket is first in, first out: at any point
    # the examples of one bucket have been seen the same number of epochs, give or take one.
    boundaries = bucket_boundaries(hparams.max_length)
    epochs = collections.defaultdict(list)
    for example, count in counts.items():
        epochs[bisect.bisect_right(boundaries, max(map(len, example)))].append(
            count / kept[example])
    for bucket in epochs.values():
        assert max(bucket) - min(bucket) <= 1


@pytest.mark.parametrize("pipelines", [2, 3])  # 2 shards: whole shards each, or every 3rd example
def test_input_pipelines_read_disjoint_shares_that_cover_the_split(small_reverse_dir, pipelines):
    paths = SmallReverse().shard_paths("train", small_reverse_dir)
    shares = []
    for index in range(pipelines):
        context = tf.distribute.InputContext(num_input_pipelines=pipelines,
                                             input_pipeline_id=index)
        examples = read_examples(paths, shuffle=True, input_context=context)
        shares.append(collections.Counter((tuple(e["inputs"]), tuple(e["targets"]))
                                          for e in examples.as_numpy_iterator()))
    assert sum(shares, collections.Counter()) == encoded_pairs(SmallReverse(), "train")
    assert min(sum(share.values()) for share in shares) >= 2000 // 3 - 1


def test_the_examples_a_length_limit_drops_are_reported(small_reverse_dir, caplog):
    problem = SmallReverse()
    lengths = [max(map(len, x)) for x in encoded_pairs(problem, "train").elements()]
    dropped = sum(length > 12 for length in lengths)
    with caplog.at_level("INFO", logger="t2t_lite"):
        problem.dataset("train", small_reverse_dir, HParams(max_length=12), training=True)
    assert f"max_length=12 drops {dropped:,} of 2,000 training examples" in caplog.text
    with pytest.raises(UserError, match="all 2,000 training examples .* longer than max_length=1"):
        problem.dataset("train", small_reverse_dir, HParams(max_length=1), training=True)
    caplog.clear()  # the JAX path's packed rows leave out what packed_length does, and say so
    with caplog.at_level("INFO", logger="t2t_lite"):
        problem.numpy_batches("train", small_reverse_dir, HParams(packed_length=12),
                              training=True)
    assert f"packed_length=12 drops {dropped:,} of 2,000 training examples" in caplog.text
    with pytest.raises(UserError, match="longer than packed_length=1: .*packed_length=N"):
        problem.numpy_batches("train", small_reverse_dir, HParams(packed_length=1), training=True)


def test_a_multi_host_check_names_the_hparam_that_limits_the_length(small_reverse_dir,
                                                                     monkeypatch):
    """JAX processes agree on each bucket's batches (the largest count of any process); where
    that leaves no batch at all, the error names the length limit that left none: packed_length
    when training packs rows, else max_length. The cluster is simulated: hosts.largest answers
    zero for every bucket, as it would if no process had a batch."""
    from t2t_lite.backends.base import Distribution
    from t2t_lite.backends.jax import hosts
    from t2t_lite.backends.jax.backend import JaxBackend

    monkeypatch.setattr(hosts, "several", lambda: True)
    monkeypatch.setattr(hosts, "largest", lambda counts: [0] * len(counts))
    for hparams, named in ((HParams(packed_length=12), "packed_length=12"),
                           (HParams(max_length=12), "max_length=12")):
        with pytest.raises(UserError, match=f"^no training example is at most {named} long$"):
            JaxBackend().training_data(SmallReverse(), small_reverse_dir, hparams, seed=1,
                                       distribution=Distribution(worker=1, workers=2))


def test_an_accelerator_is_told_that_length_buckets_compile_a_program_each(small_reverse_dir):
    problem = SmallReverse()
    buckets = problem.numpy_batches("train", small_reverse_dir, HParams(max_length=32),
                                    training=True).steps_per_bucket
    packed = problem.numpy_batches("train", small_reverse_dir, HParams(packed_length=32),
                                   training=True).steps_per_bucket
    shapes = sum(steps > 0 for steps in buckets)
    assert shapes > 1 and len(packed) == 1
    hint = compile_hint("gpu", buckets, environ={})
    assert f"each of the {shapes} length buckets" in hint and "packed_length=L" in hint
    assert "JAX_COMPILATION_CACHE_DIR" in hint
    assert "JAX_COMPILATION_CACHE_DIR" not in compile_hint(
        "tpu", buckets, environ={"JAX_COMPILATION_CACHE_DIR": "/cache"})
    assert compile_hint("gpu", packed, environ={}) is None  # one shape: one program
    assert compile_hint("cpu", buckets, environ={}) is None  # compiling is quick there


def test_the_padding_fraction_reaches_tensorboard(small_reverse_dir, tmp_path):
    hparams = HParams(num_encoder_layers=1, num_decoder_layers=1, d_model=16, d_ff=32,
                      num_heads=2, batch_size=64, max_length=32)
    batch = SmallReverse().dataset("dev", small_reverse_dir, hparams, training=False).take(1)
    features, _ = next(iter(batch))  # evaluation batches come in the same order every time
    ids = np.concatenate([features["inputs"].numpy().ravel(), features["targets"].numpy().ravel()])
    padding = (ids == PAD_ID).mean()
    assert padding > 0.02
    trainer = Trainer(hparams, SmallReverse().vocabulary(None).size)
    trainer.train(lambda context: batch.repeat(), 2, log_every=2, summary_dir=str(tmp_path))
    events = EventAccumulator(str(tmp_path), size_guidance={"tensors": 0})
    events.Reload()
    (logged,) = events.Tensors("padding_fraction")
    assert logged.step == 2
    assert float(tf.make_ndarray(logged.tensor_proto)) == pytest.approx(padding, rel=1e-6)
