"""Writes tests/data/model_dir_v1/: a whole model_dir as the code before the architecture change
(issue 19; commit 7d5af0d) wrote it, and what that code computed with it, for
tests/test_model_dir_v1.py.

Ran once, at that commit, from the repository root:

    python tests/data/make_model_dir_v1.py

It trains a tiny model (d_model 32, 1+1 layers) on test_micro_reverse with the trainer CLI for 60
updates with evaluations, keep-best and averaging of the last 2 checkpoints, then resumes it to 90
with a training-only hparam changed and only the last checkpoint kept (checkpoints hold the data
position, 2 MB each), so the model_dir holds everything a trainer writes: checkpoints (with data
positions), hparams.json (with `changed_on_resume`), problem.json, eval/history.json, TensorBoard
summaries, best/ and avg/. `expected.json` records the translations (beam and greedy, with
scores) of a few sources by the latest checkpoint, best/ and avg/, and the teacher-forced logits
of a fixed batch by the latest checkpoint. Running it with later code writes a later format: do
not.
"""

import json
import os
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUTPUT = os.path.join(HERE, "model_dir_v1")
# Checkpoints hold the data position with the shards' paths: the tests remake the data here.
DATA_DIR = "/tmp/t2t_lite_model_dir_v1_data"
HPARAMS = ("num_encoder_layers=1,num_decoder_layers=1,d_model=32,d_ff=64,num_heads=2,"
           "dropout=0.0,warmup_steps=30,learning_rate=1.0,batch_size=256")
SOURCES = ["1 2 3", "4 5 6 7 0", "9", "", "7 7 1 0 3 2 8 6"]
INPUTS = [[3, 4, 5, 1, 0, 0], [6, 7, 8, 9, 10, 1]]
TARGETS = [[5, 4, 3, 1, 0], [10, 9, 8, 7, 1]]


def main():
    import keras

    from t2t_lite.cli import trainer as trainer_cli
    from t2t_lite.runner import Runner

    usr_problems = os.path.join(HERE, "..", "usr_problems.py")
    shutil.rmtree(OUTPUT, ignore_errors=True)
    shutil.rmtree(DATA_DIR, ignore_errors=True)
    common = [f"--usr_dir={usr_problems}", f"--model_dir={OUTPUT}", f"--data_dir={DATA_DIR}",
              "--eval_every=30", "--eval_decode_examples=20", "--keep_best_by=sequence_accuracy",
              "--random_seed=7", "--log_every=10"]
    keras.utils.set_random_seed(7)
    trainer_cli.main(common + ["--problem=test_micro_reverse", "--hparams_set=transformer_tiny",
                               f"--hparams={HPARAMS}", "--train_steps=60", "--average_last=2",
                               "--keep_checkpoints=3"])
    trainer_cli.main(common + ["--hparams=learning_rate=0.5", "--train_steps=90",
                               "--keep_checkpoints=1"])
    with open(os.path.join(OUTPUT, "problem.json"), encoding="utf-8") as f:
        problem = json.load(f)
    assert problem["data_dir"] == DATA_DIR

    expected = {"sources": SOURCES}
    for name, model_dir in (("latest", OUTPUT), ("best", f"{OUTPUT}/best"),
                            ("avg", f"{OUTPUT}/avg")):
        runner = Runner.from_model_dir(model_dir)
        model = runner.restored_model()
        for search, beam_size in (("beam", 4), ("greedy", 1)):
            translations = runner.translator(model, beam_size=beam_size).translate(SOURCES)
            expected[f"{name}_{search}"] = [[t.text, t.score] for t in translations]
        if name == "latest":
            features = {"inputs": np.array(INPUTS, "int32"), "targets": np.array(TARGETS, "int32")}
            expected.update(inputs=INPUTS, targets=TARGETS,
                            logits=model(features).numpy().tolist())
    with open(os.path.join(OUTPUT, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(expected, f)
    print(expected["latest_beam"], file=sys.stderr)


if __name__ == "__main__":
    main()
