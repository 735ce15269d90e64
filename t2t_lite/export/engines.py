"""Engines: the ways a trained model runs, in one registry that the decoder (`--engine`) and the
exporter (`--format`) both choose from, as OpenNMT-tf's `make_exporter(name)` does.

Each engine has an in-process translator and most a directory format: `tensorflow` translates
with t2t_lite's own search (backends.tensorflow.translator.TensorFlowTranslator) and exports it
as a SavedModel; `jax` runs the same search on Keras's JAX backend
(backends.jax.translator.JaxTranslator; no export format: serve its checkpoints with the
others); `ctranslate2` translates with CTranslate2 on a conversion cached in the model_dir and
exports that conversion. Each declares what it can do (`capabilities`), so that the decoder asks
the engine rather than its name.
"""

import dataclasses
import logging

from t2t_lite.decoding.ctranslate2_translator import (
    NO_ATTENTION,
    NO_CONSTRAINTS,
    NO_ENSEMBLES,
    NO_LEXICAL_CONSTRAINTS,
    NO_N_BEST,
    QUANTIZATIONS,
    CTranslate2Translator,
    check_quantization,
    import_ctranslate2,
)
from t2t_lite.training.checkpoint_list import CheckpointGone, resolve_checkpoint
from t2t_lite.utils.backend import keras_backend
from t2t_lite.utils.errors import UserError

logger = logging.getLogger("t2t_lite")
# Checkpoints read before giving up when each is removed as it is read: a trainer saving
# faster than a model restores, which is not a rotation to chase.
ROTATION_RETRIES = 3


class TrainedModel:
    """What an engine needs of a trained model_dir: its ModelDir, problem, vocabulary and
    hparams, the checkpoint to run (`checkpoint_path`, a checkpoint or a directory of them;
    default the latest) and `restore(path)`, which restores a checkpoint's Keras model. `model`,
    if given, is the model to run instead (e.g. the trainer's)."""

    def __init__(self, model_dir, problem, vocabulary, hparams, restore, checkpoint_path=None,
                 model=None):
        self.model_dir = model_dir
        self.problem = problem
        self.vocabulary = vocabulary
        self.hparams = hparams
        self._restore = restore
        self._checkpoint_path = checkpoint_path
        self._checkpoint = None
        self._model = model

    def checkpoint(self):
        """The path of the checkpoint to run, resolved once."""
        if self._checkpoint is None:
            self._checkpoint = resolve_checkpoint(self.model_dir.path, self._checkpoint_path)
        return self._checkpoint

    def model(self):
        """The Keras model to run, restored once. When the latest checkpoint is removed while
        it is read (a trainer rotating its checkpoints), the newest one then is read instead."""
        return self._model if self._model is not None else self.with_checkpoint(self.model_of)

    def model_of(self, checkpoint):
        """The model of the checkpoint at `checkpoint` (or the model given), kept as model()'s."""
        if self._model is None:
            self._model = self._restore(checkpoint)
        return self._model

    def with_checkpoint(self, use):
        """use(the checkpoint's path), called again with the newest checkpoint while the one it
        was given is removed as it is read (raising CheckpointGone), up to ROTATION_RETRIES
        times; a --checkpoint_path choice is never replaced."""
        for attempt in range(1, ROTATION_RETRIES + 1):
            try:
                return use(self.checkpoint())
            except CheckpointGone as gone:
                if self._checkpoint_path or attempt == ROTATION_RETRIES:
                    raise
                self._checkpoint = None
                logger.warning("%s was removed while it was read; reading the newest, %s",
                               gone.path, self.checkpoint())


# What an engine may be able to do: the beam's n best hypotheses (--n_best without sampling),
# attention weights (--attention_dir), ensembles (several --model_dir), sampling, a problem's
# constrained search (parsing's trees), target phrases in the outputs (--glossary).
CAPABILITIES = ("n_best", "attention", "ensembles", "sampling", "constrained_search",
                "lexical_constraints")


@dataclasses.dataclass(frozen=True)
class Capabilities:
    """What an engine can do: every one of CAPABILITIES but those `missing`, (capability, why
    this engine has it not) pairs whose reason its refusal gives; and its --quantization values
    (none: float32 only)."""

    quantizations: tuple = ()
    missing: tuple = ()

    def has(self, capability):
        if capability not in CAPABILITIES:
            raise ValueError(f"no capability '{capability}': one of {CAPABILITIES}")
        return capability not in dict(self.missing)

    def why_not(self, capability):
        return dict(self.missing)[capability]


