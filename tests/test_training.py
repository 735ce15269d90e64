
import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.config import HParams
from t2t_lite.models.transformer import create_model
from t2t_lite.training.loss import batch_statistics, smoothed_cross_entropy
from t2t_lite.training.optimizer import TransformerSchedule, create_optimizer
from t2t_lite.training.stops import TrainingDiverged
from t2t_lite.backends.tensorflow.trainer import Trainer

VOCAB = 19


def paper_rate(step, d_model=512, warmup=4000):
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


@pytest.mark.parametrize("step", [1, 4000, 100_000])
def test_schedule_is_the_papers_formula(step):
    schedule = TransformerSchedule(d_model=512, warmup_steps=4000)
    # Keras passes the updates already applied: the paper's step 1 is iterations == 0.
    assert float(schedule(step - 1)) == pytest.approx(paper_rate(step), rel=1e-6)


def test_schedule_peak_matches_the_paper_and_survives_serialization():
    schedule = TransformerSchedule(d_model=512, warmup_steps=4000)
    assert float(schedule(3999)) == pytest.approx(6.988e-4, rel=1e-3)
    restored = keras.optimizers.schedules.deserialize(
        keras.optimizers.schedules.serialize(schedule))
    assert float(restored(99_999)) == pytest.approx(paper_rate(100_000), rel=1e-6)


@pytest.mark.parametrize("step", [1, 500, 1000, 4000, 100_000])
def test_a_peak_learning_rate_gives_fairseqs_inverse_sqrt_schedule(step):
    """peak_learning_rate=P: P * min(step / warmup, sqrt(warmup / step)), fairseq's
    inverse_sqrt with --lr P, on the optimizer create_optimizer makes."""
    hparams = HParams(d_model=128, warmup_steps=1000, peak_learning_rate=5e-3)
    optimizer = create_optimizer(hparams)
    optimizer.iterations.assign(step - 1)
    expected = 5e-3 * min(step / 1000, (1000 / step) ** 0.5)
    assert float(optimizer.learning_rate) == pytest.approx(expected, rel=1e-5)
    with pytest.raises(ValueError, match="not both"):
        hparams.replace(learning_rate=2.0)


def test_smoothed_cross_entropy_equals_the_explicit_distribution():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 5, VOCAB)).astype("float32")
    labels = rng.integers(0, VOCAB, (2, 5)).astype("int32")
    smoothing = 0.1
    target = np.full((2, 5, VOCAB), smoothing / (VOCAB - 1))
    np.put_along_axis(target, labels[..., None], 1 - smoothing, axis=-1)
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    expected = -(target * log_probs).sum(-1)
    np.testing.assert_allclose(smoothed_cross_entropy(logits, labels, smoothing), expected,
                               rtol=1e-5)


def test_statistics_count_only_real_target_tokens():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(2, 4, VOCAB)).astype("float32")
    labels = np.array([[5, 6, 1, 0], [7, 1, 0, 0]], "int32")
    stats = batch_statistics(logits, {"inputs": labels}, labels, 0.0)
    real = labels != 0
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    nll = -np.take_along_axis(log_probs, labels[..., None], -1)[..., 0]
    assert float(stats["tokens"]) == 5
    assert float(stats["loss"]) == pytest.approx(nll[real].sum(), rel=1e-5)
    assert float(stats["correct"]) == (logits.argmax(-1) == labels)[real].sum()


def tiny_hparams(**overrides):
    return HParams(num_encoder_layers=1, num_decoder_layers=1, d_model=32, d_ff=64, num_heads=4,
                   dropout=0.0, warmup_steps=1, learning_rate=0.1, **overrides)


def replica_batches(steps, replicas=2, seed=0):
    """Per-replica batches with different amounts of padding, so that a replica-local loss
    normalization would give a different update than the global one."""
    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(steps * replicas):
        inputs = rng.integers(2, VOCAB, (4, 6)).astype("int32")
        targets = rng.integers(2, VOCAB, (4, 5)).astype("int32")
        cut = rng.integers(1, 5, size=4)
        for row, length in enumerate(cut):
            targets[row, length:] = 0
        batches.append((inputs, targets))
    return batches


def as_dataset(batches):
    inputs = np.stack([b[0] for b in batches])
    targets = np.stack([b[1] for b in batches])
    return tf.data.Dataset.from_tensor_slices(({"inputs": inputs, "targets": targets}, targets))


