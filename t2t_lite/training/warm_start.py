"""Starting a new model from another model's weights: the trainer's --init_from.

OpenNMT-tf loads weights and updates the vocabulary (`update_vocab`); tensor2tensor's
--warm_start_from could not change the vocabulary (its issues 588 and 1636). Here the weights
come from the source model's checkpoint, and the optimizer and the step start afresh, unless the
optimizer is carried over too. When the new problem's vocabulary differs from the source's:
- every piece the two share keeps its embedding row (which the softmax shares);
- a new piece keeps the row a fresh model gives it;
- a piece the new vocabulary lacks is dropped.

Nothing here depends on the backend: weights are copied between Keras models, and carrying the
optimizer over is the trainer's own restore.
"""

import dataclasses
import logging
import os

import numpy as np

from t2t_lite.config import ARCHITECTURE
from t2t_lite.model_dir import Experiment, ModelDir
from t2t_lite.training.checkpoint_list import checkpoint_step, latest_checkpoint
from t2t_lite.utils.errors import UserError
from t2t_lite.utils.files import absolute

logger = logging.getLogger("t2t_lite")


@dataclasses.dataclass(frozen=True)
class Source:
    """The checkpoint a new model starts from, and the experiment of its model_dir."""

    given: str  # --init_from, made absolute
    model_dir: ModelDir
    checkpoint: str
    experiment: Experiment

    @classmethod
    def find(cls, init_from):
        """The source --init_from names: a model_dir (its latest checkpoint), its best/ or
        avg/, or one checkpoint (MODEL_DIR/ckpt-N)."""
        given = absolute(init_from)
        if os.path.isdir(given):
            source_dir, checkpoint = given, latest_checkpoint(given)
            if not checkpoint:
                raise UserError(f"--init_from={init_from} holds no checkpoint: name a trained "
                                "model_dir (or its best/ or avg/), or one of its ckpt-N")
        elif os.path.exists(given + ".index"):
            source_dir, checkpoint = os.path.dirname(given), given
        else:
            raise UserError(f"--init_from={init_from}: no such model_dir or checkpoint (a "
                            "checkpoint is named MODEL_DIR/ckpt-N, without .index)")
        source_dir = ModelDir(source_dir)
        return cls(given, source_dir, checkpoint, source_dir.read_experiment())

    def record(self, optimizer):
        """What the new model_dir records of where its weights came from (problem.json)."""
        return {"init_from": self.given, "model_dir": self.model_dir.path,
                "checkpoint": self.checkpoint, "step": checkpoint_step(self.checkpoint),
                "optimizer": optimizer}

    def hparams(self, hparams_set_hparams, overrides):
        """The new model's hparams: those of its hparams set (an HParams; None: the source's
        own) with the source's architecture (config.ARCHITECTURE), then `overrides`. An
        override that gives the architecture another value is a UserError naming it: the
        weights fit no other shape. Training and decoding hparams may differ."""
        source = self.experiment.hparams
        base = hparams_set_hparams or source
        taken = [f"{name}={getattr(source, name)}" for name in ARCHITECTURE
                 if getattr(base, name) != getattr(source, name)]
        if taken:
            logger.info("the architecture of %s: %s (in place of the hparams set's)",
                        self.model_dir, ", ".join(taken))
        hparams = base.replace(**{name: getattr(source, name) for name in ARCHITECTURE})
        hparams = hparams.override(overrides)
        conflicts = [name for name in ARCHITECTURE
                     if getattr(hparams, name) != getattr(source, name)]
        if conflicts:
            given = ", ".join(f"{name}={getattr(hparams, name)}" for name in conflicts)
            saved = ", ".join(f"{name}={getattr(source, name)}" for name in conflicts)
            raise UserError(f"--hparams {given}: the model of --init_from has {saved} (see "
                            f"{self.model_dir}/hparams.json) and its weights fit no other "
                            "shape: drop those --hparams")
        return hparams


