"""Keras's JAX backend against TensorFlow's, on the same weights: logits, loss and gradients of a
batch; the JAX translator's beam search, greedy search and n-best lists, of a model and of an
ensemble, against the TensorFlow translator's and the exhaustive search. The JAX side runs in a
subprocess without TensorFlow (tests/jax_jobs.py), given the weights as a Keras .weights.h5
file."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from jax_subprocess import jax_environment
from reference_decoding import exhaustive_search
from test_decoding import eos_prone_model, padded, random_model

from t2t_lite.config import HParams
from t2t_lite.data.vocabulary import SymbolVocabulary
from t2t_lite.decoding.ensemble import Ensemble
from t2t_lite.backends.tensorflow.translator import TensorFlowTranslator
from t2t_lite.models.transformer import create_model
from t2t_lite.training.loss import batch_statistics

pytestmark = pytest.mark.filterwarnings("ignore:You are using a softmax over axis -1")
pytestmark = [pytestmark, pytest.mark.jax, pytest.mark.slow]  # a JAX subprocess each: 30-70 s
JOBS = os.path.join(os.path.dirname(__file__), "jax_jobs.py")


def on_jax(job, tmp_path, model, config=None, devices=1, **arrays):
    """The results of tests/jax_jobs.py's `job` on `model`'s weights (if a model; a list of
    models: the weights of each, as a list), run on JAX with `devices` CPU devices."""
    config = dict(config or {})
    if model is not None:
        models = model if isinstance(model, list) else [model]
        weights = [str(tmp_path / f"model{i or ''}.weights.h5") for i in range(len(models))]
        for each, path in zip(models, weights):
            each.save_weights(path)
        config.update(hparams=models[0].hparams.to_dict(), vocab_size=models[0].vocab_size,
                      weights=weights if isinstance(model, list) else weights[0])
    np.savez(tmp_path / "in.npz", config=json.dumps(config), **arrays)
    result = subprocess.run(
        [sys.executable, JOBS, job, str(tmp_path / "in.npz"), str(tmp_path / "out.npz")],
        env=jax_environment(devices, fast_compile=True),
        capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    with np.load(tmp_path / "out.npz") as results:
        return dict(results)


def ragged(inputs, targets):
    """Examples of varied lengths as flat arrays and their ends (jax_jobs.ragged_examples)."""
    return {"inputs": np.concatenate(inputs), "input_ends": np.cumsum([len(x) for x in inputs]),
            "targets": np.concatenate(targets),
            "target_ends": np.cumsum([len(x) for x in targets])}


def test_the_same_weights_and_batch_give_the_same_logits_loss_and_gradients(tmp_path):
    """A 2+2-layer model with label smoothing, in training mode, on a batch of several lengths
    with padding on both sides: JAX's logits, summed statistics and gradients (of every
    variable, the shared embedding included) equal TensorFlow's within float32 rounding."""
    keras.utils.set_random_seed(3)
    hparams = HParams(num_encoder_layers=2, num_decoder_layers=2, d_model=32, d_ff=64,
                      num_heads=4, dropout=0.0, label_smoothing=0.1)
    model = create_model(hparams, vocab_size=20)
    rng = np.random.default_rng(0)
    inputs = padded([rng.integers(2, 20, n) for n in (5, 2, 7)])
    targets = padded([rng.integers(2, 20, n) for n in (3, 6, 1)])
    features = {"inputs": inputs, "targets": targets}
    with tf.GradientTape() as tape:
        logits = model(features, training=True)
        stats = batch_statistics(logits, features, targets, hparams.label_smoothing)
    gradients = tape.gradient(stats["loss"], model.trainable_variables)
    on = on_jax("gradients", tmp_path, model, inputs=inputs, targets=targets)
    np.testing.assert_allclose(on["logits"], logits, rtol=1e-4, atol=1e-5)
    for name, value in stats.items():
        np.testing.assert_allclose(on[f"stat_{name}"], value, rtol=1e-5, err_msg=name)
    assert len(gradients) == len([k for k in on if k.startswith("gradient_")]) > 20
    for i, (variable, gradient) in enumerate(zip(model.trainable_variables, gradients)):
        expected = tf.convert_to_tensor(gradient).numpy()
        assert np.abs(expected).max() > 0, variable.path
        np.testing.assert_allclose(on[f"gradient_{i}"], expected, rtol=1e-3,
                                   atol=1e-5 * np.abs(expected).max(), err_msg=variable.path)