def train_losses(trainer, batches, steps):
    """Mean loss of each update; replica r reads batches r, r + R, r + 2R, ... cyclically."""
    iterators = trainer.distribute(lambda context: as_dataset(batches).shard(
        context.num_input_pipelines, context.input_pipeline_id).repeat())
    return [sums["loss"] / sums["tokens"]
            for sums in (trainer.train_step(iterators) for _ in range(steps))]


# Below the gradients' global norms (2.4 to 3.4 in the first updates, checked below), so that
# updates are clipped.
CLIP = 0.5


@pytest.mark.slow  # trains on 1 and 2 replicas: ~8 s each
@pytest.mark.parametrize("replicas, accumulate_steps, clip_grad_norm",
                         [(2, 1, 0.0), (1, 3, 0.0), (2, 2, 0.0), (2, 1, CLIP), (2, 2, CLIP)])
def test_replicas_and_accumulation_match_one_device_on_the_same_global_batches(
        replicas, accumulate_steps, clip_grad_norm, two_cpu_strategy):
    """R replicas x K accumulated micro-batches per update give the updates of one device
    on the R * K micro-batches as one batch: same losses, weights and learning rates. With
    clip_grad_norm, the replicas clip by the global norm of the all-reduced gradient, which
    none of them holds alone (clipping each replica's share by its own norm differs)."""
    updates, per_update = 2, replicas * accumulate_steps
    micro_batches = replica_batches(updates, replicas=per_update)
    global_batches = [
        tuple(np.concatenate(part) for part in zip(*micro_batches[u * per_update:][:per_update]))
        for u in range(updates)]
    single = Trainer(tiny_hparams(clip_grad_norm=clip_grad_norm), VOCAB)
    strategy = two_cpu_strategy if replicas == 2 else tf.distribute.get_strategy()
    distributed = Trainer(tiny_hparams(accumulate_steps=accumulate_steps,
                                       clip_grad_norm=clip_grad_norm), VOCAB, strategy)
    assert distributed.strategy.num_replicas_in_sync == replicas
    distributed.model.set_weights(single.model.get_weights())

    steps = 6  # three passes over the data
    single_losses = train_losses(single, global_batches, steps)
    distributed_losses = train_losses(distributed, micro_batches, steps)

    assert single_losses[4] < single_losses[0] * 0.9  # same batch, after four updates
    np.testing.assert_allclose(distributed_losses, single_losses, rtol=1e-5)
    for a, b in zip(single.model.get_weights(), distributed.model.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-4)
    assert single.step == distributed.step == steps  # the schedule counts updates
    assert single.learning_rate() == distributed.learning_rate()


def rate_factor_losses(trainer, batches, factors):
    """Losses of updates at the schedule's rate times each of `factors` (a time budget's
    cool-down), replica r reading batches r, r + R, ... as train_losses does."""
    iterators = trainer.distribute(lambda context: as_dataset(batches).shard(
        context.num_input_pipelines, context.input_pipeline_id).repeat())
    return [trainer.train_step(iterators, rate_factor=factor)["loss"] for factor in factors]


def test_a_rate_factor_is_the_learning_rate_times_it(two_cpu_strategy):
    """An update at rate factor f (training/budget.py's cool-down) is the update of the same
    trainer with f times the learning rate: Adam's step is linear in its rate. Factor 1 is the
    update without a budget; on two replicas the factor reaches both. (Two trainers: a factor
    either ignored would part their weights, and the logged rates.)"""
    batches = replica_batches(3, replicas=2)
    cooled = Trainer(tiny_hparams(), VOCAB, two_cpu_strategy)
    slower = Trainer(tiny_hparams().replace(learning_rate=0.05), VOCAB, two_cpu_strategy)
    slower.model.set_weights(cooled.model.get_weights())
    rate_factor_losses(cooled, batches, [0.5, 0.5, 1.0])
    rate_factor_losses(slower, batches, [1.0, 1.0])
    after_two = slower.model.get_weights()
    rate_factor_losses(slower, batches[4:], [2.0])  # the third update at the full rate
    assert_close_arrays(cooled.model.get_weights(), slower.model.get_weights(), rtol=1e-5)
    assert cooled.learning_rate() == pytest.approx(slower.learning_rate())  # 0.1 x 1 = 0.05 x 2
    with pytest.raises(AssertionError):  # the third update moved the weights measurably
        assert_close_arrays(after_two, slower.model.get_weights(), rtol=1e-3)


