"""Ensembles (`t2t-lite-decoder --model_dir A B ...`): the ensemble of a model with itself is the
model; an ensemble of two different models is searched exactly (against an exhaustive search
over a tiny vocabulary, with the ensemble's distribution computed independently here); the
decoder refuses what an ensemble cannot do."""

import json
import shutil

import keras
import numpy as np
import pytest
from cli_output import error_lines, run_cli
from keras import ops
from reference_decoding import as_sequence, exhaustive_search, reference_greedy_search

from t2t_lite import registry
from t2t_lite.config import EOS_ID, PAD_ID, HParams
from t2t_lite.decoding.ensemble import Ensemble
from t2t_lite.decoding.scoring import token_log_probs
from t2t_lite.decoding.search import SearchSettings, beam_search, greedy_search
from t2t_lite.models.transformer import Transformer

pytestmark = pytest.mark.filterwarnings("ignore:You are using a softmax over axis -1")

SOURCES = ["1 2 3", "4 5 6 7 0", "9 8 7 6 5 4 3 2", "", "6 2", "3 3 3 1 1 1 2 2"]


def random_model(seed, vocab_size=5):
    keras.utils.set_random_seed(seed)
    hparams = HParams(num_encoder_layers=1, num_decoder_layers=2, d_model=16, d_ff=32,
                      num_heads=2, dropout=0.0)
    return Transformer(hparams, vocab_size).create_variables()


def log_softmax(logits):
    logits = np.asarray(logits, "float64")
    return logits - np.logaddexp.reduce(logits, axis=-1, keepdims=True)


class GeometricMean:
    """The ensemble's definition, for the reference decoders (which renormalize what a model
    returns): each model's log-probabilities from its own forward pass, averaged."""

    def __init__(self, models):
        self.models = models
        self.vocab_size = models[0].vocab_size

    def __call__(self, features):
        return np.mean([log_softmax(model(features)) for model in self.models], axis=0)


def test_an_ensemble_of_a_model_with_itself_is_that_model(trained_reverse):
    """Beam and greedy translations and scores, and --score's token log-probabilities."""
    runner = trained_reverse.runner
    model = runner.restored_model()
    pair = Ensemble([model, model])
    for beam_size in (1, 4):
        alone = runner.translator(model, beam_size=beam_size).translate(SOURCES)
        together = runner.translator(pair, beam_size=beam_size).translate(SOURCES)
        assert [t.text for t in together] == [t.text for t in alone]
        np.testing.assert_allclose([t.score for t in together], [t.score for t in alone],
                                   atol=1e-5)
    inputs = np.array([[3, 4, 5, EOS_ID]], "int32")
    targets = np.array([[5, 4, 3, EOS_ID]], "int32")
    np.testing.assert_allclose(token_log_probs(pair, inputs, targets),
                               token_log_probs(model, inputs, targets), atol=1e-5)


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_an_ensemble_of_two_models_is_searched_exactly(alpha):
    """3 symbols, limits of 4 and 3 tokens: a 27-wide beam over the ensemble of two random
    models finds the exact top 27 of every hypothesis under their averaged log-probabilities
    (computed here from each model's own forward pass), and greedy search the reference's;
    each model alone ranks differently."""
    models = [random_model(0), random_model(1)]
    ensemble, reference = Ensemble(models), GeometricMean(models)
    inputs = np.array([[2, 3, EOS_ID], [4, EOS_ID, PAD_ID]], "int32")
    ids, scores = beam_search(ensemble, inputs,
                              SearchSettings(beam_size=27, alpha=alpha, extra_length=1))
    greedy_ids, greedy_scores = greedy_search(ensemble, inputs, SearchSettings(1, alpha, 1))
    for row in range(len(inputs)):
        expected = exhaustive_search(reference, inputs[row], alpha, extra_length=1, top=27)
        found = [as_sequence(hypothesis) for hypothesis in ops.convert_to_numpy(ids[row])]
        assert found == [sequence for sequence, _ in expected]
        np.testing.assert_allclose(ops.convert_to_numpy(scores[row]),
                                   [score for _, score in expected], rtol=1e-4, atol=1e-5)
        singles = [exhaustive_search(m, inputs[row], alpha, 1, 27) for m in models]
        assert all([s for s, _ in single] != found for single in singles)
        sequence, score = reference_greedy_search(reference, inputs[row], alpha, 1)
        assert as_sequence(ops.convert_to_numpy(greedy_ids[row])) == sequence
        assert float(greedy_scores[row]) == pytest.approx(score, rel=1e-4, abs=1e-5)


