"""Checkpoints written before the decoder layers got named sublayers still load, translate and
train on exactly as that code did (tests/data/make_legacy_checkpoints.py wrote them and its
results at commit 8694261)."""

import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.runner import Runner

LEGACY = os.path.join(os.path.dirname(__file__), "data", "legacy_checkpoints")


@pytest.fixture(params=["post", "pre"])
def legacy(request, tmp_path):
    model_dir = tmp_path / request.param
    shutil.copytree(os.path.join(LEGACY, request.param), model_dir)
    runner = Runner.from_model_dir(str(model_dir), data_dir=str(tmp_path / "data"))
    with np.load(model_dir / "expected.npz") as expected:
        return runner, dict(expected)


def test_an_old_checkpoint_computes_and_translates_as_before(legacy):
    runner, expected = legacy
    model = runner.restored_model()
    features = {"inputs": expected["inputs"], "targets": expected["targets"]}
    np.testing.assert_allclose(model(features).numpy(), expected["logits"], rtol=1e-5, atol=1e-5)
    sources = [str(s) for s in expected["sources"]]
    for beam_size, name in ((4, "beam"), (1, "greedy")):
        translations = runner.translator(model, beam_size=beam_size).translate(sources)
        assert [t.text for t in translations] == list(expected[f"{name}_texts"])
        np.testing.assert_allclose([t.score for t in translations], expected[f"{name}_scores"],
                                   rtol=1e-5, atol=1e-5)


def test_training_resumes_from_an_old_checkpoint_with_its_optimizer_state(legacy):
    """One more update gives that code's weights: Adam's moments went to the same variables."""
    runner, expected = legacy
    trainer = runner.trainer()
    features = {"inputs": expected["inputs"], "targets": expected["targets"]}
    iterators = trainer.distribute(
        lambda context: tf.data.Dataset.from_tensors((features, expected["targets"])).repeat())
    trainer.train_step(iterators)
    np.testing.assert_allclose(trainer.model(features).numpy(), expected["logits_after_update"],
                               rtol=1e-5, atol=1e-5)
