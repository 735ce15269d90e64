"""Bracketing scores exactly as EVALB (Sekine & Collins 1997) computes them.

Written here because no maintained Python package implements EVALB's rules (COLLINS.prm's label
deletions, its word-level error checks, ADVP = PRT) to the digit; tests compare with the C
program's own output on its sample. The rules, as in evalb.c:
- a tree is read as EVALB reads a line: `(LABEL word)` is a terminal, any other bracket a
  constituent spanning the terminals inside it; terminals whose label is in DELETE_LABEL are
  dropped with their word (so spans shrink), and DELETE_LABEL_FOR_LENGTH terminals do not count
  for the length cut-off;
- a test tree without words is skipped; one whose word count or words (up to EQ_WORD) differ
  from the gold tree's is an error; both are left out of the totals;
- constituent labels are cut at their first `-` or `=` (NP-SBJ-1 -> NP); constituents with
  DELETE_LABEL labels or without words are not counted; the rest are matched as a multiset of
  (label up to EQ_LABEL, start, end);
- recall, precision and tagging accuracy are totals over the valid sentences, not averages.
"""

import dataclasses
import re

from t2t_lite.utils.errors import UserError

_TOKEN = re.compile(r"\(|\)|[^\s()]+")


@dataclasses.dataclass(frozen=True)
class Parameters:
    """The settings of an EVALB parameter file that change the scores."""

    labeled: bool = True
    delete_labels: frozenset = frozenset()
    delete_labels_for_length: frozenset = frozenset()
    equal_labels: tuple = ()  # pairs of labels counted as the same
    equal_words: tuple = ()
    cutoff_length: int = 40

    @classmethod
    def read(cls, path):
        """The parameters of an EVALB .prm file."""
        settings = {"delete_labels": set(), "delete_labels_for_length": set(),
                    "equal_labels": [], "equal_words": []}
        keys = {"DELETE_LABEL": "delete_labels",
                "DELETE_LABEL_FOR_LENGTH": "delete_labels_for_length"}
        pairs = {"EQ_LABEL": "equal_labels", "EQ_WORD": "equal_words"}
        with open(path, encoding="utf-8") as f:
            for line in f:
                fields = line.split()
                if len(line.rstrip()) < 3 or line.startswith("#") or len(fields) < 2:
                    continue
                key, values = fields[0], fields[1:]
                if key in keys:
                    settings[keys[key]].add(values[0])
                elif key in pairs and len(values) == 2:
                    settings[pairs[key]].append(tuple(values))
                elif key == "LABELED":
                    settings["labeled"] = values[0] != "0"
                elif key == "CUTOFF_LEN":
                    settings["cutoff_length"] = int(values[0])
        return cls(**{k: frozenset(v) if isinstance(v, set) else
                      tuple(v) if isinstance(v, list) else v for k, v in settings.items()})

    def same_label(self, a, b):
        return a == b or (a, b) in self.equal_labels or (b, a) in self.equal_labels

    def same_word(self, a, b):
        return a == b or (a, b) in self.equal_words or (b, a) in self.equal_words

    def canonical_label(self, label):
        """A representative of the labels EQ_LABEL makes equal to `label`."""
        for a, b in self.equal_labels:
            if label in (a, b):
                return min(a, b)
        return label


# COLLINS.prm: the parameters Penn Treebank parsing results are reported with.
COLLINS = Parameters(
    delete_labels=frozenset({"TOP", "-NONE-", ",", ":", "``", "''", "."}),
    delete_labels_for_length=frozenset({"-NONE-"}), equal_labels=(("ADVP", "PRT"),))


@dataclasses.dataclass
class _Reading:
    words: list
    tags: list
    brackets: list  # (label, start, end), before deletions by label
    length: int  # words not in DELETE_LABEL_FOR_LENGTH (deleted words included)


def _read(tree, parameters):
    """A bracketed tree as EVALB's read_line sees it; malformed text raises ValueError."""
    tokens = _TOKEN.findall(tree)
    words, tags, brackets, stack = [], [], [], []
    length = i = 0
    while i < len(tokens):
        token = tokens[i]
        if token == ")":
            if not stack:
                raise ValueError("too many closing brackets")
            label, start = stack.pop()
            brackets.append((label, start, len(words)))
            i += 1
        elif token == "(":
            label = tokens[i + 1] if i + 1 < len(tokens) and tokens[i + 1] not in "()" else ""
            i += 2 if label else 1
            if i + 1 < len(tokens) and tokens[i] not in "()" and tokens[i + 1] == ")":
                if label not in parameters.delete_labels_for_length:
                    length += 1
                if label not in parameters.delete_labels:
                    words.append(tokens[i])
                    tags.append(label)
                i += 2
            elif i < len(tokens) and tokens[i] not in "()":
                raise ValueError("more than two elements in a bracket")
            else:
                stack.append((label, len(words)))
        else:
            raise ValueError(f"'{token}' outside a bracket")
    if stack:
        raise ValueError("too many opening brackets")
    return _Reading(words, tags, brackets, length)