def refusal(name, capability, wanted, unless=""):
    """The one-line error for `wanted` (e.g. "--n_best") on the engine `name`, which has not
    `capability`: the engines that have it (`unless`: when it is not needed, e.g. ", unless
    sampling") and why this one has not."""
    able = " or ".join(e.name for e in ENGINES if e.capabilities.has(capability))
    return (f"{wanted} needs the {able} engine{unless}: "
            f"{make_engine(name).capabilities.why_not(capability)}")


def _check_backend(engine):
    backend = keras_backend()
    if backend != engine:
        raise UserError(f"--engine={engine} runs on Keras's {engine} backend, but this process "
                        f"runs Keras on {backend}: use --engine={backend}, or set "
                        f"KERAS_BACKEND={engine}")


class TensorFlowEngine:
    name = "tensorflow"
    format = "saved_model"
    capabilities = Capabilities()

    def translator(self, trained, hparams, batch_size=32, quantization=None, sampling=None):
        _check_backend(self.name)
        model = trained.model()  # first: restoring imports TensorFlow quietly
        # TensorFlow: only when used.
        from t2t_lite.backends.tensorflow.translator import TensorFlowTranslator

        constraint = trained.problem.search_constraint(trained.vocabulary)
        return TensorFlowTranslator(
            model, trained.vocabulary, hparams, batch_size, constraint,
            trained.problem.tf_postprocess(trained.vocabulary.in_graph()), sampling)

    def export(self, trained, hparams, export_dir, quantization=None):
        from t2t_lite.export import saved_model

        return saved_model.export(self.translator(trained, hparams), export_dir)


class JaxEngine:
    name = "jax"
    format = None
    capabilities = Capabilities()

    def translator(self, trained, hparams, batch_size=32, quantization=None, sampling=None):
        _check_backend(self.name)
        from t2t_lite.backends.jax.translator import JaxTranslator

        return JaxTranslator(trained.model(), trained.vocabulary, hparams, batch_size,
                             trained.problem.search_constraint(trained.vocabulary), sampling)


class CTranslate2Engine:
    name = "ctranslate2"
    format = "ctranslate2"
    capabilities = Capabilities(
        quantizations=QUANTIZATIONS,
        missing=(("n_best", NO_N_BEST), ("attention", NO_ATTENTION),
                 ("ensembles", NO_ENSEMBLES), ("constrained_search", NO_CONSTRAINTS),
                 ("lexical_constraints", NO_LEXICAL_CONSTRAINTS)))

    def translator(self, trained, hparams, batch_size=32, quantization="float32",
                   sampling=None):
        from t2t_lite.export.ctranslate2 import cached_conversion, num_positions

        check_quantization(quantization)
        import_ctranslate2()
        if (not self.capabilities.has("constrained_search")
                and trained.problem.search_constraint(trained.vocabulary) is not None):
            raise UserError(refusal(self.name, "constrained_search", trained.problem.name))
        longest = num_positions(trained.hparams) - hparams.max_length
        if hparams.extra_length > longest:
            raise UserError(f"--extra_length={hparams.extra_length} is too long for the "
                            f"CTranslate2 engine's position table: use at most {longest}")
        path = trained.with_checkpoint(lambda checkpoint: cached_conversion(
            trained.model_dir, checkpoint, lambda: trained.model_of(checkpoint),
            trained.vocabulary))
        return CTranslate2Translator(path, trained.vocabulary, hparams, batch_size, quantization,
                                     sampling)

    def export(self, trained, hparams, export_dir, quantization="float32"):
        from t2t_lite.export import ctranslate2

        check_quantization(quantization)
        import_ctranslate2()
        return ctranslate2.export(trained.model(), trained.vocabulary, export_dir, quantization)


ENGINES = (TensorFlowEngine(), JaxEngine(), CTranslate2Engine())
ENGINE_NAMES = tuple(engine.name for engine in ENGINES)
FORMATS = tuple(engine.format for engine in ENGINES if engine.format)


def make_engine(name):
    """The engine called `name` (the decoder's --engine)."""
    for engine in ENGINES:
        if engine.name == name:
            return engine
    raise UserError(f"unknown engine '{name}': use {' or '.join(ENGINE_NAMES)}")


def make_exporter(format_name):
    """The engine whose directory format is `format_name` (the exporter's --format)."""
    for engine in ENGINES:
        if engine.format and engine.format == format_name:
            return engine
    raise UserError(f"unknown format '{format_name}': use {' or '.join(FORMATS)}")


def default_export_dir(model_dir, format_name):
    return model_dir.export_dir(format_name)
