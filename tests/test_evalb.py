"""The bracketing scorer against the C program EVALB's own output on its own sample (both
parameter files, every sentence and the summaries), and small cases worked out by hand."""

import os
import re

import pytest

from t2t_lite.evaluation import evalb
from t2t_lite.utils.errors import UserError

# EVALB is public domain; its sample and outputs are copied from ../shared/evalb_sample.
SAMPLE = os.path.join(os.path.dirname(__file__), "data", "evalb_sample")
PARAMETER_FILES = {"sample.prm": "expected.sample_prm.txt", "COLLINS.prm": "expected.collins_prm.txt"}


def sample_lines(name):
    with open(os.path.join(SAMPLE, name), encoding="utf-8") as f:
        return f.read().split("\n")[:24]


def expected_output(name):
    """EVALB's per-sentence rows and its two summary blocks, as numbers."""
    with open(os.path.join(SAMPLE, name), encoding="utf-8") as f:
        text = f.read()
    rows = [list(map(float, line.split())) for line in text.splitlines()
            if re.fullmatch(r"\s*\d+\s+\d+\s+[012]\s+.*", line)]
    blocks = []
    for block in text.split("-- ")[1:]:
        blocks.append({key.strip(): float(value) for key, value in
                       re.findall(r"^([A-Za-z0-9 ]+?)\s*=\s*([\d.]+)$", block, re.M)})
    return rows, blocks


@pytest.mark.parametrize("parameter_file", sorted(PARAMETER_FILES))
def test_scores_equal_evalbs_own_output_on_its_sample(parameter_file):
    parameters = evalb.Parameters.read(os.path.join(SAMPLE, parameter_file))
    golds, tests = sample_lines("sample.gld"), sample_lines("sample.tst")
    rows, (everything, short) = expected_output(PARAMETER_FILES[parameter_file])
    for gold, test, row in zip(golds, tests, rows):
        result = evalb.score_sentence(gold, test, parameters)
        _, length, status, _, _, matched, gold_n, test_n, _, words, tags, _ = row
        assert (result.length, result.status) == (length, status)
        if status == 0:
            assert (result.matched, result.gold_brackets, result.test_brackets, result.words,
                    result.correct_tags) == (matched, gold_n, test_n, words, tags)
    for summary, block in ((evalb.evaluate(golds, tests, parameters), everything),
                           (evalb.evaluate(golds, tests, parameters, max_length=40), short)):
        assert (summary.sentences, summary.errors, summary.skipped, summary.valid) == (
            block["Number of sentence"], block["Number of Error sentence"],
            block["Number of Skip  sentence"], block["Number of Valid sentence"])
        assert [round(x, 2) for x in (summary.recall, summary.precision, summary.f1,
                                      summary.complete_match, summary.tagging_accuracy)] == [
            block["Bracketing Recall"], block["Bracketing Precision"],
            block["Bracketing FMeasure"], block["Complete match"], block["Tagging accuracy"]]


def test_collins_parameters_are_the_collins_prm_file():
    assert evalb.Parameters.read(os.path.join(SAMPLE, "COLLINS.prm")) == evalb.COLLINS


def test_duplicate_spans_match_as_a_multiset():
    gold = "(TOP (S (NP (NP (DT a) (NN b))) (VP (VB c))))"  # NP twice over a b
    test = "(TOP (S (NP (DT a) (NN b)) (VP (VB c))))"
    result = evalb.score_sentence(gold, test)
    assert (result.gold_brackets, result.test_brackets, result.matched) == (4, 3, 3)
    summary = evalb.evaluate([gold], [test])
    assert summary.recall == pytest.approx(75.0) and summary.precision == pytest.approx(100.0)
    assert summary.f1 == pytest.approx(2 * 75 / 1.75)


def test_punctuation_at_the_edges_is_deleted_and_spans_shrink():
    # Gold's NP holds the quote and comma; test's does not: the same spans once they go.
    gold = "(TOP (S (`` ``) (NP (DT a) (NN b) (, ,)) (VP (VBD c) (PRT (RP up))) (. .)))"
    test = "(TOP (S (`` ``) (NP (DT a) (NN b)) (, ,) (VP (VBD c) (ADVP (RP up))) (. .)))"
    result = evalb.score_sentence(gold, test)
    assert (result.words, result.gold_brackets, result.matched) == (4, 4, 4)  # PRT = ADVP
    assert result.length == 7


def test_a_length_or_word_mismatch_is_an_error_left_out_of_the_totals():
    gold = "(TOP (S (NP (DT a) (NN b)) (VP (VB c))))"
    short = "(TOP (S (NP (DT a)) (VP (VB c))))"
    other = "(TOP (S (NP (DT a) (NN x)) (VP (VB c))))"
    summary = evalb.evaluate([gold, gold, gold], [short, other, gold])
    assert (summary.errors, summary.valid, summary.f1) == (2, 1, 100.0)
    assert "length unmatch (3|2)" in evalb.score_sentence(gold, short).error
    with pytest.raises(UserError, match="2 gold trees but 1 test trees"):
        evalb.evaluate([gold, gold], [gold])