def decode(capsys, *flags):
    from t2t_lite.cli import decoder

    return run_cli(decoder.main, list(flags), capsys)


def test_the_decoder_ensembles_model_dirs_and_refuses_what_it_cannot(trained_reverse, tmp_path,
                                                                     capsys):
    """`--model_dir A A` writes what `--model_dir A` does; another vocabulary, another engine,
    explaining (alignments, attention) and one --checkpoint_path for several are one line."""
    # (a damaged member: test_a_damaged_member_names_the_checkpoints_to_ensemble_instead)
    source = tmp_path / "src.txt"
    source.write_text("".join(f"{s}\n" for s in SOURCES))
    model_dir = trained_reverse.model_dir
    code, alone, err = decode(capsys, f"--model_dir={model_dir}", f"--decode_from_file={source}")
    assert code == 0, err
    code, twice, err = decode(capsys, "--model_dir", model_dir, model_dir,
                              f"--decode_from_file={source}")
    assert code == 0 and twice == alone, err

    other = tmp_path / "other"
    shutil.copytree(model_dir, other, ignore=shutil.ignore_patterns("ckpt-*", "ctranslate2"))
    record = json.loads((other / "problem.json").read_text())
    fingerprint = registry.problem("test_short_reverse_12").vocabulary(
        record["data_dir"]).fingerprint()  # as a model of that problem records its vocabulary
    (other / "problem.json").write_text(json.dumps(
        {**record, "problem": "test_short_reverse_12", "vocabulary": fingerprint}))
    for flags, message in [
        ([], f"{other} has another vocabulary than {model_dir}: an ensemble averages"),
        (["--engine=ctranslate2"], "an ensemble (several --model_dir) needs the tensorflow or "
         "jax engine: CTranslate2 has no ensembles"),
        (["--with_alignments"], "--with_alignments explains one model: pass one --model_dir"),
        ([f"--attention_dir={tmp_path}/a"], "--attention_dir explains one model"),
        ([f"--checkpoint_path={model_dir}"], "--checkpoint_path names a checkpoint for each "
         "--model_dir, in their order: 1 for 2"),
    ]:
        dirs = [model_dir, str(other)] if not flags else [model_dir, model_dir]
        code, _, err = decode(capsys, "--model_dir", *dirs, f"--decode_from_file={source}",
                              *flags)
        errors = error_lines(err)
        assert code == 2 and len(errors) == 1 and message in errors[0], err


def test_a_damaged_member_names_the_checkpoints_to_ensemble_instead(trained_reverse, tmp_path,
                                                                    capsys):
    """A member whose latest checkpoint is damaged: one line naming its newest intact one and
    the --checkpoint_path that takes one for each --model_dir (it offered a --checkpoint_path
    that ensembles refused); with them, the ensemble of that checkpoint with itself translates
    as that checkpoint alone."""
    import glob
    import os

    source = tmp_path / "src.txt"
    source.write_text("".join(f"{s}\n" for s in SOURCES))
    copy = str(tmp_path / "copy")
    shutil.copytree(os.path.dirname(trained_reverse.model_dir), copy,
                    ignore=shutil.ignore_patterns("best", "data", "eval", "train"))
    steps = sorted(int(path.rsplit("-", 1)[1].split(".")[0])
                   for path in glob.glob(f"{copy}/ckpt-*.index"))
    (data,) = glob.glob(f"{copy}/ckpt-{steps[-1]}.data-*")
    with open(data, "r+b") as f:
        f.truncate(os.path.getsize(data) // 2)
    older = f"{copy}/ckpt-{steps[-2]}"
    code, out, err = decode(capsys, "--model_dir", copy, copy, f"--decode_from_file={source}")
    (line,) = error_lines(err)
    assert code == 2 and out == "" and line.startswith(
        f"t2t-lite: error: checkpoint {copy}/ckpt-{steps[-1]} is damaged ("), err
    assert line.endswith(": pass --checkpoint_path with a checkpoint for each --model_dir, in "
                         f"their order ({older}, the newest intact one, for {copy})"), line

    code, alone, err = decode(capsys, f"--model_dir={copy}", f"--checkpoint_path={older}",
                              f"--decode_from_file={source}")
    assert code == 0, err
    code, twice, err = decode(capsys, "--model_dir", copy, copy, "--checkpoint_path", older,
                              older, f"--decode_from_file={source}")
    assert code == 0 and twice == alone and len(alone.splitlines()) == len(SOURCES), err