def test_a_dropout_scale_reaches_the_traced_update_without_tracing_it_again():
    """A time budget's sized dropout (models/dropout.py): at dropout scale 0 the update's
    training loss is the evaluation loss of the same weights and batch (no dropout at all); at
    1 and 2 it is not, and differs between them; one trace serves the three. Rate factor 0
    keeps the weights, so that each loss is of the same weights."""
    batch = replica_batches(1, replicas=1)
    trainer = Trainer(tiny_hparams().replace(dropout=0.2), VOCAB)
    iterators = trainer.distribute(lambda context: as_dataset(batch).repeat())
    losses = [trainer.train_step(iterators, rate_factor=0.0, dropout_scale=scale)["loss"]
              for scale in (0.0, 1.0, 2.0)]
    features, labels = next(iter(as_dataset(batch)))
    evaluated = batch_statistics(trainer.model(features, training=False), features, labels,
                                 trainer.hparams.label_smoothing)["loss"]
    assert losses[0] == pytest.approx(float(evaluated), rel=1e-5)
    assert len(set(losses)) == 3
    assert trainer._train_step.experimental_get_tracing_count() == 1


def hand_clipped_updates(model, optimizer, batches, clip):
    """Applies `optimizer` to `model`'s variables with each batch's gradient of the mean loss
    over its target tokens, scaled by hand to global norm `clip` where it is larger; returns
    the norms before clipping."""
    norms = []
    for inputs, targets in batches:
        features = {"inputs": inputs, "targets": targets}
        with tf.GradientTape() as tape:
            stats = batch_statistics(model(features, training=True), features, targets,
                                     tiny_hparams().label_smoothing)
        gradients = [g / stats["tokens"]
                     for g in tape.gradient(stats["loss"], model.trainable_variables)]
        norm = np.sqrt(sum(np.sum(np.square(np.float64(g))) for g in gradients))
        norms.append(norm)
        optimizer.apply([g * min(1.0, clip / norm) for g in gradients],
                        model.trainable_variables)
    return norms


def assert_close_arrays(actual, expected, rtol=1e-4):
    assert len(actual) == len(expected)
    for a, b in zip(actual, expected):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * np.abs(b).max())


def test_clipping_applies_the_gradient_clipped_to_its_global_norm_by_hand():
    """Three updates with clip_grad_norm: the weights and Adam moments of Adam applied to the
    gradients clipped by hand, not those of the same updates without clipping."""
    batches = replica_batches(3, replicas=1)
    clipped = Trainer(tiny_hparams(clip_grad_norm=CLIP), VOCAB)
    unclipped = Trainer(tiny_hparams(), VOCAB)
    unclipped.model.set_weights(clipped.model.get_weights())
    reference = create_model(tiny_hparams(), VOCAB)
    reference.set_weights(clipped.model.get_weights())
    optimizer = create_optimizer(tiny_hparams())
    norms = hand_clipped_updates(reference, optimizer, batches, CLIP)
    assert min(norms) > 2 * CLIP, norms  # every update clipped, each by another factor
    train_losses(clipped, batches, 3)
    train_losses(unclipped, batches, 3)
    assert clipped.step == 3
    assert_close_arrays(clipped.model.get_weights(), reference.get_weights())
    assert_close_arrays([v.numpy() for v in clipped.optimizer.variables],
                        [v.numpy() for v in optimizer.variables])
    with pytest.raises(AssertionError):
        assert_close_arrays([v.numpy() for v in unclipped.optimizer.variables],
                            [v.numpy() for v in optimizer.variables], rtol=0.1)


def test_clipping_under_float16_loss_scaling_clips_the_unscaled_gradient():
    """The gradients of a loss-scaled step are 2^k times larger: the norm compared with
    clip_grad_norm is the unscaled one, so Adam's first moment after the first applied update,
    (1 - beta1) * the gradient, has global norm (1 - beta1) * clip_grad_norm."""
    trainer = Trainer(tiny_hparams(clip_grad_norm=CLIP, precision="mixed_float16"), VOCAB)
    iterators = trainer.distribute(
        lambda context: as_dataset(replica_batches(1, replicas=1)).repeat())
    for _ in range(20):  # an update that overflows float16 is skipped, with a smaller scale
        if trainer.step:
            break
        trainer.train_step(iterators)
    assert trainer.step == 1
    momentums = [v for v in trainer.optimizer.inner_optimizer.variables
                 if v.path.endswith("_momentum")]
    assert float(tf.linalg.global_norm(momentums)) == pytest.approx(
        (1 - tiny_hparams().adam_beta1) * CLIP, rel=1e-3)
    assert float(trainer.optimizer.scale_loss(1.0)) > 1  # it was loss-scaled


