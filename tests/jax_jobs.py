"""What the cross-backend tests run on Keras's JAX backend, in a subprocess with TensorFlow made
unimportable, as on a GPU machine without it:

    KERAS_BACKEND=jax python tests/jax_jobs.py JOB IN.npz OUT.npz

IN.npz holds the job's arrays and "config", a JSON string: the model's "hparams" and
"vocab_size", and "weights", a Keras .weights.h5 file written by the TensorFlow side. The job
writes its results to OUT.npz for the test to compare with TensorFlow's, in its own process.
"""

import sys

sys.modules["tensorflow"] = None  # `import tensorflow` fails: this side must not need it

import json  # noqa: E402
import os  # noqa: E402

import jax  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402

from t2t_lite.config import HParams  # noqa: E402
from t2t_lite.data.vocabulary import SymbolVocabulary  # noqa: E402
from t2t_lite.backends.jax.translator import JaxTranslator  # noqa: E402
from t2t_lite.models.transformer import create_model  # noqa: E402
from t2t_lite.training.loss import batch_statistics  # noqa: E402


def load(config):
    model = create_model(HParams(**config["hparams"]), config["vocab_size"])
    model.load_weights(config["weights"])
    return model


def gradients(config, arrays):
    """Logits, the batch statistics and the gradient of the summed loss of one batch, in
    training mode (the tests' models have no dropout), by jax.value_and_grad over the model's
    stateless call, as the JAX trainer computes them."""
    model = load(config)
    features = {"inputs": arrays["inputs"], "targets": arrays["targets"]}

    def loss(trainable, non_trainable):
        logits, _ = model.stateless_call(trainable, non_trainable, features, training=True)
        stats = batch_statistics(logits, features, features["targets"],
                                 model.hparams.label_smoothing)
        return stats["loss"], (logits, stats)

    (_, (logits, stats)), grads = jax.jit(jax.value_and_grad(loss, has_aux=True))(
        [v.value for v in model.trainable_variables],
        [v.value for v in model.non_trainable_variables])
    return {"logits": logits, **{f"stat_{k}": v for k, v in stats.items()},
            **{f"gradient_{i}": g for i, g in enumerate(grads)}}


def translate(config, arrays):
    """The n best of each source line (symbols) by the JAX translator, at each (beam_size,
    alpha) of config["settings"]: texts as one JSON string, scores as arrays; with
    config["constrained"], also those of constrained_translations."""
    model = load(config)
    results = translations(model, config)
    if "constrained" in config:
        results.update(constrained_translations(model, config))
    return results


def constrained_translations(model, config):
    """The n best outputs of each source line with its target phrases, by
    config["constrained"]'s beam_size, alpha, extra_length, n and phrases: [text, unmet
    phrases] pairs as one JSON string, scores as an array."""
    wanted = config["constrained"]
    vocabulary = SymbolVocabulary(config["vocab_size"] - 2)
    hparams = model.hparams.replace(beam_size=wanted["beam_size"], alpha=wanted["alpha"],
                                    extra_length=wanted["extra_length"])
    translator = JaxTranslator(model, vocabulary, hparams, batch_size=config["batch_size"])
    n_best = translator.translate_constrained(
        [vocabulary.encode(s) for s in config["sources"]], wanted["phrases"], wanted["n"])
    return {"constrained_texts": json.dumps([[[t.text, list(t.unmet)] for t in line]
                                             for line in n_best]),
            "constrained_scores": np.array([[t.score for t in line] for line in n_best])}


def ensemble(config, arrays):
    """translate's results and the token log-probabilities of config["scored"] (source,
    target) pairs, concatenated, of the ensemble of the models whose weights are
    config["weights"] ("pair_" keys; config["settings"]), of the first model with itself
    ("twice_") and of the first model alone ("alone_"; both with config["self_settings"])."""
    from t2t_lite.decoding.ensemble import Ensemble

    models = [load({**config, "weights": weights}) for weights in config["weights"]]
    vocabulary = SymbolVocabulary(config["vocab_size"] - 2)
    pairs = [[vocabulary.encode(text) for text in pair] for pair in config["scored"]]
    results = {}
    for name, model, settings in [
            ("pair", Ensemble(models), config["settings"]),
            ("twice", Ensemble([models[0]] * 2), config["self_settings"]),
            ("alone", models[0], config["self_settings"])]:
        translator = JaxTranslator(model, vocabulary, model.hparams, config["batch_size"])
        log_probs = translator.score_tokens([s for s, _ in pairs], [t for _, t in pairs])
        results.update({f"{name}_{key}": value
                        for key, value in translations(model, config, settings).items()})
        results[f"{name}_log_probs"] = np.concatenate(log_probs)
    return results


