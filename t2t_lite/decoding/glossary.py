"""A translator's glossary: the terms of each input line that have a required translation (the
targets the search must put into the output, lexically constrained decoding), and the share of
matched terms whose translation the outputs contain (term accuracy).

The file (t2t-lite-decoder --glossary=FILE):
- UTF-8 (a byte order mark is allowed); blank lines and lines whose first non-space character
  is '#' are skipped (so a source term cannot start with '#').
- Every other line is 'source term<TAB>target term'. Each field is stripped and its runs of
  whitespace become one space; a line without exactly 2 fields, or with an empty one, is an error.
- A source term given twice with different targets is an error naming both lines (terms are
  compared as tokens, case-insensitively: "E-Mail" and "e-mail" are the same term); the same
  pair twice is kept once. A glossary without terms is an error.

Matching: a text's tokens are its maximal runs of word characters (regex \\w, Unicode) and its
single other non-space characters ("Vertrag," is "Vertrag" ","; "e-mail" is "e" "-" "mail").
A term matches where its tokens equal a run of the line's tokens, compared with str.casefold:
never inside a word ("art" is not in "start"), on tokenized and untokenized text alike; text
without spaces between words (Japanese, Chinese) must be segmented first, as a run of such
characters is one token. Left to right, at each token the longest matching term wins and
consumes its tokens (matches never overlap); a term found twice gives two matches.

Hand-written: no maintained library does token-aware, longest-first matching with these rules.
"""

import re
from typing import NamedTuple

from t2t_lite.data.corpus import read_lines
from t2t_lite.utils.errors import UserError

TOKEN = re.compile(r"\w+|[^\w\s]")


class TermMatch(NamedTuple):
    """A glossary term found in a line: its source and target as the glossary writes them, and
    the character offsets of the match (line[start:end] is the text as the line writes it)."""
    source: str
    target: str
    start: int
    end: int


def tokens(text):
    """The casefolded tokens of `text` with their offsets, as (token, start, end) triples; each
    token is casefolded after splitting, so casefolding cannot change where tokens end."""
    return [(m.group().casefold(), m.start(), m.end()) for m in TOKEN.finditer(text)]


def term_key(text):
    """The tuple of casefolded tokens that stands for `text` in every comparison."""
    return tuple(token for token, _, _ in tokens(text))


def occurs(words, key):
    """Whether the token tuple `key` (non-empty) is a contiguous run of the tuple `words`."""
    n = len(key)
    return any(words[i] == key[0] and words[i:i + n] == key for i in range(len(words) - n + 1))


def contains_term(text, term):
    """Whether `term` occurs in `text` at token boundaries, case-insensitively (an empty term
    occurs nowhere)."""
    key = term_key(term)
    return bool(key) and occurs(term_key(text), key)


class Glossary:
    """Source terms with their target terms, indexed by first token so that finding the terms
    of a line costs a dictionary look-up per token, not a scan of every term."""

    def __init__(self, entries):
        """`entries`: (source, target) pairs, normalized here; errors name 'glossary, entry N'."""
        self._fill(((n, *pair) for n, pair in enumerate(entries, 1)), "glossary", "entry")

    @classmethod
    def read(cls, path):
        """The glossary in the TSV file `path`; any mistake in it is a UserError naming the line."""
        glossary = cls.__new__(cls)
        glossary._fill(_file_entries(path), str(path), "line")
        return glossary

    def _fill(self, numbered, origin, unit):
        """Checks and indexes (number, source, target) triples; `unit` names what numbers count."""
        entries = {}  # term_key(source) -> (source, target, number)
        for number, source, target in numbered:
            where = f"{origin}, {unit} {number}"
            source, target = " ".join(source.split()), " ".join(target.split())
            for field, name in ((source, "source"), (target, "target")):
                if not field:
                    raise UserError(f"{where}: the {name} term is empty: write "
                                    "'source term<TAB>target term'")
            key = term_key(source)
            if key in entries and entries[key][1] != target:
                first, old, line = entries[key]
                raise UserError(f"{where}: source term {source!r} has target {target!r}, but "
                                f"{unit} {line} gives {first!r} the target {old!r}: keep one")
            entries.setdefault(key, (source, target, number))
        if not entries:
            raise UserError(f"{origin} has no terms: add lines 'source term<TAB>target term'")
        self._entries = {key: (source, target) for key, (source, target, _) in entries.items()}
        self._index = {}  # first token -> [(key, source, target)], longest key first
        for key, (source, target) in self._entries.items():
            self._index.setdefault(key[0], []).append((key, source, target))
        for candidates in self._index.values():
            candidates.sort(key=lambda candidate: -len(candidate[0]))

    def __len__(self):
        return len(self._entries)

    def find(self, line):
        """The terms of `line` in order, longest first at each token, never overlapping."""
        found = tokens(line)
        words = tuple(token for token, _, _ in found)
        matches, i = [], 0
        while i < len(words):
            for key, source, target in self._index.get(words[i], ()):
                if words[i:i + len(key)] == key:
                    end = i + len(key)
                    matches.append(TermMatch(source, target, found[i][1], found[end - 1][2]))
                    i = end
                    break
            else:
                i += 1
        return matches

    def constraints(self, line):
        """The target terms the output of `line` must contain: each once, in order of match."""
        return list(dict.fromkeys(match.target for match in self.find(line)))


def _file_entries(path):
    """(line number, source, target) for each term line of the glossary file `path`."""
    for number, line in enumerate(read_lines(path), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 2:
            fix = "separate the terms with a TAB" if len(fields) == 1 else "remove the extra TABs"
            raise UserError(f"{path}, line {number}: expected 'source term<TAB>target term' "
                            f"(2 TAB-separated fields), found {len(fields)}: {fix}")
        yield number, fields[0], fields[1]


def term_accuracy(sources, outputs, glossary):
    """(hits, matched terms) over a corpus: each match in a source line is a hit when its target
    occurs in that line's output (two matches of one term need it once). Term accuracy is
    hits / matched, undefined (None, not 0 or 1) when nothing matched."""
    hits = matched = 0
    for source, output in zip(sources, outputs, strict=True):
        matches = glossary.find(source)
        if matches:
            words = term_key(output)
            matched += len(matches)
            hits += sum(occurs(words, term_key(match.target)) for match in matches)
    return hits, matched
