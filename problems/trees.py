"""Penn Treebank trees: reading bracket files, cleaning as the parsing literature does, and the
linearization a sequence-to-sequence parser is trained on (Vinyals et al. 2015, as tensor2tensor).

A tree is a `Tree(label, children)` whose children are Trees or, for a preterminal, one word.
Linearization: labels open (`S`), `/S` closes, each word is replaced by its tag:
`(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat)) (. .)))` <-> `S NP DT NN /NP VP VBD /VP . /S`
given the words `The cat sat .`; the TOP root is implied.
"""

import dataclasses
import glob
import os
import re

from t2t_lite.data.corpus import read_lines
from t2t_lite.utils.errors import UserError

ROOT = "TOP"
TRACE = "-NONE-"
FILLER_TAG = "XX"  # the tag of words a repaired output left untagged
_TOKEN = re.compile(r"\(|\)|[^\s()]+")


@dataclasses.dataclass
class Tree:
    label: str
    children: list

    @property
    def is_preterminal(self):
        return len(self.children) == 1 and isinstance(self.children[0], str)

    def words(self):
        if self.is_preterminal:
            return [self.children[0]]
        return [word for child in self.children for word in child.words()]

    def preterminals(self):
        if self.is_preterminal:
            return [self]
        return [leaf for child in self.children for leaf in child.preterminals()]

    def __str__(self):
        if self.is_preterminal:
            return f"({self.label} {self.children[0]})"
        return f"({self.label}{''.join(' ' + str(child) for child in self.children)})"


def read_trees(path):
    """Yields the trees of a bracket file (several a file, each over any number of lines);
    a bracket error is a UserError naming the file and line."""
    stack, start = [], None
    for number, line in enumerate(read_lines(path), 1):
        tokens = _TOKEN.findall(line)
        i = 0
        while i < len(tokens):
            token = tokens[i]
            if token == "(":
                if not stack:
                    start = number
                label = tokens[i + 1] if i + 1 < len(tokens) and tokens[i + 1] not in "()" else ""
                stack.append(Tree(label, []))
                i += 2 if label else 1
            elif token == ")":
                if not stack:
                    raise UserError(f"{path}, line {number}: a ')' closes no bracket")
                tree = stack.pop()
                if not tree.children:
                    raise UserError(f"{path}, line {number}: empty bracket ({tree.label})")
                if stack:
                    stack[-1].children.append(tree)
                else:
                    yield tree
                i += 1
            else:
                if not stack:
                    raise UserError(f"{path}, line {number}: '{token}' outside a tree")
                node = stack[-1]
                if node.children:
                    raise UserError(f"{path}, line {number}: word '{token}' beside other "
                                    f"children in ({node.label} ...)")
                if i + 1 >= len(tokens) or tokens[i + 1] != ")":
                    raise UserError(f"{path}, line {number}: ({node.label} {token} must close "
                                    "after its word")
                node.children.append(token)
                i += 1
    if stack:
        raise UserError(f"{path}, line {start}: the tree that starts here has "
                        f"{len(stack)} unclosed '('")


def treebank_files(pattern, flag):
    """The files of --train/--dev/--test: a file, a directory (its files, recursively, sorted) or
    a glob."""
    if os.path.isdir(pattern):
        paths = sorted(p for p in glob.glob(os.path.join(glob.escape(pattern), "**", "*"),
                                            recursive=True) if os.path.isfile(p))
    else:
        paths = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
    paths = [os.path.abspath(p) for p in paths]
    if not paths or not all(os.path.isfile(p) for p in paths):
        raise UserError(f"--{flag}={pattern}: no such treebank file, directory or glob")
    return paths


def clean_label(label):
    """NP-SBJ-1 -> NP, NP=2 -> NP; labels that start with '-' (-LRB-, -NONE-) are kept whole."""
    if label.startswith("-"):
        return label
    return re.split(r"[-=|]", label, maxsplit=1)[0] or label


def clean(tree):
    """The tree as parsers are trained and scored on: -NONE- traces and the constituents they
    leave empty dropped, function tags and indices stripped, under one TOP root."""
    children = tree.children if tree.label in ("", ROOT, "ROOT") else [tree]
    cleaned = [c for c in (_clean(child) for child in children) if c is not None]
    return Tree(ROOT, cleaned) if cleaned else None


def _clean(tree):
    if tree.is_preterminal:
        return None if tree.label == TRACE else Tree(clean_label(tree.label), tree.children)
    children = [c for c in (_clean(child) for child in tree.children) if c is not None]
    return Tree(clean_label(tree.label), children) if children else None


def linearize(tree):
    """The target sequence of a cleaned tree, as a list of symbols (see the module)."""
    return [symbol for child in tree.children for symbol in _linearize(child)]


def nesting(symbols, labels):
    """(depth, run): the most constituents a linearized tree holds open at once, and the most it
    opens in a row before a tag; the search keeps its outputs within a treebank's largest."""
    depth = run = most_depth = most_run = 0
    for symbol in symbols:
        if symbol in labels:
            depth, run = depth + 1, run + 1
            most_depth, most_run = max(most_depth, depth), max(most_run, run)
        else:
            depth -= symbol.startswith("/") and len(symbol) > 1
            run = 0
    return most_depth, most_run


def _linearize(tree):
    if tree.is_preterminal:
        return [tree.label]
    inner = [symbol for child in tree.children for symbol in _linearize(child)]
    return [tree.label] + inner + ["/" + tree.label]


def delinearize(symbols, words, tags, labels):
    """(tree, repaired): the tree of a linearized output over `words`, and whether the output was
    not a well-formed tree with one tag per word and had to be repaired.

    `tags` and `labels` are the sets of tags and constituent labels. Repair: symbols that are
    neither a tag nor a label, tags beyond the words' number and closers of no open constituent
    are dropped, constituents left open are closed, empty ones dropped, and words without a tag
    are attached to the root as (XX word).
    """
    root = Tree(ROOT, [])
    stack = [root]
    used = 0
    repaired = False
    for symbol in symbols:
        if symbol in tags:
            if used < len(words):
                stack[-1].children.append(Tree(symbol, [words[used]]))
                used += 1
            else:
                repaired = True
        elif symbol.startswith("/") and len(symbol) > 1:
            if len(stack) > 1 and stack[-1].label == symbol[1:]:
                stack.pop()
            else:
                repaired = True
        elif symbol in labels:
            node = Tree(symbol, [])
            stack[-1].children.append(node)
            stack.append(node)
        else:
            repaired = True
    repaired |= len(stack) > 1 or used < len(words)
    root.children += [Tree(FILLER_TAG, [word]) for word in words[used:]]
    pruned = _drop_empty(root)
    repaired |= pruned is not root
    return pruned or Tree(ROOT, []), repaired


def _drop_empty(tree):
    """The tree without constituents that hold no word; itself if it has none of those."""
    if tree.is_preterminal:
        return tree
    children = [c for c in (_drop_empty(child) for child in tree.children) if c is not None]
    if not children:
        return None
    if len(children) == len(tree.children) and all(a is b for a, b in zip(children,
                                                                          tree.children)):
        return tree
    return Tree(tree.label, children)
