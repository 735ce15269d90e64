"""Writes tests/data/legacy_checkpoints/: checkpoints of the model as it was before the decoder
layers got named sublayers (commit 8694261, whose layers kept their LayerNorms in an indexed
`norms` tuple), and what that code computed with them, for tests/test_legacy_checkpoints.py.

Ran once, at that commit, from the repository root:

    python tests/data/make_legacy_checkpoints.py

For each norm_position (post, pre) it trains a tiny model (d_model 16, 2+2 layers) on
test_short_reverse with the trainer, copies its last checkpoint (model and optimizer, as
`t2t-lite-avg-checkpoints` and `best/` write them) into `NORM_POSITION/`, and records in
`NORM_POSITION/expected.npz` the teacher-forced logits of a fixed batch, the translations of a
few sources (beam search and greedy), and the logits after one more optimizer update on that
batch. Running it with later code writes checkpoints in the later format: do not.
"""

import json
import os
import shutil
import sys
import tempfile

import numpy as np
import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
OUTPUT = os.path.join(HERE, "legacy_checkpoints")
HPARAMS = ("num_encoder_layers=2,num_decoder_layers=2,d_model=16,d_ff=32,num_heads=2,"
           "dropout=0.0,warmup_steps=100")
SOURCES = ["1 2 3", "4 5 6 7 0", "9", "", "7 7 1 0 3 2 8 6"]


def fixed_batch():
    """A batch with padding on both sides, for logits and one training step."""
    inputs = np.array([[3, 4, 5, 1, 0, 0], [6, 7, 8, 9, 10, 1]], "int32")
    targets = np.array([[5, 4, 3, 1, 0], [10, 9, 8, 7, 1]], "int32")
    return inputs, targets


def main():
    import keras

    from t2t_lite.checkpoints import restore_existing, save_model_dir
    from t2t_lite.cli import trainer as trainer_cli
    from t2t_lite.runner import Runner
    from t2t_lite.training import Trainer

    usr_problems = os.path.join(HERE, "..", "usr_problems.py")
    os.makedirs(OUTPUT, exist_ok=True)
    for norm_position in ("post", "pre"):
        work = tempfile.mkdtemp()
        keras.utils.set_random_seed(1234)
        trainer_cli.main([
            "--problem=test_short_reverse", f"--usr_dir={usr_problems}",
            "--hparams_set=transformer_tiny", f"--hparams={HPARAMS},norm_position={norm_position}",
            f"--model_dir={work}/model", "--train_steps=300", "--eval_every=0",
            "--eval_decode_examples=0", "--random_seed=1234"])
        runner = Runner.from_model_dir(f"{work}/model")
        trainer = Trainer(runner.hparams, runner.vocabulary.size)
        latest = tf.train.latest_checkpoint(runner.model_dir)
        restore_existing(trainer.checkpoint, latest)
        target = os.path.join(OUTPUT, norm_position)
        shutil.rmtree(target, ignore_errors=True)
        save_model_dir(trainer.checkpoint, trainer.step, runner.model_dir, target,
                       {"written_by": "tests/data/make_legacy_checkpoints.py at commit 8694261"})
        with open(os.path.join(target, "problem.json"), encoding="utf-8") as f:
            problem = json.load(f)
        problem["data_dir"] = "unused: the tests pass their own"
        with open(os.path.join(target, "problem.json"), "w", encoding="utf-8") as f:
            json.dump(problem, f, indent=2)
            f.write("\n")

        inputs, targets = fixed_batch()
        features = {"inputs": inputs, "targets": targets}
        logits = trainer.model(features).numpy()
        beam = runner.translator(trainer.model, beam_size=4).translate(SOURCES)
        greedy = runner.translator(trainer.model, beam_size=1).translate(SOURCES)
        iterators = trainer.distribute(
            lambda context: tf.data.Dataset.from_tensors((features, targets)).repeat())
        trainer.train_step(iterators)
        np.savez(os.path.join(target, "expected.npz"), inputs=inputs, targets=targets,
                 logits=logits, sources=np.array(SOURCES),
                 beam_texts=np.array([t.text for t in beam]),
                 beam_scores=np.array([t.score for t in beam]),
                 greedy_texts=np.array([t.text for t in greedy]),
                 greedy_scores=np.array([t.score for t in greedy]),
                 logits_after_update=trainer.model(features).numpy())
        shutil.rmtree(work)
        print(norm_position, [t.text for t in beam], file=sys.stderr)


if __name__ == "__main__":
    main()
