"""A synthetic treebank the size and shape of the WSJ's 10% sample, to size a 30-minute parsing
recipe where no real treebank may be used (the real sample is held back for measuring).

tests/synthetic_treebank.py is a toy: 8-word sentences over a few hundred words. This one copies
what decides a CPU budget and what makes real trees hard, not real syntax. 3,500 trees (seed 10)
have sentences of 20.9 words on average (the WSJ's ~24), up to 100, linearized in 48.8 symbols
(the WSJ's trees have more constituents a word); 9,080 word types, invented with English
suffixes, drawn by Zipf's law, so that 6.7% of the test words (seed 12) were never seen in
training; WSJ's tags and labels with their punctuation (commas, quotes, colons, `$`, `%`);
words whose tag depends on context (`that` IN/WDT/DT, -ed VBD/VBN, -s NNS/VBZ); attachments
that follow sparse lexical preferences (a verb and a preposition) rather than a rule. F1 on it
says nothing about English; compare recipes with it.

    python benchmarks/wsj_like_treebank.py OUT.mrg --trees 3500 --seed 10
"""

import argparse
import random
import zlib

SYLLABLES = ["ba", "cor", "den", "fi", "gal", "hem", "in", "jo", "kal", "lun", "mer", "nor",
             "pa", "quin", "ros", "sel", "tam", "ul", "ver", "wes", "yar", "zo", "bri", "cla"]


def lexicon(rng, size, suffixes, capital=False):
    """size invented stems, each with one of suffixes; Zipf sampling makes a few frequent."""
    words = []
    for _ in range(size):
        stem = "".join(rng.choice(SYLLABLES) for _ in range(rng.choice((1, 2, 2, 3))))
        word = stem + rng.choice(suffixes)
        words.append(word.capitalize() if capital else word)
    return words