def translations(model, config, settings=None):
    """translate's results for `model` (a Transformer or an Ensemble) with each (beam_size,
    alpha, n) of `settings` (default: config["settings"])."""
    vocabulary = SymbolVocabulary(config["vocab_size"] - 2)
    sources = config["sources"]
    texts, results = {}, {}
    for beam_size, alpha, n in settings or config["settings"]:
        hparams = model.hparams.replace(beam_size=beam_size, alpha=alpha,
                                        **config.get("decoding", {}))
        translator = JaxTranslator(model, vocabulary, hparams, batch_size=config["batch_size"])
        n_best = translator.translate_n_best([vocabulary.encode(s) for s in sources], n)
        key = f"{beam_size}_{alpha}_{n}"
        texts[key] = [[t.text for t in line] for line in n_best]
        results[f"scores_{key}"] = np.array([[t.score for t in line] for line in n_best])
    return {"texts": json.dumps(texts), **results}


def ragged_examples(arrays):
    """The examples test_jax_backend.ragged() flattened into `arrays`."""
    return [{"inputs": i, "targets": t} for i, t in zip(
        np.split(arrays["inputs"], arrays["input_ends"][:-1]),
        np.split(arrays["targets"], arrays["target_ends"][:-1]))]


def data_parallel(config, arrays):
    """The trainable weights after config["steps"] updates from the same batches (rows for two
    devices) on one device, then split over two (keras.distribution.DataParallel over the two
    virtual CPU devices XLA_FLAGS makes), each from the same initialization; the loss of each
    update; and how many devices the second run's batches were laid out on. The second run
    updates at config["rate_factor"] (a time budget's cool-down) times a learning rate that
    much higher: the same rate. Then it trains two epochs more, counting the batch shapes and
    the compiled programs."""
    from t2t_lite.data.numpy_pipeline import TrainingBatches
    from t2t_lite.backends.jax.trainer import JaxTrainer, _placed

    assert len(jax.devices()) == 2, jax.devices()
    hparams = HParams(**config["hparams"])
    examples = ragged_examples(arrays)
    results = {}
    for devices in (1, 2):
        keras.distribution.set_distribution(
            keras.distribution.DataParallel() if devices == 2 else None)
        keras.utils.set_random_seed(7)
        factor = config["rate_factor"] if devices == 2 else 1.0
        trainer = JaxTrainer(hparams.replace(learning_rate=hparams.learning_rate / factor),
                             config["vocab_size"])
        data = TrainingBatches(examples, hparams.batch_size, hparams.max_length, seed=0,
                               devices=2)
        losses = [trainer.train_step([next(data)], factor)["loss"]
                  for _ in range(config["steps"])]
        results[f"losses_{devices}"] = np.array(losses)
        results[f"learning_rate_{devices}"] = np.array(trainer.learning_rate())
        for i, variable in enumerate(trainer.model.trainable_variables):
            results[f"weight_{devices}_{i}"] = np.asarray(variable.value)
        placed = _placed(next(data))[0]["inputs"]  # numpy without a distribution: one device
        results[f"placed_on_{devices}"] = np.array(
            len(placed.sharding.device_set) if hasattr(placed, "sharding") else 1)
    # Static shapes: the programs compiled by the end of the first epoch (one per bucket's
    # shape dealt) are all a second epoch needs.
    dealt = TrainingBatches(examples, hparams.batch_size, hparams.max_length, seed=0, devices=2)
    shapes = set()
    while dealt.position["epoch"] == 0:
        shapes.add(next(dealt)[1].shape)
    while data.position["epoch"] == 0:
        trainer.train_step([next(data)])
    results["shapes_in_an_epoch"] = np.array(len(shapes))
    results["programs_after_one_epoch"] = np.array(trainer._gradients._cache_size())
    results["updates_after_one_epoch"] = np.array(trainer._apply._cache_size())
    while data.position["epoch"] == 1:
        trainer.train_step([next(data)])
    results["programs_after_two_epochs"] = np.array(trainer._gradients._cache_size())
    results["updates_after_two_epochs"] = np.array(trainer._apply._cache_size())
    # A time budget's sized dropout (models/dropout.py) on one device: the training loss of one
    # batch at dropout scales 0, 1 and 2 from one compiled program, and its evaluation loss.
    keras.distribution.set_distribution(None)
    dropped = JaxTrainer(hparams.replace(dropout=0.2), config["vocab_size"])
    features, labels = next(data)
    trainable, non_trainable, _ = dropped.state
    for scale in (0.0, 1.0, 2.0):
        stats = dropped._gradients(trainable, non_trainable, features, labels,
                                   jax.numpy.float32(scale))[1]
        results[f"dropout_loss_{scale:g}"] = np.array(stats["loss"])
    results["dropout_eval_loss"] = np.array(
        dropped._statistics(trainable, non_trainable, features, labels)["loss"])
    results["dropout_programs"] = np.array(dropped._gradients._cache_size())
    # hparam weight_decay in the compiled update: one update of one batch from the same weights
    # with and without it, and with a time budget's sized weight decay given to the update
    # instead (training/optimizer.py `decaying`); the weights before, and the update's learning
    # rate.
    batch = next(data)
    for name, decay, sized in (("plain", 0.0, None), ("decayed", 2.0, None),
                               ("sized", 0.0, 2.0)):
        keras.utils.set_random_seed(7)
        trainer = JaxTrainer(hparams.replace(weight_decay=decay), config["vocab_size"])
        results["decay_rate"] = np.array(trainer.learning_rate())
        before = [np.asarray(value) for value in trainer.state[0]]
        trainer.train_step([batch], weight_decay=sized)
        for i, (variable, value) in enumerate(zip(trainer.model.trainable_variables,
                                                  trainer.state[0])):
            results[f"decay_{name}_{variable.name}_{i}"] = np.asarray(value)
            results[f"decay_before_{variable.name}_{i}"] = before[i]
    # Other sized weight decays compile no other update.
    programs = []
    for decay in (0.5, 1.0):
        trainer.train_step([batch], weight_decay=decay)
        programs.append(trainer._apply._cache_size())
    results["sized_decay_programs"] = np.array(programs)
    return results


