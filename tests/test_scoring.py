"""Scoring given translations (`t2t-lite-decoder --score`): each target token's log-probability
given its source from one teacher-forced pass, checked against another path, the beam search's
own scores of its outputs (cached step-by-step decoding); the same on the CTranslate2 engine;
and a file whose bad pairs keep their lines."""

import numpy as np
from cli_output import error_lines, run_cli

SOURCES = ["1 2 3", "4 5 6 7 0", "9 8 7 6 5 4 3 2", "6 2", "5", "3 3 3 1 1 1 2 2"]


def decode(capsys, model_dir, *flags):
    from t2t_lite.cli import decoder

    return run_cli(decoder.main, [f"--model_dir={model_dir}", *flags], capsys)


def rows(out):
    """(score, [token log-probabilities], error) of each output line."""
    parsed = []
    for line in out.splitlines():
        score, log_probs, error = line.split("\t")
        parsed.append((float(score), [float(p) for p in log_probs.split()], error))
    return parsed


def pairs_file(path, sources, targets):
    path.write_text("".join(f"{s}\t{t}\n" for s, t in zip(sources, targets)))
    return path


def beam_outputs(trained_reverse, tmp_path, **decoding):
    """The beam search's translations of SOURCES, and a TSV file of the pairs."""
    translations = trained_reverse.runner.translator(beam_size=4, **decoding).translate(SOURCES)
    assert all(t.text for t in translations)
    return translations, pairs_file(tmp_path / "pairs.tsv", SOURCES,
                                    [t.text for t in translations])


def test_scores_are_those_the_beam_search_gave_its_outputs(trained_reverse, tmp_path, capsys):
    """Normalized by GNMT's penalty, the scores of the search's own outputs are the scores it
    reported; unnormalized, each is the sum of its tokens' log-probabilities (EOS included), and
    the mean per token is that sum over their number."""
    translations, pairs = beam_outputs(trained_reverse, tmp_path)
    code, out, err = decode(capsys, trained_reverse.model_dir, "--score",
                            f"--decode_from_file={pairs}", "--score_normalize=gnmt")
    assert code == 0, err
    gnmt = rows(out)
    np.testing.assert_allclose([score for score, _, _ in gnmt],
                               [t.score for t in translations], atol=1e-4, rtol=1e-5)
    assert [error for _, _, error in gnmt] == [""] * len(SOURCES)

    code, out, err = decode(capsys, trained_reverse.model_dir, "--score",
                            f"--decode_from_file={pairs}")
    plain = rows(out)
    for (score, log_probs, _), translation in zip(plain, translations):
        assert len(log_probs) == len(translation.text.split()) + 1
        assert max(log_probs) <= 0 and abs(score - sum(log_probs)) < 1e-5 * len(log_probs)
    code, out, err = decode(capsys, trained_reverse.model_dir, "--score",
                            f"--decode_from_file={pairs}", "--score_normalize=length")
    np.testing.assert_allclose([score for score, _, _ in rows(out)],
                               [score / len(p) for score, p, _ in plain], atol=2e-6)


def test_scores_are_the_models_forward_pass_and_the_unpenalized_search_score(
        trained_reverse, tmp_path, capsys):
    """Per token, the log-softmax (in float64, here) of the model's logits for each pair alone;
    summed, the score beam search with alpha 0 (no length penalty) reports for its outputs."""
    from t2t_lite.config import EOS_ID

    runner = trained_reverse.runner
    translations, pairs = beam_outputs(trained_reverse, tmp_path, alpha=0.0)
    code, out, err = decode(capsys, trained_reverse.model_dir, "--score",
                            f"--decode_from_file={pairs}")
    assert code == 0, err
    scored = rows(out)
    np.testing.assert_allclose([score for score, _, _ in scored],
                               [t.score for t in translations], atol=1e-4, rtol=1e-5)
    model, vocabulary = runner.restored_model(), runner.vocabulary
    for source, translation, (_, log_probs, _) in zip(SOURCES, translations, scored):
        target = vocabulary.encode(translation.text) + [EOS_ID]
        logits = model({"inputs": np.array([vocabulary.encode(source) + [EOS_ID]], "int32"),
                        "targets": np.array([target], "int32")}).numpy()[0].astype("float64")
        logits -= logits.max(-1, keepdims=True)
        expected = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        np.testing.assert_allclose(log_probs, expected[np.arange(len(target)), target],
                                   atol=1e-5)


