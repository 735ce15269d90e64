import numpy as np
import pytest

from t2t_lite.config import HParams
from t2t_lite.models.transformer import create_model

VOCAB = 23


def small_hparams(norm_position="post", **overrides):
    return HParams(num_encoder_layers=2, num_decoder_layers=2, d_model=32, d_ff=64,
                   num_heads=4, dropout=0.0, norm_position=norm_position, **overrides)


def small_model(norm_position="post", **overrides):
    return create_model(small_hparams(norm_position, **overrides), VOCAB)


def random_batch(batch=3, source_length=7, target_length=6, seed=0):
    rng = np.random.default_rng(seed)
    inputs = rng.integers(2, VOCAB, (batch, source_length)).astype("int32")
    targets = rng.integers(2, VOCAB, (batch, target_length)).astype("int32")
    inputs[0, 4:] = 0  # a shorter sentence in the batch
    targets[1, 3:] = 0
    return inputs, targets


def logits(model, inputs, targets):
    return model({"inputs": inputs, "targets": targets}).numpy()


@pytest.mark.parametrize("norm_position", ["post", "pre"])
def test_decoder_is_causal(norm_position):
    model = small_model(norm_position)
    inputs, targets = random_batch()
    reference = logits(model, inputs, targets)
    length = targets.shape[1]
    for i in range(length - 1):
        changed = targets.copy()
        changed[:, i + 1:] = (changed[:, i + 1:] + 5) % (VOCAB - 2) + 2
        out = logits(model, inputs, changed)
        # Position j predicts targets[j] from targets[:j], so positions <= i + 1 must not move...
        np.testing.assert_allclose(out[:, : i + 2], reference[:, : i + 2], atol=1e-5)
        # ...while later ones do: the test would notice a decoder that ignores its inputs.
        if i + 2 < length:
            assert np.abs(out[:, i + 2:] - reference[:, i + 2:]).max() > 1e-3


@pytest.mark.parametrize("norm_position", ["post", "pre"])
def test_extra_padding_changes_nothing(norm_position):
    model = small_model(norm_position)
    inputs, targets = random_batch()
    reference = logits(model, inputs, targets)
    padded = logits(model, np.pad(inputs, ((0, 0), (0, 5))), np.pad(targets, ((0, 0), (0, 4))))
    np.testing.assert_allclose(padded[:, : targets.shape[1]], reference, atol=1e-5)
    memory, _ = model.encode(inputs)
    padded_memory, _ = model.encode(np.pad(inputs, ((0, 0), (0, 5))))
    real = inputs != 0
    np.testing.assert_allclose(padded_memory.numpy()[:, :7][real], memory.numpy()[real], atol=1e-5)


@pytest.mark.parametrize("norm_position", ["post", "pre"])
def test_cached_decoding_equals_the_full_forward_pass(norm_position):
    model = small_model(norm_position)
    inputs, targets = random_batch(target_length=9)
    reference = logits(model, inputs, targets)
    memory, memory_mask = model.encode(inputs)
    cache = model.init_cache(memory, memory_mask, max_length=12)
    previous = np.zeros(len(targets), "int32")
    for step in range(targets.shape[1]):
        step_logits, cache = model.decode_step(previous, step, cache)
        np.testing.assert_allclose(step_logits.numpy(), reference[:, step], atol=1e-5)
        previous = targets[:, step]


def test_one_embedding_matrix_is_shared_with_the_softmax():
    model = small_model()
    embeddings = [v for v in model.weights if tuple(v.shape) == (VOCAB, 32)]
    assert len(embeddings) == 1
    inputs, targets = random_batch()
    memory, mask = model.encode(inputs)
    # The pre-softmax projection is that same matrix: zeroing it zeroes every logit.
    before = model.decode(targets, memory, mask).numpy()
    embeddings[0].assign(embeddings[0].numpy() * 0)
    after = model.decode(targets, memory, mask).numpy()
    assert np.abs(before).max() > 0.1 and np.abs(after).max() == 0.0


@pytest.mark.parametrize("norm_position", ["post", "pre"])
def test_the_variables_built_from_hparams_are_exactly_those_the_model_uses(norm_position):
    """Transformer.build creates every variable without tracing call(): training, encoding
    and cached decoding create none after it, and each one gets a gradient (none unused)."""
    import tensorflow as tf

    from t2t_lite.models.transformer import Transformer

    model = Transformer(small_hparams(norm_position), VOCAB)
    model.build()
    built = [(v.path, tuple(v.shape)) for v in model.weights]
    inputs, targets = random_batch()
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model({"inputs": inputs, "targets": targets}, training=True) ** 2)
    gradients = tape.gradient(loss, model.trainable_variables)
    memory, mask = model.encode(inputs)
    model.decode_step(targets[:, 0], 0, model.init_cache(memory, mask, 4))
    assert [(v.path, tuple(v.shape)) for v in model.weights] == built and len(built) > 40
    assert all(g is not None and np.abs(tf.convert_to_tensor(g)).max() > 0 for g in gradients)


def test_a_traced_dropout_scale_multiplies_the_rate_without_tracing_again():
    """models/dropout.py under tf.function: the rate follows a variable assigned after the
    trace (0.1 x 1, 3 and 20, the last capped at 0.9), kept values are divided by the keep
    probability, and outside scaled() the layer is Keras's Dropout, draw for draw."""
    import keras
    import tensorflow as tf

    from t2t_lite.models import dropout

    layer, scale, traces = dropout.Dropout(0.1, seed=3), tf.Variable(1.0), []

    @tf.function(autograph=False)
    def dropped(x):
        traces.append(1)
        with dropout.scaled(scale):
            return layer(x, training=True)

    ones = tf.ones((200, 500))
    for value, rate in ((1.0, 0.1), (3.0, 0.3), (20.0, 0.9)):
        scale.assign(value)
        out = dropped(ones).numpy()
        # The dropped fraction of 100,000 draws, within 5 standard deviations.
        assert abs((out == 0).mean() - rate) < 5 * np.sqrt(rate * (1 - rate) / out.size)
        np.testing.assert_allclose(out[out != 0], 1 / (1 - rate), rtol=1e-6)
    assert len(traces) == 1
    with dropout.scaled(scale):
        assert np.array_equal(layer(ones, training=False), ones)
    np.testing.assert_array_equal(dropout.Dropout(0.1, seed=5)(ones, training=True),
                                  keras.layers.Dropout(0.1, seed=5)(ones, training=True))


def test_word_dropout_drops_whole_token_embeddings_while_training_only():
    """hparam word_dropout: each token's embedding (before its position is added) is all
    zeros with that probability or scaled by 1 / (1 - rate), one draw a token; at inference the
    embedding is the model's without word dropout."""
    rate = 0.3
    model = small_model(word_dropout=rate)
    ids = np.random.default_rng(1).integers(1, VOCAB, (100, 200)).astype("int32")
    scaled = np.asarray(model.embedding(ids)) * np.sqrt(32)
    sinusoids = np.asarray(model.position_encoding(scaled))
    np.testing.assert_allclose(model._embed(ids, training=False), scaled + sinusoids,
                               rtol=1e-5, atol=1e-5)
    kept = np.asarray(model._embed(ids, training=True)) - sinusoids
    dropped = np.all(np.abs(kept) < 1e-5, axis=-1)
    np.testing.assert_allclose(kept[~dropped], scaled[~dropped] / (1 - rate), rtol=1e-4,
                               atol=1e-5)
    # The dropped fraction of 20,000 tokens, within 5 standard deviations.
    assert abs(dropped.mean() - rate) < 5 * np.sqrt(rate * (1 - rate) / dropped.size)
