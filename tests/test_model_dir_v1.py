"""A model_dir written by the code before the architecture change (tests/data/model_dir_v1, made
by tests/data/make_model_dir_v1.py at commit 7d5af0d) still loads, decodes, resumes and exports,
with the results that code computed. Its checkpoint's data position names the shards in the
data_dir it recorded (/tmp/t2t_lite_model_dir_v1_data), where the trainer remakes them."""

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from t2t_lite import cli
from t2t_lite.cli import decoder, exporter, trainer
from t2t_lite.runner import Runner

WRITTEN = os.path.join(os.path.dirname(__file__), "data", "model_dir_v1")


@pytest.fixture
def model_dir(tmp_path):
    path = tmp_path / "model"
    shutil.copytree(WRITTEN, path)
    return str(path)


@pytest.fixture(scope="module")
def expected():
    with open(os.path.join(WRITTEN, "expected.json"), encoding="utf-8") as f:
        return json.load(f)


def assert_translations(translations, expected):
    assert [t.text for t in translations] == [text for text, _ in expected]
    np.testing.assert_allclose([t.score for t in translations],
                               [score for _, score in expected], rtol=1e-5, atol=1e-5)


@pytest.mark.slow  # restores and translates: ~5 s each
@pytest.mark.parametrize("name, sub_dir", [("latest", ""), ("best", "best"), ("avg", "avg")])
def test_every_model_dir_in_it_translates_as_that_code_did(model_dir, expected, tmp_path, name,
                                                           sub_dir):
    """As that code did at --min_length=0 (it had no minimum); at today's default, 1, none of
    the non-empty sources gets the empty translation that code gave some of them."""
    runner = Runner.from_model_dir(os.path.join(model_dir, sub_dir))
    model = runner.restored_model()
    for search, beam_size in (("beam", 4), ("greedy", 1)):
        assert_translations(runner.translator(model, beam_size=beam_size, min_length=0)
                            .translate(expected["sources"]), expected[f"{name}_{search}"])
        translations = runner.translator(model, beam_size=beam_size).translate(
            expected["sources"])
        assert [bool(t.text) for t in translations] == [bool(s) for s in expected["sources"]]
    if name == "latest":
        features = {"inputs": np.array(expected["inputs"], "int32"),
                    "targets": np.array(expected["targets"], "int32")}
        np.testing.assert_allclose(model(features).numpy(), expected["logits"], rtol=1e-5,
                                   atol=1e-5)


@pytest.mark.ctranslate2
@pytest.mark.slow  # decoder, exporter and a CTranslate2 conversion: ~10 s
def test_the_decoder_and_the_exporters_give_that_codes_translations(model_dir, expected,
                                                                    tmp_path, capsys):
    sources = tmp_path / "sources.txt"
    sources.write_text("".join(f"{s}\n" for s in expected["sources"]), encoding="utf-8")
    output = tmp_path / "out.txt"
    cli.run(decoder.main, [f"--model_dir={model_dir}", "--min_length=0",
                           f"--decode_from_file={sources}", f"--decode_to_file={output}"])
    assert output.read_text(encoding="utf-8").splitlines() == [
        text for text, _ in expected["latest_beam"]]

    cli.run(exporter.main, [f"--model_dir={model_dir}", "--min_length=0",
                            f"--export_dir={tmp_path / 'export'}"])
    (version,) = os.listdir(tmp_path / "export")
    served = tf.saved_model.load(str(tmp_path / "export" / version)).signatures[
        "serving_default"](inputs=tf.constant(expected["sources"]))
    assert [s.decode() for s in served["outputs"].numpy()] == [
        text for text, _ in expected["latest_beam"]]
    np.testing.assert_allclose(served["scores"].numpy(),
                               [score for _, score in expected["latest_beam"]], rtol=1e-5,
                               atol=1e-5)

    runner = Runner.from_model_dir(model_dir)
    assert_translations(runner.translator(beam_size=1, engine="ctranslate2", min_length=0)
                        .translate(expected["sources"]), expected["latest_greedy"])
    cli.run(exporter.main, [f"--model_dir={model_dir}",
                            "--format=ctranslate2", f"--export_dir={tmp_path / 'ct2'}"])
    assert "model.bin" in os.listdir(tmp_path / "ct2" / os.listdir(tmp_path / "ct2")[0])
    capsys.readouterr()


@pytest.mark.slow  # trains: ~6 s
def test_training_resumes_where_it_stopped_keeping_its_records(model_dir, tmp_path, capsys):
    with open(os.path.join(model_dir, "eval", "history.json"), encoding="utf-8") as f:
        history = json.load(f)
    code = 0
    try:
        cli.run(trainer.main, [f"--model_dir={model_dir}",
                               "--train_steps=96", "--eval_every=3", "--eval_steps=1",
                               "--eval_decode_examples=4", "--log_every=3"])
    except SystemExit as exit_info:
        code = exit_info.code
    err = capsys.readouterr().err
    assert code == 0, err
    assert "(step 90)" in err and "step 93/96" in err and "step 96/96" in err
    assert tf.train.latest_checkpoint(model_dir).endswith("ckpt-96")
    with open(os.path.join(model_dir, "hparams.json"), encoding="utf-8") as f:
        assert json.load(f)["changed_on_resume"] == [{"step": 60, "learning_rate": [1.0, 0.5]}]
    with open(os.path.join(model_dir, "eval", "history.json"), encoding="utf-8") as f:
        resumed = json.load(f)
    assert resumed[: len(history)] == history
    assert [entry["step"] for entry in resumed[len(history):]] == [93, 96]
