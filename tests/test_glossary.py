"""The glossary (t2t_lite.decoding.glossary): its file format and errors, term matching at token
boundaries (longest first, never overlapping) and term accuracy. Pure Python, no TensorFlow."""

import re

import pytest

from t2t_lite.decoding.glossary import Glossary, TermMatch, contains_term, term_accuracy
from t2t_lite.utils.errors import UserError


def write(tmp_path, text, name="glossary.tsv"):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


def found(glossary, line):
    """(text as written in the line, target) for each match, checking the offsets on the way."""
    return [(line[m.start:m.end], m.target) for m in glossary.find(line)]


def test_longest_term_wins():
    glossary = Glossary([("New York", "Nueva York"), ("New York City", "Ciudad de Nueva York"),
                         ("York", "Iork")])
    assert found(glossary, "I love New York City.") == [("New York City", "Ciudad de Nueva York")]
    assert found(glossary, "I love New York.") == [("New York", "Nueva York")]
    assert found(glossary, "York City") == [("York", "Iork")]


def test_matches_do_not_overlap():
    glossary = Glossary([("a b", "AB"), ("b c", "BC"), ("c d", "CD")])
    assert found(glossary, "a b c") == [("a b", "AB")]  # "c" alone matches nothing
    assert found(glossary, "a b c d") == [("a b", "AB"), ("c d", "CD")]
    assert found(glossary, "x b c") == [("b c", "BC")]


def test_case_insensitive_with_targets_as_written():
    glossary = Glossary([("vertrag", "Contract"), ("STRASSE", "street")])
    assert glossary.find("Der VERTRAG gilt.") == [TermMatch("vertrag", "Contract", 4, 11)]
    assert found(glossary, "Die Straße.") == [("Straße", "street")]  # casefold: ß is ss
    assert glossary.constraints("der Vertrag") == ["Contract"]


def test_terms_match_at_token_boundaries_only():
    glossary = Glossary([("art", "Kunst")])
    for line in ("start", "arts", "the artist", "Art_deco"):
        assert glossary.find(line) == [], line
    assert found(glossary, "modern art.") == [("art", "Kunst")]
    assert found(glossary, "(art)") == [("art", "Kunst")]
    assert found(glossary, "pop-art") == [("art", "Kunst")]
    assert found(glossary, "ART") == [("ART", "Kunst")]


def test_punctuation_inside_terms_is_tokens():
    glossary = Glossary([("e-mail", "E-Mail"), ("Vertrag", "contract")])
    assert found(glossary, "Send an e - mail, and the Vertrag,") == [
        ("e - mail", "E-Mail"), ("Vertrag", "contract")]
    assert glossary.find("email") == []


def test_term_at_the_end_of_the_line():
    glossary = Glossary([("signed", "unterschrieben"), ("the contract", "den Vertrag")])
    line = "we signed the contract"
    assert glossary.find(line) == [TermMatch("signed", "unterschrieben", 3, 9),
                                   TermMatch("the contract", "den Vertrag", 10, 22)]
    assert glossary.find(line + "!")[-1] == TermMatch("the contract", "den Vertrag", 10, 22)
    assert found(glossary, "the contract") == [("the contract", "den Vertrag")]


def test_term_twice_gives_two_matches_and_one_constraint():
    glossary = Glossary([("contract", "Vertrag"), ("deal", "Geschäft")])
    line = "The contract is a deal, a contract."
    assert glossary.find(line) == [TermMatch("contract", "Vertrag", 4, 12),
                                   TermMatch("deal", "Geschäft", 18, 22),
                                   TermMatch("contract", "Vertrag", 26, 34)]
    assert glossary.constraints(line) == ["Vertrag", "Geschäft"]
    assert glossary.constraints("nothing here") == []


def test_distinct_terms_with_the_same_target_give_one_constraint():
    glossary = Glossary([("agreement", "Vertrag"), ("contract", "Vertrag"), ("sign", "zeichnen")])
    assert len(glossary) == 3
    assert glossary.constraints("sign the contract, the agreement") == ["zeichnen", "Vertrag"]


def test_fields_are_normalized(tmp_path):
    path = write(tmp_path, "\ufeff# comment\n\n  \t \n New   York \t  Nueva  \u00a0 York  \n"
                 "   # indented comment\nsign\tunterschreiben\r\n")
    glossary = Glossary.read(path)
    assert len(glossary) == 2
    assert glossary.find("in new york") == [TermMatch("New York", "Nueva York", 3, 11)]
    assert glossary.constraints("to sign") == ["unterschreiben"]  # no "\r" kept
    assert len(Glossary([("  a \t b ", " x  y ")])) == 1
    assert Glossary([("  a \t b ", " x  y ")]).find("a b") == [TermMatch("a b", "x y", 0, 3)]


