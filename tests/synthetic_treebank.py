"""A treebank generated from a small PCFG with a few hundred words, written in the LDC's format
(several multi-line trees a file, an unlabeled root, function tags, traces).

The structure is learnable from the words alone: a prepositional phrase attaches to the noun
phrase before it when its preposition is `of`, to the verb phrase otherwise. Every word has one
tag, unless `realistic`: then the treebank also has the punctuation EVALB deletes (commas after
a fronted adverb, quotes around an object, a colon before a second clause, `.` `?` `!` at the
end) and words tagged by their position, as a noun (NNS) or a verb (VBZ).
"""

import random

NOUNS = [f"{stem}{suffix}" for stem in ("cat", "dog", "house", "tree", "car", "book", "city",
                                        "river", "song", "plan", "bank", "road", "ship", "coin",
                                        "lamp", "door", "wall", "king", "girl", "boy")
         for suffix in ("", "s", "man", "let", "ling")]
VERBS = [f"{stem}{suffix}" for stem in ("see", "take", "move", "find", "build", "sell", "hold",
                                        "open", "watch", "paint", "carry", "love")
         for suffix in ("d", "s", "ed", "ing", "en")]
ADJECTIVES = [f"{stem}{suffix}" for stem in ("big", "small", "old", "new", "red", "green",
                                             "quiet", "loud", "dark", "warm")
              for suffix in ("", "er", "ish", "y")]
ADVERBS = ["quickly", "slowly", "today", "often", "never", "soon", "there", "again"]
DETERMINERS = ["the", "a", "every", "some", "this", "that"]
PREPOSITIONS = ["of", "in", "on", "with", "near", "under"]
NOUN_OR_VERB = ["plans", "watches", "books", "walks", "runs", "works"]


def noun_phrase(rng, depth, realistic=False):
    words = [("DT", rng.choice(DETERMINERS))]
    if rng.random() < 0.4:
        words.append(("JJ", rng.choice(ADJECTIVES)))
    if realistic and rng.random() < 0.2:
        words.append(("NNS", rng.choice(NOUN_OR_VERB)))
    else:
        words.append(("NN", rng.choice(NOUNS)))
    phrase = "(NP " + " ".join(f"({t} {w})" for t, w in words) + ")"
    if depth < 2 and rng.random() < 0.3:
        phrase = f"(NP {phrase} (PP (IN of) {noun_phrase(rng, depth + 1, realistic)}))"
    return phrase


def sentence(rng, realistic=False):
    subject = noun_phrase(rng, 0, realistic).replace("(NP ", "(NP-SBJ-1 ", 1)
    if realistic and rng.random() < 0.3:
        parts = [f"(VBZ {rng.choice(NOUN_OR_VERB)})"]
    else:
        parts = [f"(VBD {rng.choice(VERBS)})"]
    if realistic and rng.random() < 0.15:
        parts.append(f"(`` ``) {noun_phrase(rng, 0, realistic)} ('' '')")
    elif rng.random() < 0.8:
        parts.append(noun_phrase(rng, 0, realistic))
    if rng.random() < 0.4:
        parts.append(f"(PP-LOC (IN {rng.choice(PREPOSITIONS[1:])}) {noun_phrase(rng, 1)})")
    if rng.random() < 0.3:
        parts.append(f"(ADVP-TMP (RB {rng.choice(ADVERBS)}))")
    if rng.random() < 0.2:
        parts.append("(NP (-NONE- *-1))")
    if not realistic:
        return f"( (S {subject}\n    (VP {' '.join(parts)})\n    (. .)) )\n"
    before = f"(ADVP (RB {rng.choice(ADVERBS)})) (, ,) " if rng.random() < 0.3 else ""
    after = ""
    if rng.random() < 0.15:
        after = f" (: ;) (S {noun_phrase(rng, 0, realistic)} (VP (VBD {rng.choice(VERBS)})))"
    end = rng.choice(".?!")
    return f"( (S {before}{subject}\n    (VP {' '.join(parts)}){after}\n    (. {end})) )\n"


def write_treebank(path, count, seed, realistic=False):
    rng = random.Random(seed)
    path.write_text("".join(sentence(rng, realistic) for _ in range(count)), encoding="utf-8")
    return path