def test_weight_decay_shrinks_weights_by_rate_times_decay_before_adams_step():
    """One update of the same batch from the same weights with and without weight_decay: they
    differ by exactly rate * weight_decay * the starting weights (AdamW's decoupled decay; the
    gradient and Adam's step are the same) in the matrices and the embeddings, and not at all in
    the biases and LayerNorm's scales and offsets."""
    decay = 2.0
    batches = replica_batches(1, replicas=1)
    decayed = Trainer(tiny_hparams(weight_decay=decay), VOCAB)
    plain = Trainer(tiny_hparams(), VOCAB)
    plain.model.set_weights(decayed.model.get_weights())
    start = [v.numpy() for v in decayed.model.trainable_variables]
    rate = 0.1 * 32**-0.5  # tiny_hparams' learning rate at the first step (warmup_steps=1)
    train_losses(decayed, batches, 1)
    train_losses(plain, batches, 1)
    names = [v.name for v in decayed.model.trainable_variables]
    assert {"kernel", "embeddings", "bias", "gamma", "beta"} <= set(names)
    for name, before, after, without in zip(names, start, decayed.model.trainable_variables,
                                            plain.model.trainable_variables):
        shrink = 0 if name in ("bias", "gamma", "beta") else rate * decay
        np.testing.assert_allclose(after.numpy() - without.numpy(), -shrink * before,
                                   atol=1e-6, err_msg=name)


def test_a_sized_weight_decay_reaches_the_traced_update_without_tracing_it_again():
    """A time budget's sized weight decay (training/optimizer.py `decaying`) on a set without
    weight_decay: two trainers from the same weights make the same first update, one at weight
    decay 0 given to the update, the other as built; at the second the first gets 2, and they
    then differ by exactly that update's rate * 2 * the weights before it in the matrices and
    the embeddings, not at all in the biases and LayerNorm's. One trace served both decays (a
    number frozen into it would have kept them equal)."""
    decay = 2.0
    batches = replica_batches(2, replicas=1)
    sized, plain = Trainer(tiny_hparams(), VOCAB), Trainer(tiny_hparams(), VOCAB)
    plain.model.set_weights(sized.model.get_weights())
    sized_data, plain_data = (trainer.distribute(lambda context: as_dataset(batches).repeat())
                              for trainer in (sized, plain))
    sized.train_step(sized_data, weight_decay=0.0)
    plain.train_step(plain_data)
    assert_close_arrays(sized.model.get_weights(), plain.model.get_weights(), rtol=1e-6)
    start = [v.numpy() for v in sized.model.trainable_variables]
    rate = sized.learning_rate()
    assert rate == pytest.approx(0.1 * 32**-0.5 * 2**-0.5)  # the paper's rate at step 2
    sized.train_step(sized_data, weight_decay=decay)
    plain.train_step(plain_data)
    for variable, before, without in zip(sized.model.trainable_variables, start,
                                         plain.model.trainable_variables):
        shrink = 0 if variable.name in ("bias", "gamma", "beta") else rate * decay
        np.testing.assert_allclose(variable.numpy() - without.numpy(), -shrink * before,
                                   atol=1e-6, err_msg=variable.name)
    assert sized._train_step.experimental_get_tracing_count() == 1


@pytest.mark.slow  # trains 2 models, one XLA-compiled: ~7 s
def test_xla_compiled_training_matches_graph_training():
    batches = replica_batches(2, replicas=1)
    graph = Trainer(tiny_hparams(), VOCAB)
    xla = Trainer(tiny_hparams(accumulate_steps=2), VOCAB, jit_compile=True)
    xla.model.set_weights(graph.model.get_weights())
    graph_losses = train_losses(graph, [tuple(map(np.concatenate, zip(*batches)))], 4)
    np.testing.assert_allclose(train_losses(xla, batches, 4), graph_losses, rtol=1e-4)
    for a, b in zip(graph.model.get_weights(), xla.model.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-4)


def test_nan_loss_stops_training_without_saving(tmp_path):
    trainer = Trainer(tiny_hparams(), VOCAB)
    batches = replica_batches(3, replicas=1)
    trainer.train(lambda c: as_dataset(batches).repeat(), 2, checkpoint_dir=str(tmp_path),
                  save_every=2)
    for variable in trainer.model.trainable_variables[:1]:
        variable.assign(variable.numpy() * np.nan)
    with pytest.raises(TrainingDiverged, match="the loss became nan at step 3"):
        trainer.train(lambda c: as_dataset(batches).repeat(), 4, checkpoint_dir=str(tmp_path),
                      save_every=1)
    assert tf.train.latest_checkpoint(tmp_path).endswith("ckpt-2")


