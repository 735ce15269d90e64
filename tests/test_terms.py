"""t2t-lite-decoder --glossary and --constraints on the trained reversal model: every output
contains its line's target terms, lines without any translate as without them, term accuracy
is counted as the glossary module counts it, and the flags refuse what cannot work in one
line."""

import io
import re
import sys

import pytest
from cli_output import error_lines, run_cli

from t2t_lite.cli import decoder
from t2t_lite.decoding.glossary import Glossary, contains_term, term_accuracy

# Source terms of one and two tokens; their targets are digits the reversal would not write.
GLOSSARY = "# terms\n2\t5\n7 8\t9 9\n"
SOURCES = ["1 2 3", "7 8 4", "4 2 6 2", "3 4", "", "6 7 8 2 1"]


def decode(capsys, model_dir, *flags):
    return run_cli(decoder.main, [f"--model_dir={model_dir}", *flags], capsys)


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def translator(trained_reverse):
    return trained_reverse.runner.translator(beam_size=4)


def test_a_glossary_puts_its_target_terms_into_every_output(trained_reverse, translator,
                                                           tmp_path, capsys):
    """Each output holds the target of each term of its line, where the model alone writes
    none; a line without terms translates as without the glossary; the log's term accuracy
    is glossary.term_accuracy's count, and 0 of those terms without the glossary."""
    glossary_path = write(tmp_path / "glossary.tsv", GLOSSARY)
    source = write(tmp_path / "src.txt", "".join(f"{s}\n" for s in SOURCES))
    output = tmp_path / "out.txt"
    code, _, err = decode(capsys, trained_reverse.model_dir, f"--decode_from_file={source}",
                          f"--decode_to_file={output}", f"--glossary={glossary_path}",
                          "--beam_size=4")
    assert code == 0, err
    outputs = output.read_text(encoding="utf-8").splitlines()
    glossary = Glossary.read(glossary_path)
    plain = [t.text for t in translator.translate(SOURCES)]
    hits, matched = term_accuracy(SOURCES, outputs, glossary)
    assert matched == 6 and hits == matched
    assert term_accuracy(SOURCES, plain, glossary) == (0, matched)
    for source, text, alone in zip(SOURCES, outputs, plain):
        for match in glossary.find(source):
            assert contains_term(text, match.target), (source, text)
        if not glossary.find(source):
            assert text == alone
    assert "term accuracy 100.0 (6 of 6 glossary terms in the outputs)" in err
    assert "6 of 6 outputs contain all the target phrases of their line" in err


def test_constraints_come_from_each_lines_tab_separated_fields(trained_reverse, translator,
                                                                tmp_path, capsys, monkeypatch):
    """`source<TAB>phrase...` lines, from a file and typed on stdin: each output contains its
    phrases (with the glossary's too), and equals the translator's constrained output; with
    --with_alignments, each output's alignment is the translator's for that output."""
    lines = ["1 2 3\t0 0", "5 6\t", "8 9\t1 1\t4", "7 8"]
    source = write(tmp_path / "src.txt", "".join(f"{line}\n" for line in lines))
    glossary_path = write(tmp_path / "glossary.tsv", GLOSSARY)
    code, out, err = decode(capsys, trained_reverse.model_dir, f"--decode_from_file={source}",
                            "--constraints", f"--glossary={glossary_path}", "--beam_size=4",
                            "--with_alignments")
    assert code == 0, err
    wanted = [["5", "0 0"], [], ["1 1", "4"], ["9 9"]]  # the glossary's first
    outputs, alignments = zip(*(line.split("\t") for line in out.splitlines()))
    sources = [line.split("\t")[0] for line in lines]
    vocabulary = translator.vocabulary
    assert list(alignments) == translator.alignments(
        [vocabulary.encode(s) for s in sources], [vocabulary.encode(o) for o in outputs])
    outputs = list(outputs)
    for text, phrases in zip(outputs, wanted):
        assert all(contains_term(text, phrase) for phrase in phrases), (text, phrases)
    expected = translator.translate_constrained([vocabulary.encode(s) for s in sources],
                                                wanted)
    assert outputs == [best[0].text for best in expected]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(
        "".join(f"{line}\n" for line in lines).encode()), encoding="utf-8"))
    code, out, err = decode(capsys, trained_reverse.model_dir, "--constraints",
                            f"--glossary={glossary_path}", "--beam_size=4")
    assert code == 0 and out.splitlines() == outputs, err


def test_split_reports_term_accuracy_beside_its_metrics(trained_reverse, tmp_path, capsys):
    """--split=test with a glossary: its summary and metrics have the term accuracy of the
    written hypotheses against the split's sources, as glossary.term_accuracy counts it."""
    glossary_path = write(tmp_path / "glossary.tsv", "3\t7 7\n")
    output = tmp_path / "test.out"
    code, out, err = decode(capsys, trained_reverse.model_dir, "--split=test",
                            f"--glossary={glossary_path}", f"--decode_to_file={output}")
    assert code == 0, err
    sources = (tmp_path / "test.out.src").read_text(encoding="utf-8").splitlines()
    hypotheses = output.read_text(encoding="utf-8").splitlines()
    hits, matched = term_accuracy(sources, hypotheses, Glossary.read(glossary_path))
    assert matched > 0 and hits == matched
    summary = out.splitlines()[-1]
    assert "sequence_accuracy" in summary and f"term accuracy 100.0 ({hits} of {matched}" in summary


@pytest.mark.parametrize("flags, message", [
    (["--engine=ctranslate2", "--glossary=G"],
     "--glossary needs the tensorflow or jax engine: CTranslate2 has no lexically constrained"),
    (["--constraints", "--sampling_topk=5"], "--constraints needs beam search: drop "
     "--sampling_topk"),
    (["--constraints", "--split=dev"], "--constraints reads each line's phrases from"),
    (["--glossary=BAD"], "BAD, line 2: expected 'source term<TAB>target term' (2 TAB-separated "
     "fields), found 1: separate the terms with a TAB"),
    (["--glossary=MISSING"], "cannot read MISSING"),
])
def test_glossary_mistakes_are_one_line_errors(trained_reverse, tmp_path, capsys, flags, message):
    names = {"G": write(tmp_path / "g.tsv", GLOSSARY),
             "BAD": write(tmp_path / "bad.tsv", "2\t5\n3 4\n"),
             "MISSING": str(tmp_path / "missing.tsv")}
    flags = [re.sub("|".join(names), lambda m: names[m.group(0)], flag) for flag in flags]
    message = re.sub("|".join(names), lambda m: names[m.group(0)], message)
    if not any(flag.startswith("--split") for flag in flags):
        flags.append(f"--decode_from_file={write(tmp_path / 'src.txt', '1 2' + chr(10))}")
    code, _, err = decode(capsys, trained_reverse.model_dir, *flags)
    errors = error_lines(err)
    assert code == 2 and len(errors) == 1 and message in errors[0], err