def check_resumed(started, init_from, optimizer, model_dir):
    """On resume, --init_from (which only starts a model_dir) must name the model that
    model_dir started from (`started`, its record), so that the same command resumes an
    interrupted run."""
    if init_from and (started is None or started["init_from"] != absolute(init_from)
                      or started["optimizer"] != optimizer):
        how = f"started from {started['init_from']}" if started else "trained from scratch"
        raise UserError(f"{model_dir} already holds checkpoints ({how}): --init_from only "
                        "starts a new model_dir; drop it to resume, or pass a new --model_dir")


def start(trainer, started, source_vocabulary, vocabulary, data_dir, restore_source):
    """Sets trainer's model (and with started["optimizer"], its optimizer) from the checkpoint
    of `started` (what Source.record recorded), whose model restore_source(checkpoint) returns;
    returns that record with how the two vocabularies matched."""
    mapping = VocabularyMap.between(source_vocabulary, vocabulary)
    counts = mapping.counts
    if started["optimizer"]:
        if not mapping.is_identity:
            raise UserError(f"--init_from_optimizer needs the vocabulary of {started['model_dir']}"
                            f", but {data_dir} has another ({counts['kept']} pieces shared): "
                            "drop the flag, or make the data with t2t-lite-datagen --vocab_from")
        restore_with_optimizer(trainer, started["checkpoint"])
    else:
        copy_weights(trainer.model, restore_source(started["checkpoint"]), mapping)
    logger.info("started from %s%s (step %d); vocabulary pieces: %d kept, %d added, %d dropped",
                started["checkpoint"], " and its optimizer" * started["optimizer"],
                started["step"], counts["kept"], counts["added"], counts["dropped"])
    return {**started, "vocabulary": counts}


@dataclasses.dataclass(frozen=True)
class VocabularyMap:
    """Which row of the source's embedding each id of the new vocabulary takes."""

    rows: np.ndarray  # per new id: the source id of the same token, or -1 for a new token
    source_size: int

    @classmethod
    def between(cls, source_vocabulary, vocabulary):
        """Tokens are matched by their string (Vocabulary.tokens), as OpenNMT-tf's
        update_vocab matches them; the special ids are the same in every vocabulary."""
        source_ids = {token: i for i, token in enumerate(source_vocabulary.tokens())}
        rows = np.array([source_ids.get(token, -1) for token in vocabulary.tokens()], "int64")
        return cls(rows, len(source_ids))

    @property
    def counts(self):
        kept = int((self.rows >= 0).sum())
        return {"kept": kept, "added": len(self.rows) - kept, "dropped": self.source_size - kept}

    @property
    def is_identity(self):
        return (len(self.rows) == self.source_size
                and bool((self.rows == np.arange(self.source_size)).all()))


def copy_weights(model, source_model, vocabulary_map):
    """Sets every weight of `model` to source_model's, the embedding's rows through
    `vocabulary_map`; the rows of new tokens keep the values `model` was initialized with."""
    if len(model.weights) != len(source_model.weights):
        raise AssertionError("models of one architecture have the same weights")
    embedding = model.embedding.embeddings
    for variable, source in zip(model.weights, source_model.weights):  # in the same order
        value = source.numpy()
        if variable is embedding:
            rows, kept = vocabulary_map.rows, vocabulary_map.rows >= 0
            value, source_rows = variable.numpy().copy(), value
            value[kept] = source_rows[rows[kept]]
        if tuple(variable.shape) != value.shape:
            raise AssertionError(f"{variable.path}: {variable.shape} != {value.shape}")
        variable.assign(value)


def restore_with_optimizer(trainer, checkpoint):
    """Restores trainer's model and optimizer (Adam's moments and the step) from `checkpoint`,
    which must have the same vocabulary (and be of trainer's backend: see
    model_weights.check_resumable)."""
    try:
        trainer.restore(checkpoint)
    except (AssertionError, ValueError):
        raise UserError(f"{checkpoint} holds no optimizer state of this model to carry over "
                        "(--init_from_optimizer): drop that flag to start the optimizer "
                        "afresh") from None