def test_the_demo_task_is_learned(trained_reverse):
    """Reversal of held-out sequences, decoded greedily, by the best of four evaluations in
    800 steps of the trainer CLI (an untrained model gets none right)."""
    assert trained_reverse.metrics["sequence_accuracy"] >= 0.95
    assert trained_reverse.metrics["accuracy"] >= 0.98


@pytest.mark.parametrize("precision", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_keeps_sensitive_parts_in_float32(precision):
    """Variables, softmax logits, layer norms and positions stay float32; the outputs equal the
    float32 model's with the same weights to half precision's accuracy."""
    hparams = tiny_hparams()
    exact = create_model(hparams, VOCAB)
    mixed = create_model(hparams.replace(precision=precision), VOCAB)
    mixed.set_weights(exact.get_weights())
    assert mixed.compute_dtype == precision.split("_")[1]
    assert {v.dtype for v in mixed.weights} == {"float32"}
    assert mixed.position_encoding.compute_dtype == "float32"
    inputs, targets = replica_batches(1)[0]
    features = {"inputs": inputs, "targets": targets}
    logits = mixed(features)
    assert logits.dtype == "float32"
    # Relative to the logits' scale: float16 keeps 11 significant bits, bfloat16 8.
    tolerance = {"mixed_float16": 1e-2, "mixed_bfloat16": 5e-2}[precision]
    np.testing.assert_allclose(logits, exact(features), atol=tolerance * np.abs(logits).max())
    large = np.tile(np.float32([1e3, -1e3]), 16)[None, None]  # squares overflow float16
    normalized = mixed.encoder_layers[0].self_attention_norm(large)
    np.testing.assert_allclose(np.asarray(normalized, "float32"), large / 1e3, atol=1e-2)
    assert isinstance(Trainer(hparams.replace(precision=precision), VOCAB).optimizer,
                      keras.optimizers.LossScaleOptimizer) == (precision == "mixed_float16")


def test_bfloat16_updates_follow_float32s():
    """From the same weights on the same batches, mixed_bfloat16's losses stay within 5% of
    float32's update after update (1.7% measured) while they halve. (float16's loss scaling
    skips updates, so its trajectory cannot be compared step by step: the next test.)"""
    batches = replica_batches(4, replicas=1)
    exact = Trainer(tiny_hparams(), VOCAB)
    mixed = Trainer(tiny_hparams(precision="mixed_bfloat16"), VOCAB)
    mixed.model.set_weights(exact.model.get_weights())
    exact_losses = np.array(train_losses(exact, batches, 40))
    mixed_losses = np.array(train_losses(mixed, batches, 40))
    assert exact_losses[-4:].mean() < 0.6 * exact_losses[:4].mean()  # ten passes over the data
    np.testing.assert_allclose(mixed_losses, exact_losses, rtol=0.05)
    assert mixed.step == exact.step == 40


@pytest.mark.slow  # trains 2 models: ~8 s
def test_float16_updates_follow_float32s():
    """mixed_float16, loss scaling included: an update whose scaled gradients overflow float16
    is skipped (the step does not advance; two of the first three, measured, as the scale halves
    from 2**15); float32 then makes the applied updates, from the same weights on the same
    batches, and its losses stay within 5% of float16's update after update while they halve."""
    batches = replica_batches(4, replicas=1)
    exact = Trainer(tiny_hparams(), VOCAB)
    mixed = Trainer(tiny_hparams(precision="mixed_float16"), VOCAB)
    mixed.model.set_weights(exact.model.get_weights())
    iterators = mixed.distribute(lambda context: as_dataset(batches).repeat())
    applied, mixed_losses = [], []
    for call in range(80):
        sums = mixed.train_step(iterators)
        if mixed.step > len(applied):
            applied.append(batches[call % len(batches)])
            mixed_losses.append(sums["loss"] / sums["tokens"])
        if mixed.step == 40:
            break
    exact_losses = np.array(train_losses(exact, applied, 40))
    assert mixed.step == exact.step == 40
    assert exact_losses[-4:].mean() < 0.6 * exact_losses[:4].mean()
    np.testing.assert_allclose(mixed_losses, exact_losses, rtol=0.05)
