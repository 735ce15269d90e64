"""Packed training batches (t2t_lite.data.packing; hparams packed_length): rows that hold every
example once within their token budget, and a model that computes on a packed row what it
computes on each example alone: the same logits, loss and gradients (attention within a
segment, positions restarting, each example's decoder input starting with PAD)."""

import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.config import HParams
from t2t_lite.data.packing import PackedBatches, pack
from t2t_lite.models.transformer import create_model
from t2t_lite.training.loss import batch_statistics

VOCAB = 19


def examples(n, longest, seed=0):
    rng = np.random.default_rng(seed)
    return [{"inputs": rng.integers(2, VOCAB, rng.integers(1, longest + 1)).astype("int32"),
             "targets": rng.integers(2, VOCAB, rng.integers(1, longest + 1)).astype("int32")}
            for _ in range(n)]


def test_rows_hold_every_example_once_within_their_budget():
    rng = np.random.default_rng(1)
    inputs, targets = rng.integers(1, 20, 500), rng.integers(1, 20, 500)
    rows = pack(inputs, targets, rng.permutation(500), 32)
    assert sorted(i for row in rows for i in row) == list(range(500))
    assert all(inputs[row].sum() <= 32 and targets[row].sum() <= 32 for row in rows)
    # Next-fit over 16 open rows packs tightly: padding under 15% of the slots here.
    assert max(inputs.sum(), targets.sum()) / (32 * len(rows)) > 0.85


def test_an_epoch_of_packed_batches_deals_every_short_enough_example_once():
    data = examples(300, 12, seed=2)
    data.append({"inputs": np.arange(2, 19, dtype="int32"), "targets": np.ones(3, "int32")})
    batches = PackedBatches(data, 16, 4, seed=5, devices=2)  # the 17-token example is left out
    seen = []
    for _ in range(batches.steps_per_bucket[0]):
        features, labels = next(batches)
        assert labels.shape == (8, 16) and all(f.shape == (8, 16) for f in features.values())
        for row in range(8):
            for segment in range(1, features["inputs_segmentation"][row].max() + 1):
                where = features["inputs_segmentation"][row] == segment
                np.testing.assert_array_equal(features["inputs_position"][row][where],
                                              np.arange(where.sum()))
                seen.append(tuple(features["inputs"][row][where]))
    assert batches.position == {"epoch": 0, "batch": batches.steps_per_bucket[0]}
    assert sorted(seen) == sorted(tuple(e["inputs"]) for e in data[:-1])
    next(batches)
    assert batches.position == {"epoch": 1, "batch": 1}


@pytest.mark.parametrize("norm_position", ["post", "pre"])
def test_a_packed_batch_gives_the_logits_loss_and_gradients_of_its_examples(norm_position):
    """Seven examples packed into 2 rows of 24 tokens against the same seven padded to a
    batch of their own: each example's logits, and the summed loss and its gradients."""
    hparams = HParams(num_encoder_layers=2, num_decoder_layers=2, d_model=32, d_ff=64,
                      num_heads=4, dropout=0.0, norm_position=norm_position)
    model = create_model(hparams, VOCAB)
    data = examples(7, 6, seed=3)
    packed = PackedBatches(data, 24, 4, seed=0)
    assert packed.steps_per_bucket == [1] and len(packed._packed) < 7
    features, labels = next(packed)
    width = max(len(e[side]) for e in data for side in ("inputs", "targets"))
    alone = {side: np.zeros((7, width), "int32") for side in ("inputs", "targets")}
    for i, example in enumerate(data):
        for side in alone:
            alone[side][i, :len(example[side])] = example[side]

    def loss_and_gradients(features, labels):
        features = {k: tf.constant(v) for k, v in features.items()}
        with tf.GradientTape() as tape:
            logits = model(features, training=False)
            loss = batch_statistics(logits, features, tf.constant(labels), 0.1)["loss"]
        return logits.numpy(), float(loss), tape.gradient(loss, model.trainable_variables)

    packed_logits, packed_loss, packed_gradients = loss_and_gradients(features, labels)
    alone_logits, alone_loss, alone_gradients = loss_and_gradients(alone, alone["targets"])
    assert packed_loss == pytest.approx(alone_loss, rel=1e-5)
    for a, b in zip(packed_gradients, alone_gradients):
        np.testing.assert_allclose(tf.convert_to_tensor(a).numpy(),
                                   tf.convert_to_tensor(b).numpy(), rtol=1e-4, atol=1e-6)
    (rows,) = packed._order  # the batch's rows, each a list of example indices
    for i, example in enumerate(data):  # find example i's target tokens in the packed rows
        row = next(r for r, members in enumerate(rows) if i in members)
        where = features["targets_segmentation"][row] == rows[row].index(i) + 1
        np.testing.assert_allclose(packed_logits[row][where],
                                   alone_logits[i, :len(example["targets"])],
                                   rtol=1e-4, atol=1e-5)