def test_the_ctranslate2_engine_scores_as_tensorflow(trained_reverse, tmp_path, capsys):
    """Parallel files this time; every token's log-probability to float32 accuracy."""
    translations, _ = beam_outputs(trained_reverse, tmp_path)
    sources, targets = tmp_path / "sources.txt", tmp_path / "targets.txt"
    sources.write_text("".join(f"{s}\n" for s in SOURCES))
    # Not the model's outputs: another input's, so that some tokens are unlikely.
    targets.write_text("".join(f"{t.text}\n" for t in translations[1:] + translations[:1]))
    scored = {}
    for engine in ("tensorflow", "ctranslate2"):
        code, out, err = decode(capsys, trained_reverse.model_dir, "--score",
                                f"--decode_from_file={sources}", f"--score_targets={targets}",
                                f"--engine={engine}")
        assert code == 0, err
        scored[engine] = rows(out)
    for (score, log_probs, _), (expected_score, expected, _) in zip(scored["ctranslate2"],
                                                                    scored["tensorflow"]):
        np.testing.assert_allclose(log_probs, expected, atol=1e-4)
        assert abs(score - expected_score) < 1e-3
    # Unlikely tokens were compared too (the least likely: -4.86 measured).
    assert min(min(p) for _, p, _ in scored["tensorflow"]) < -3


def test_pairs_that_cannot_be_scored_keep_their_lines(trained_reverse, tmp_path, capsys):
    """An empty side, a token the vocabulary lacks, a side longer than the model reads: score
    nan and the reason, and every other line scored as it is alone."""
    hparams = trained_reverse.runner.hparams
    too_long = " ".join(["1"] * (hparams.max_length + hparams.extra_length))
    good = [("1 2 3", "3 2 1"), ("6 2", "2 6")]
    bad = [("", "1"), ("4 5", ""), ("1 x", "1"), (too_long, "1"), ("1", too_long)]
    lines = [good[0], *bad[:3], good[1], *bad[3:]]
    pairs = pairs_file(tmp_path / "pairs.tsv", *zip(*lines))
    code, out, err = decode(capsys, trained_reverse.model_dir, "--score",
                            f"--decode_from_file={pairs}")
    assert code == 0, err
    scored = rows(out)
    assert len(scored) == len(lines)
    errors = [error for _, _, error in scored]
    assert errors[1] == errors[2] == "an empty source or target"
    assert "'x' is not a symbol" in errors[3]
    assert errors[5].startswith("the source has") and errors[6].startswith("the target has")
    assert all(np.isnan(scored[i][0]) and not scored[i][1] for i in (1, 2, 3, 5, 6))
    assert "5 of 7 pairs could not be scored" in err

    alone = pairs_file(tmp_path / "alone.tsv", *zip(*good))
    _, out, _ = decode(capsys, trained_reverse.model_dir, "--score",
                       f"--decode_from_file={alone}")
    assert [scored[0], scored[4]] == rows(out)


def test_scoring_mistakes_are_one_line(trained_reverse, tmp_path, capsys):
    sources, targets = tmp_path / "sources.txt", tmp_path / "targets.txt"
    sources.write_text("1 2\n3\n")
    targets.write_text("2 1\n")
    model_dir = trained_reverse.model_dir
    for flags, message in [
            (["--score"], "--score needs --decode_from_file"),
            ([f"--decode_from_file={sources}", f"--score_targets={targets}"],
             "--score_targets and --score_normalize need --score"),
            (["--score", f"--decode_from_file={sources}", f"--score_targets={targets}"],
             f"{sources} has 2 lines but {targets} has 1"),
            (["--score", f"--decode_from_file={sources}"],
             "expected source<TAB>target, found 1 tab-separated columns"),
            (["--score", f"--decode_from_file={sources}", "--n_best=2"],
             "drop --decode_reference, --n_best and --attention_dir")]:
        code, out, err = decode(capsys, model_dir, *flags)
        (line,) = error_lines(err)
        assert code == 2 and out == "" and message in line, (flags, err)