def test_jax_search_equals_tensorflow_and_the_exhaustive_search(tmp_path):
    """On a model that likes to stop (so lengths vary), batches of 2 lines of several lengths
    and an empty line: greedy search and beam search (beam 4) give TensorFlow's outputs, and a
    27-wide beam's 5-best lists are those of TensorFlow and the exact 5 best of all possible
    outputs (3 symbols, limits of at most 4 tokens), best first with their scores; with target
    phrases (and room for most), beam search's 2-best lists are TensorFlow's, with the phrases
    each output misses."""
    model = eos_prone_model(vocab_size=5, seed=3, bias=1.5)
    vocabulary = SymbolVocabulary(3)
    sources = ["0 1", "", "2", "1 1", "0", "2 2"]
    settings = [(1, 0.6, 1), (4, 0.6, 1), (27, 0.0, 5), (27, 1.0, 5)]
    phrases = [["2 2", "1"], ["0"], ["0 1 0"], [], ["1", "2", "0 0"], ["2"]]
    constrained = {"beam_size": 3, "alpha": 0.6, "extra_length": 3, "n": 2, "phrases": phrases}
    on = on_jax("translate", tmp_path, model,
                {"sources": sources, "settings": settings, "batch_size": 2,
                 "decoding": {"extra_length": 1}, "constrained": constrained})
    texts = json.loads(str(on["texts"]))
    tokens = [vocabulary.encode(s) for s in sources]
    for beam_size, alpha, n in settings:
        key = f"{beam_size}_{alpha}_{n}"
        hparams = model.hparams.replace(beam_size=beam_size, alpha=alpha, extra_length=1)
        expected = TensorFlowTranslator(model, vocabulary, hparams,
                                        batch_size=2).translate_n_best(tokens, n)
        assert texts[key] == [[t.text for t in line] for line in expected], key
        np.testing.assert_allclose(on[f"scores_{key}"], [[t.score for t in line]
                                                        for line in expected],
                                   rtol=1e-5, atol=1e-5, err_msg=key)
        if beam_size == 27:
            for source, line in zip(tokens, texts[key]):
                if source:
                    best = exhaustive_search(model, padded([source])[0], alpha, 1, top=n,
                                             min_length=1)
                    assert line == [vocabulary.decode(sequence) for sequence, _ in best]
    assert len({tuple(line) for line in texts["27_1.0_5"]}) > 2  # the lists differ by line
    hparams = model.hparams.replace(beam_size=3, alpha=0.6, extra_length=3)
    expected = TensorFlowTranslator(model, vocabulary, hparams, batch_size=2
                                    ).translate_constrained(tokens, phrases, 2)
    assert json.loads(str(on["constrained_texts"])) == [[[t.text, list(t.unmet)] for t in line]
                                                         for line in expected]
    np.testing.assert_allclose(on["constrained_scores"], [[t.score for t in line]
                                                          for line in expected], atol=1e-5)
    best = [line[0] for line in expected]
    assert sum(not t.unmet for t in best) >= 4 and best[1].unmet == ("0",)  # "" misses it