class Generator:
    """One grammar, one vocabulary (fixed by vocabulary_seed), many sentences (by seed)."""

    def __init__(self, seed, vocabulary_seed=0):
        vocab = random.Random(vocabulary_seed)
        self.nouns = lexicon(vocab, 12000, ["", "tion", "ity", "ment", "er", "ness", "ance"])
        self.names = lexicon(vocab, 8000, ["", "son", "ton", "co", "ex"], capital=True)
        self.verbs = lexicon(vocab, 2500, ["", "ize", "ate", "en", "ify"])
        self.adjectives = lexicon(vocab, 2500, ["al", "ive", "ous", "ic", "ful", "able"])
        self.adverbs = [a[:-2] + "ly" if a.endswith("al") else a + "ly" for a in
                        lexicon(vocab, 400, ["al", "ive", "ous"])]
        self.rng = random.Random(seed)

    def pick(self, words, exponent=1.0):
        """A word by Zipf's law over the list's order."""
        rank = int(len(words) ** self.rng.random() ** exponent) - 1
        return words[min(rank, len(words) - 1)]

    def chance(self, p):
        return self.rng.random() < p

    def verb(self, form):
        stem = self.pick(self.verbs)
        return {"VB": stem, "VBP": stem, "VBZ": stem + "s", "VBD": stem + "ed", "VBN": stem + "ed",
                "VBG": stem + "ing"}[form]

    def noun_phrase(self, depth, subject=False):
        r = self.rng.random()
        if r < 0.12:
            word = self.rng.choice(["it", "they", "he", "we"] if subject else ["it", "them"])
            return f"(NP (PRP {word}))"
        if r < 0.30:
            count = self.rng.choice((1, 2, 2, 3))
            names = " ".join(f"(NNP {self.pick(self.names)})" for _ in range(count))
            if self.chance(0.2):
                return f"(NP (NP {names} (NNP {self.rng.choice(['Inc.', 'Corp.', 'Co.'])})) (, ,))"
            return f"(NP {names})"
        if r < 0.38:
            number, unit = self.rng.randint(1, 999), self.rng.choice(["million", "billion"])
            amount = f"(QP ($ $) (CD {number}) (CD {unit}))"
            if self.chance(0.5):
                return f"(NP (CD {self.rng.randint(1, 99)}.{self.rng.randint(0, 9)}) (NN %))"
            return f"(NP {amount})"
        words = []
        if depth < 2 and self.chance(0.12):
            words.append(f"(NP (NNP {self.pick(self.names)}) (POS 's))")
        else:
            determiner = self.rng.choice(["the", "the", "a", "this", "that", "some", "its"])
            words.append(f"(DT {determiner})")
        for _ in range(self.rng.choice((0, 1, 1, 2))):
            words.append(f"(JJ {self.pick(self.adjectives)})")
        if self.chance(0.25):
            words.append(f"(NN {self.pick(self.nouns)})")
        plural = self.chance(0.35)
        head = self.pick(self.nouns)
        words.append(f"(NNS {head}s)" if plural else f"(NN {head})")
        phrase = "(NP " + " ".join(words) + ")"
        if depth < 3 and self.chance(0.3):
            phrase = f"(NP {phrase} (PP (IN of) {self.noun_phrase(depth + 1)}))"
        if depth < 2 and self.chance(0.08):
            relative = self.verb_phrase(depth + 1, self.rng.choice(["VBD", "VBZ"]))
            pronoun = self.rng.choice(["which", "that"])
            phrase = f"(NP {phrase} (, ,) (SBAR (WHNP (WDT {pronoun})) (S {relative})) (, ,))"
        elif depth < 2 and self.chance(0.06):
            conjunction = self.rng.choice(["and", "or"])
            phrase = f"(NP {phrase} (CC {conjunction}) {self.noun_phrase(depth + 1)})"
        return phrase

    def prepositional_phrase(self, depth, verb):
        preposition = self.rng.choice(["in", "on", "for", "with", "at", "from", "by", "to", "as"])
        tag = "TO" if preposition == "to" else "IN"
        # The attachment a verb-preposition pair prefers, as words of real text do.
        to_verb = zlib.crc32(f"{verb} {preposition}".encode()) % 4 != 0
        return f"(PP ({tag} {preposition}) {self.noun_phrase(depth + 1)})", to_verb

    def verb_phrase(self, depth, form):
        r = self.rng.random()
        if depth < 3 and r < 0.12:
            modal = self.rng.choice(["will", "would", "could", "may"])
            return f"(VP (MD {modal}) {self.verb_phrase(depth + 1, 'VB')})"
        if depth < 3 and r < 0.22 and form != "VB":
            auxiliary = {"VBZ": "has", "VBD": "had", "VBP": "have"}.get(form, "has")
            auxiliary_tag = form if form != "VBG" else "VBZ"
            return f"(VP ({auxiliary_tag} {auxiliary}) {self.verb_phrase(depth + 1, 'VBN')})"
        word = self.verb(form)
        parts = [f"({form} {word})"]
        if depth < 3 and r < 0.32:
            complementizer = self.rng.choice(["that", "that", "because", "if"])
            parts.append(f"(SBAR (IN {complementizer}) {self.clause(depth + 1)})")
        elif depth < 3 and r < 0.38:
            parts.append(f"(S (VP (TO to) {self.verb_phrase(depth + 1, 'VB')}))")
        elif self.chance(0.8):
            obj = self.noun_phrase(depth + 1)
            for _ in range(self.rng.choice((0, 1, 1, 2, 2))):
                pp, to_verb = self.prepositional_phrase(depth, word)
                if to_verb:
                    parts.append(obj)
                    obj = pp
                else:
                    obj = f"(NP {obj} {pp})"
            parts.append(obj)
        if self.chance(0.15):
            parts.append(f"(ADVP (RB {self.pick(self.adverbs)}))")
        return "(VP " + " ".join(parts) + ")"

    def subject(self, depth):
        return self.noun_phrase(depth, subject=True).replace("(NP ", "(NP-SBJ ", 1)

    def clause(self, depth):
        form = self.rng.choice(["VBD", "VBD", "VBZ", "VBP"])
        subject = self.subject(depth)
        return f"(S {subject} {self.verb_phrase(depth, form)})"

    def sentence(self):
        r = self.rng.random()
        if r < 0.1:  # a quotation, then who said it
            body = (f"(`` ``) (S-TPC {self.clause(1)}) (, ,) ('' '') "
                    f"{self.subject(1)} (VP (VBD said))")
        elif r < 0.25:  # two clauses joined
            body = f"{self.clause(0)} (, ,) (CC {self.rng.choice(['but', 'and'])}) {self.clause(0)}"
        elif r < 0.3:
            body = f"{self.clause(0)} (: ;) {self.clause(0)}"
        else:
            body = self.clause(0)[3:-1]
            if self.chance(0.2):
                pp, _ = self.prepositional_phrase(1, "")
                body = f"{pp.replace('(PP ', '(PP-TMP ', 1)} (, ,) {body}"
            elif self.chance(0.08):
                body = f"(ADVP (RB {self.pick(self.adverbs)})) (, ,) {body}"
        return f"( (S {body} (. .)) )\n"


def write_treebank(path, count, seed, vocabulary_seed=0):
    generator = Generator(seed, vocabulary_seed)
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(generator.sentence() for _ in range(count))
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output")
    parser.add_argument("--trees", type=int, default=3500)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    write_treebank(args.output, args.trees, args.seed)


if __name__ == "__main__":
    main()
