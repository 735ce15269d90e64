"""The trainer's decoding evaluation: metrics every K updates into TensorBoard, best checkpoint."""

import json
import os

import pytest
import tensorflow as tf
from cli_output import error_lines

from t2t_lite import cli
from t2t_lite.cli import trainer


def scalars(event_dir):
    """{tag: {step: value}} of the scalar summaries in event_dir."""
    values = {}
    for path in tf.io.gfile.glob(os.path.join(event_dir, "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                values.setdefault(value.tag, {})[event.step] = float(
                    tf.make_ndarray(value.tensor))
    return values


def descriptions(event_dir):
    """{tag: {description}} of the summaries in event_dir."""
    found = {}
    for path in tf.io.gfile.glob(os.path.join(event_dir, "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.metadata.summary_description:
                    found.setdefault(value.tag, set()).add(value.metadata.summary_description)
    return found


def test_decoding_metrics_every_k_updates_and_the_best_checkpoint(trained_reverse, tmp_path):
    model_dir = tmp_path / "model"
    cli.run(trainer.main, [
        "--problem=test_short_reverse", "--hparams_set=transformer_tiny",
        "--hparams=num_encoder_layers=1,num_decoder_layers=1,d_model=16,d_ff=32,num_heads=2",
        f"--model_dir={model_dir}", f"--data_dir={trained_reverse.runner.data_dir}",
        "--train_steps=6", "--eval_every=2", "--eval_steps=1", "--eval_decode_every=4",
        "--eval_decode_examples=8", "--eval_beam_size=2", "--keep_best_by=loss"])
    metrics = scalars(model_dir / "eval")
    assert sorted(metrics["loss"]) == [2, 4, 6]
    assert sorted(metrics["sequence_accuracy"]) == [4, 6]  # every 4 updates, and at the end
    # TensorBoard says what was decoded.
    assert descriptions(model_dir / "eval")["sequence_accuracy"] == {
        "on a random sample of 8 of the 500 dev examples (seed 0), beam search of width 2"}
    with open(model_dir / "best" / "info.json") as f:
        best = json.load(f)
    lowest = min(metrics["loss"], key=metrics["loss"].get)
    assert best == {"metric": "loss", "value": pytest.approx(metrics["loss"][lowest]),
                    "step": lowest}
    assert tf.train.latest_checkpoint(str(model_dir / "best")).endswith(f"ckpt-{best['step']}")


@pytest.mark.parametrize("flags, message", [
    (["--keep_best_by=bleu"], "--keep_best_by=bleu: evaluations of test_short_reverse report"),
    (["--eval_every=2", "--eval_decode_every=3"], "must be a multiple of --eval_every=2"),
])
def test_trainer_decoding_mistakes_are_one_line_errors(trained_reverse, tmp_path, capsys, flags,
                                                       message):
    with pytest.raises(SystemExit):
        cli.run(trainer.main, ["--problem=test_short_reverse", "--hparams_set=transformer_tiny",
                               f"--model_dir={tmp_path}",
                               f"--data_dir={trained_reverse.runner.data_dir}"] + flags)
    err = capsys.readouterr().err
    assert len(error_lines(err)) == 1 and message in err, err