def test_jax_ensembles_equal_tensorflow_ensembles(tmp_path):
    """Two random models as one ensemble (decoding.ensemble) on JAX: greedy and beam-4
    translations and a 27-wide beam's 5-best lists, with their scores, are the TensorFlow
    ensemble's (which test_ensemble checks against the exhaustive search under the averaged
    distribution), and so are its token log-probabilities of given targets. The ensemble of the
    first model with itself translates and scores as that model alone, and the pair not as the
    model alone. (Each setting is a compilation on JAX: a few, for the suite's time.)"""
    models = [random_model(5, seed=0), random_model(5, seed=1)]
    vocabulary = SymbolVocabulary(3)
    sources = ["0 1", "", "2", "1 1", "0", "2 2"]
    scored = [["0 1", "1 0"], ["2", "2 2 1"], ["1 1", "0"], ["2 2", ""]]
    settings = [(1, 0.6, 1), (4, 0.6, 1), (27, 1.0, 5)]
    self_settings = [(27, 1.0, 5)]
    on = on_jax("ensemble", tmp_path, models,
                {"sources": sources, "settings": settings, "self_settings": self_settings,
                 "batch_size": 2, "scored": scored, "decoding": {"extra_length": 1}})
    texts = {name: json.loads(str(on[f"{name}_texts"])) for name in ("pair", "twice", "alone")}
    tokens = [vocabulary.encode(s) for s in sources]
    ensemble = Ensemble(models)
    for beam_size, alpha, n in settings:
        key = f"{beam_size}_{alpha}_{n}"
        hparams = models[0].hparams.replace(beam_size=beam_size, alpha=alpha, extra_length=1)
        expected = TensorFlowTranslator(ensemble, vocabulary, hparams,
                                        batch_size=2).translate_n_best(tokens, n)
        assert texts["pair"][key] == [[t.text for t in line] for line in expected], key
        np.testing.assert_allclose(on[f"pair_scores_{key}"], [[t.score for t in line]
                                                             for line in expected],
                                   rtol=1e-5, atol=1e-5, err_msg=key)
    for key in (f"{beam_size}_{alpha}_{n}" for beam_size, alpha, n in self_settings):
        assert texts["twice"][key] == texts["alone"][key], key
        np.testing.assert_allclose(on[f"twice_scores_{key}"], on[f"alone_scores_{key}"],
                                   rtol=1e-5, atol=1e-5, err_msg=key)
    assert texts["pair"]["27_1.0_5"] != texts["alone"]["27_1.0_5"]
    pairs = [[vocabulary.encode(text) for text in pair] for pair in scored]
    expected = TensorFlowTranslator(ensemble, vocabulary, models[0].hparams).score_tokens(
        [s for s, _ in pairs], [t for _, t in pairs])
    np.testing.assert_allclose(on["pair_log_probs"], np.concatenate(expected), rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_allclose(on["twice_log_probs"], on["alone_log_probs"], rtol=1e-5,
                               atol=1e-5)


def test_the_trained_models_translations_are_the_same_on_jax(trained_reverse, tmp_path):
    """The demo's trained model (d_model 64, from its TensorFlow checkpoint): the JAX
    translator's beam-4 translations of 100 dev inputs and their scores are TensorFlow's."""
    runner = trained_reverse.runner
    model = runner.restored_model()
    rng = np.random.default_rng(1)
    sources = [" ".join(map(str, rng.integers(0, 10, rng.integers(1, 9)))) for _ in range(100)]
    on = on_jax("translate", tmp_path, model,
                {"sources": sources, "settings": [[4, 0.6, 1]], "batch_size": 32})
    expected = runner.translator(model, beam_size=4, alpha=0.6).translate(sources)
    assert json.loads(str(on["texts"]))["4_0.6_1"] == [[t.text] for t in expected]
    np.testing.assert_allclose(on["scores_4_0.6_1"][:, 0], [t.score for t in expected],
                               rtol=1e-5, atol=1e-5)
    assert sum(t.text == " ".join(reversed(s.split())) for t, s in zip(expected, sources)) > 90


def test_data_parallel_over_two_devices_updates_as_one_device_does(tmp_path):
    """keras.distribution.DataParallel over two virtual CPU devices: the same batches (rows
    split between the devices) give the same losses and weights after 5 updates as on one
    device, within float32 rounding (the sums are reduced in another order). The two-device
    run has twice the learning rate at rate factor 0.5 (training/budget.py's cool-down), which
    is the same rate: a factor the JAX trainer ignored would part them. Two more epochs compile
    nothing new: the shapes are static. A time budget's dropout scale reaches the compiled
    update: at 0 the training loss is the evaluation loss, at 1 and 2 it is not, and all three
    are one program. hparam weight_decay shrinks the weights as on TensorFlow
    (test_training.py), and so does the same weight decay given to the update (a time budget's
    sized weight decay), whose other values compile nothing new."""
    rng = np.random.default_rng(0)
    inputs = [rng.integers(2, 12, rng.integers(1, 10)) for _ in range(400)]
    targets = [x[::-1] for x in inputs]
    hparams = HParams(num_encoder_layers=1, num_decoder_layers=1, d_model=32, d_ff=64,
                      num_heads=4, dropout=0.0, batch_size=128, max_length=16,
                      warmup_steps=10)
    on = on_jax("data_parallel", tmp_path, None,
                {"hparams": hparams.to_dict(), "vocab_size": 12, "steps": 5, "rate_factor": 0.5},
                devices=2,
                **ragged(inputs, targets))
    assert on["placed_on_1"] == 1 and on["placed_on_2"] == 2
    # Static shapes (for TPUs): a gradient program per bucket shape, compiled in the first pass
    # over the data, and none after it. (The first pass compiles each program once more than
    # its shapes: seen 4 gradient programs for 3 shapes and 2 of the one update, the first
    # update's variables arriving laid out otherwise than the updates' outputs.)
    assert on["shapes_in_an_epoch"] > 1
    assert on["shapes_in_an_epoch"] <= on["programs_after_one_epoch"] <= (
        on["shapes_in_an_epoch"] + 1)
    assert on["updates_after_one_epoch"] <= 2
    assert on["programs_after_two_epochs"] == on["programs_after_one_epoch"]
    assert on["updates_after_two_epochs"] == on["updates_after_one_epoch"]
    assert on["learning_rate_2"] == pytest.approx(on["learning_rate_1"], rel=1e-6)
    assert on["losses_1"][-1] < on["losses_1"][0]
    np.testing.assert_allclose(on["losses_2"], on["losses_1"], rtol=1e-5)
    assert on["dropout_loss_0"] == pytest.approx(on["dropout_eval_loss"], rel=1e-5)
    assert len({float(on[f"dropout_loss_{scale}"]) for scale in (0, 1, 2)}) == 3
    assert on["dropout_programs"] == 1
    decayed = [k for k in on if k.startswith("decay_decayed_")]
    assert {k.split("_")[2] for k in decayed} >= {"kernel", "embeddings", "bias", "gamma", "beta"}
    for name in decayed:
        kind = name.split("_")[2]
        shrink = 0 if kind in ("bias", "gamma", "beta") else on["decay_rate"] * 2.0
        before = on[name.replace("decayed", "before", 1)]
        np.testing.assert_allclose(on[name] - on[name.replace("decayed", "plain", 1)],
                                   -shrink * before, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(on[name.replace("decayed", "sized", 1)], on[name],
                                   atol=1e-6, err_msg=name)
    assert on["sized_decay_programs"][0] == on["sized_decay_programs"][1]
    names = [k for k in on if k.startswith("weight_1_")]
    assert len(names) > 10
    for name in names:
        np.testing.assert_allclose(on[name.replace("_1_", "_2_", 1)], on[name], rtol=1e-4,
                                   atol=1e-6, err_msg=name)


def test_model_parallel_gives_the_logits_loss_and_updates_of_data_parallel(tmp_path):
    """hparams model_parallel=2 on four devices (keras.distribution.ModelParallel, a 2 x 2
    mesh): each device holds half the embedding's rows and half of each feed-forward hidden
    layer, and the same weights give the same logits and loss as under DataParallel over the
    four, and the same losses over 3 updates (dropout on), within float32 rounding. (Not the
    weights entry by entry: Adam's step, which divides by the gradient's root mean square,
    turns a rounding-sized gradient near 0 into a full step of either sign; seen on 1 entry in
    2,048.)"""
    rng = np.random.default_rng(1)
    inputs = [rng.integers(2, 16, rng.integers(1, 10)) for _ in range(400)]
    targets = [x[::-1] for x in inputs]
    hparams = HParams(num_encoder_layers=1, num_decoder_layers=1, d_model=32, d_ff=64,
                      num_heads=4, dropout=0.1, batch_size=64, max_length=16,
                      warmup_steps=10)
    on = on_jax("model_parallel", tmp_path, None,
                {"hparams": hparams.to_dict(), "vocab_size": 16, "steps": 3}, devices=4,
                **ragged(inputs, targets))
    assert list(on["embedding_rows_data"]) == [16, 32] and list(on["hidden_columns_data"]) == [
        32, 64]
    assert list(on["embedding_rows_model"]) == [8, 32]
    assert list(on["hidden_columns_model"]) == [32, 32]
    np.testing.assert_allclose(on["logits_model"], on["logits_data"], rtol=1e-5, atol=1e-5)
    assert on["eval_loss_model"] == pytest.approx(float(on["eval_loss_data"]), rel=1e-5)
    assert on["losses_data"][-1] < on["losses_data"][0]
    np.testing.assert_allclose(on["losses_model"], on["losses_data"], rtol=1e-5)