def model_parallel(config, arrays):
    """The logits and evaluation loss of one batch, and the losses of config["steps"] updates,
    of the same model (the same initial weights, dropout seeds and
    batches) under DataParallel over four devices and under hparams model_parallel=2 (the
    backend's ModelParallel: a 2 x 2 mesh); and how many rows of the shared embedding and
    columns of a feed-forward kernel each device holds."""
    from t2t_lite.backends.jax.backend import JaxBackend
    from t2t_lite.backends.jax.trainer import _placed
    from t2t_lite.data.numpy_pipeline import TrainingBatches

    assert len(jax.devices()) == 4, jax.devices()
    hparams = HParams(**config["hparams"])
    examples = ragged_examples(arrays)
    data = TrainingBatches(examples, hparams.batch_size, hparams.max_length, seed=0, devices=4)
    batches = [next(data) for _ in range(config["steps"])]
    results, initial = {}, None
    for name, split in (("data", 1), ("model", 2)):
        keras.distribution.set_distribution(keras.distribution.DataParallel())
        keras.utils.set_random_seed(7)
        trainer = JaxBackend().trainer(hparams.replace(model_parallel=split),
                                       config["vocab_size"])
        if initial is None:
            initial = trainer.model.get_weights()
        else:
            trainer.model.set_weights(initial)
            trainer.reload()
        features, _ = _placed(batches[0])
        logits, _ = trainer.model.stateless_call(trainer.state[0], trainer.state[1], features,
                                                 training=False)
        results[f"logits_{name}"] = np.asarray(logits)
        results[f"eval_loss_{name}"] = np.array(trainer.evaluate(batches[:1])["loss"])
        results[f"losses_{name}"] = np.array([trainer.train_step([b])["loss"] for b in batches])
        by_path = {v.path.split("/", 1)[1]: v for v in trainer.model.trainable_variables}
        for part, path in (("embedding_rows", "shared_embedding/embeddings"),
                           ("hidden_columns", "encoder_0/feed_forward/hidden/kernel")):
            value = by_path[path].value
            results[f"{part}_{name}"] = np.array(value.sharding.shard_shape(value.shape))
    return results


JOBS = {"gradients": gradients, "translate": translate, "ensemble": ensemble,
        "data_parallel": data_parallel, "model_parallel": model_parallel}

if __name__ == "__main__":
    job, in_path, out_path = sys.argv[1:]
    assert keras.config.backend() == "jax", "run with KERAS_BACKEND=jax"
    with np.load(in_path) as loaded:
        arrays = dict(loaded)
    config = json.loads(str(arrays.pop("config")))
    results = JOBS[job](config, arrays)
    np.savez(out_path + ".tmp.npz", **{k: np.asarray(v) for k, v in results.items()})
    os.replace(out_path + ".tmp.npz", out_path)