def test_same_pair_twice_is_kept_once(tmp_path):
    glossary = Glossary.read(write(tmp_path, "Vertrag\tcontract\nvertrag\tcontract\n"
                                             "VERTRAG  \t contract\n"))
    assert len(glossary) == 1
    assert glossary.find("Vertrag") == [TermMatch("Vertrag", "contract", 0, 7)]


def test_pre_tokenized_japanese():
    glossary = Glossary([("契約", "contract"), ("署名 した", "signed")])
    line = "彼 は 契約 に 署名 した"
    assert glossary.find(line) == [TermMatch("契約", "contract", 4, 6),
                                   TermMatch("署名 した", "signed", 9, 14)]
    assert glossary.find("彼は契約に署名した") == []  # unsegmented: one token


@pytest.mark.parametrize("text, line, problem", [
    ("ok\tfine\nno tab here\n", 2, "found 1"),
    ("a\tb\tc\n", 1, "found 3"),
    ("# c\n \tb\n", 2, "source term is empty"),
    ("a\t  \n", 1, "target term is empty"),
])
def test_bad_lines(tmp_path, text, line, problem):
    path = write(tmp_path, text)
    with pytest.raises(UserError) as error:
        Glossary.read(path)
    message = str(error.value)
    assert message.startswith(f"{path}, line {line}: ") and problem in message
    assert "\n" not in message


def test_conflicting_duplicate_names_both_lines(tmp_path):
    path = write(tmp_path, "# terms\nVertrag\tcontract\nsign\tzeichnen\nvertrag \tagreement\n")
    with pytest.raises(UserError) as error:
        Glossary.read(path)
    message = str(error.value)
    assert message.startswith(f"{path}, line 4: ") and "line 2" in message
    assert "'contract'" in message and "'agreement'" in message and "\n" not in message
    with pytest.raises(UserError, match=r"^glossary, entry 2: .*entry 1"):
        Glossary([("E-Mail", "email"), ("e - mail", "mail")])


def test_empty_glossary(tmp_path):
    path = write(tmp_path, "# only a comment\n\n   \n")
    with pytest.raises(UserError, match="has no terms") as error:
        Glossary.read(path)
    assert str(error.value).startswith(str(path)) and "\n" not in str(error.value)
    with pytest.raises(UserError, match="^glossary has no terms"):
        Glossary([])


def test_unreadable_files(tmp_path):
    path = write(tmp_path, b"a\tb\nStra\xdfe\tstreet\n")
    with pytest.raises(UserError, match="^" + re.escape(f"{path}, line 2: invalid UTF-8")) as error:
        Glossary.read(path)
    assert "\n" not in str(error.value)
    missing = tmp_path / "missing.tsv"
    with pytest.raises(UserError, match="^" + re.escape(f"cannot read {missing}")) as error:
        Glossary.read(missing)
    assert "\n" not in str(error.value)


def test_contains_term():
    assert contains_term("Der Vertrag, bitte.", "vertrag")
    assert contains_term("send an E-Mail", "e-mail")
    assert contains_term("彼 は 契約 に", "契約")
    assert not contains_term("Vertragsende", "Vertrag")
    assert not contains_term("the contract", "contract law")
    assert not contains_term("anything", "  ")


def test_term_accuracy():
    glossary = Glossary([("contract", "Vertrag"), ("sign", "unterschreiben"), ("art", "Kunst")])
    sources = ["Sign the contract.", "A contract is a contract.", "no terms", "modern art"]
    outputs = ["Den Vertrag unterschreiben.",  # 2 of 2
               "Ein vertrag ist ein Abkommen.",  # 2 of 2: one "Vertrag" serves both matches
               "Vertrag",  # no matches in the source: counts nothing
               "Kunstwerk der Moderne"]  # "Kunst" only inside a word: not a hit
    assert term_accuracy(sources, outputs, glossary) == (4, 5)
    assert term_accuracy(["Sign it."], ["Zeichne es."], glossary) == (0, 1)
    assert term_accuracy(["no terms", "here"], ["Vertrag", "Kunst"], glossary) == (0, 0)
    assert term_accuracy([], [], glossary) == (0, 0)