def _counted_brackets(reading, parameters):
    """The multiset of brackets EVALB counts: labels cut at - or =, deleted and empty ones
    dropped."""
    counted = {}
    for label, start, end in reading.brackets:
        label = re.split(r"[-=]", label, maxsplit=1)[0]
        if start == end or any(parameters.same_label(label, d) for d in parameters.delete_labels):
            continue
        key = (parameters.canonical_label(label) if parameters.labeled else "", start, end)
        counted[key] = counted.get(key, 0) + 1
    return counted


@dataclasses.dataclass
class SentenceResult:
    """One sentence's counts; status 0 valid, 1 error, 2 skipped (EVALB's Stat. column)."""

    status: int
    length: int
    gold_brackets: int = 0
    test_brackets: int = 0
    matched: int = 0
    words: int = 0
    correct_tags: int = 0
    error: str = ""


def score_sentence(gold, test, parameters=COLLINS):
    """The SentenceResult of the bracketed `test` tree against `gold`."""
    gold_reading = _read(gold, parameters)
    try:
        test_reading = _read(test, parameters)
    except ValueError as error:
        return SentenceResult(1, gold_reading.length, error=str(error))
    if not test_reading.words:
        return SentenceResult(2, gold_reading.length)
    if len(gold_reading.words) != len(test_reading.words):
        return SentenceResult(1, gold_reading.length, error=(
            f"length unmatch ({len(gold_reading.words)}|{len(test_reading.words)})"))
    for gold_word, test_word in zip(gold_reading.words, test_reading.words):
        if not parameters.same_word(gold_word, test_word):
            return SentenceResult(1, gold_reading.length,
                                  error=f"words unmatch ({gold_word}|{test_word})")
    gold_counted = _counted_brackets(gold_reading, parameters)
    test_counted = _counted_brackets(test_reading, parameters)
    return SentenceResult(
        0, gold_reading.length, gold_brackets=sum(gold_counted.values()),
        test_brackets=sum(test_counted.values()),
        matched=sum(min(n, test_counted.get(key, 0)) for key, n in gold_counted.items()),
        words=len(gold_reading.words),
        correct_tags=sum(parameters.same_label(g, t)
                         for g, t in zip(gold_reading.tags, test_reading.tags)))


@dataclasses.dataclass
class Summary:
    """EVALB's summary: percentages over the valid sentences' totals."""

    sentences: int
    errors: int
    skipped: int
    recall: float
    precision: float
    f1: float
    complete_match: float
    tagging_accuracy: float

    @property
    def valid(self):
        return self.sentences - self.errors - self.skipped

    def __str__(self):
        return (f"F1 = {self.f1:.2f}  recall = {self.recall:.2f}  precision = "
                f"{self.precision:.2f}  complete_match = {self.complete_match:.2f}  "
                f"tagging_accuracy = {self.tagging_accuracy:.2f}  sentences = {self.sentences} "
                f"(valid {self.valid}, error {self.errors}, skipped {self.skipped})")


def summarize(results):
    """The Summary of SentenceResults (EVALB's "-- All --" block)."""
    valid = [r for r in results if r.status == 0]
    gold = sum(r.gold_brackets for r in valid)
    test = sum(r.test_brackets for r in valid)
    matched = sum(r.matched for r in valid)
    words = sum(r.words for r in valid)
    recall = 100.0 * matched / gold if gold else 0.0
    precision = 100.0 * matched / test if test else 0.0
    complete = sum(r.gold_brackets == r.test_brackets == r.matched for r in valid)
    return Summary(
        sentences=len(results), errors=sum(r.status == 1 for r in results),
        skipped=sum(r.status == 2 for r in results), recall=recall, precision=precision,
        f1=2 * precision * recall / (precision + recall) if precision + recall else 0.0,
        complete_match=100.0 * complete / len(valid) if valid else 0.0,
        tagging_accuracy=100.0 * sum(r.correct_tags for r in valid) / words if words else 0.0)


def evaluate(golds, tests, parameters=COLLINS, max_length=None):
    """The Summary of the `tests` trees (bracketed strings) against `golds`, over the sentences
    of at most max_length words (EVALB's "len<=40" block) or all of them."""
    if len(golds) != len(tests):
        raise UserError(f"{len(golds)} gold trees but {len(tests)} test trees: they must be "
                        "parallel")
    results = []
    for number, (gold, test) in enumerate(zip(golds, tests), 1):
        try:
            result = score_sentence(gold, test, parameters)
        except ValueError as error:
            raise UserError(f"gold tree {number} is not a bracketed tree: {error}") from None
        if max_length is None or result.length <= max_length:
            results.append(result)
    return summarize(results)
