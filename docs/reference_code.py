"""What the generated pages (reference_pages.py, reference_layout.py, reference_api.py) read of
the code, and how they write it as Markdown.

A definition is read from its source with `ast`, by its dotted name, not imported: the modules
that import TensorFlow or JAX (a trainer's checkpoints, the Translator) are documented without
them, so that the site builds in seconds on a machine that has neither, and a name the code no
longer has is a LookupError that fails the build instead of a page that drifted from the code.
What a class's fields or a module's constants are is the comment beside them, read with
`tokenize`.
"""

import ast
import copy
import html
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GENERATED_NOTE = ("*Generated from {source} at every build of these pages; edit that, not "
                  "this page.*")
SECTION = re.compile(r"[A-Z][a-z]+( \(.*\))?\.$")


def escape(text):
    """`text` shown as it is, not read as Markdown or HTML (help texts hold `<TAB>`, `*` and
    `|`); line breaks are kept, so that a docstring's paragraphs and `- ` lists stay so."""
    text = html.escape(text, quote=False)
    return re.sub(r"([\\`*_\[\]|])", r"\\\1", text)


def one_line(text):
    """The first paragraph of `text` (a docstring), on one line: what a table cell can hold."""
    return " ".join(text.strip().split("\n\n", 1)[0].split())


def first_sentence(text):
    """The first sentence of `text`'s first paragraph, ending with its period: a docstring's or
    a comment's summary, as a table cell shows it ("e.g. " and "tf.train.X" end none)."""
    text = one_line(text)
    match = re.match(r"(.*?(?<!\be\.g)(?<!\bi\.e)[.!?])\s", text)
    text = match.group(1) if match else text
    return text + "." if text and text[-1] not in ".!?" else text


def package_dirs():
    """{package: its folder} of pyproject.toml's [tool.setuptools.package-dir]: the built-in
    problems (t2t_lite.problems) live in problems/. Read as text, as tests/test_docs.py reads
    the scripts: tomllib is not in Python 3.10."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    section = text.split("[tool.setuptools.package-dir]", 1)[1].split("\n[", 1)[0]
    return dict(re.findall(r'^"([\w.]+)"\s*=\s*"([^"]+)"', section, flags=re.MULTILINE))


def source_file(module):
    """The file of the module `module` (dotted), found without importing it or its package;
    a LookupError where there is none."""
    dirs = package_dirs()
    packages = [package for package in dirs if module == package or
                module.startswith(package + ".")]
    if not packages:
        raise LookupError(f"{module} is not in a package of pyproject.toml")
    package = max(packages, key=len)
    base = ROOT / dirs[package]
    for part in module[len(package):].split(".")[1:]:
        base = base / part
    for path in (base.with_name(base.name + ".py"), base / "__init__.py"):
        if path.is_file():
            return path
    raise LookupError(f"no module {module}")


def defines(node, name):
    """Whether the statement `node` defines `name`: a class, a function or an assignment (of
    a property with a setter, the first definition is the getter, which has the docstring)."""
    if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        return node.name == name
    if isinstance(node, ast.Assign):
        return any(isinstance(target, ast.Name) and target.id == name
                   for target in node.targets)
    return (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
            and node.target.id == name)


def definition(dotted):
    """(the ast node that defines `dotted`, e.g. "t2t_lite.decoding.translator.Translator" or
    "t2t_lite.model_dir.HPARAMS_FILE", and the path of its module); a LookupError for a name
    the code does not define."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            path = source_file(".".join(parts[:cut]))
        except LookupError:
            continue
        node = ast.parse(source(path))
        for name in parts[cut:]:
            node = next((child for child in getattr(node, "body", ())
                         if defines(child, name)), None)
            if node is None:
                raise LookupError(f"{dotted}: {path} defines no {name} there")
        return node, path
    raise LookupError(f"{dotted}: no such module")


def docstring(dotted):
    """The docstring of the module, class or function `dotted` ("" for none), or for a
    constant the comment beside it (see assignment_comments)."""
    node, path = definition(dotted)
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        owner, name = dotted.rsplit(".", 1)
        parent, _ = definition(owner)
        within = parent.name if isinstance(parent, ast.ClassDef) else None
        return assignment_comments(path, within)[name][1]
    return ast.get_docstring(node) or ""


def signature(node, path):
    """The parameters of the function at `node` of the module at `path` as its source writes
    them (defaults included: `100_000`, `"float32"`), without the `self` or `cls` of a method:
    `(texts)`, `(model=None, *, batch_size=32, **decoding)`."""
    arguments = copy.copy(node.args)  # its defaults replaced by their text: ast.unparse would
    # write 100_000 as 100000 and "float32" as 'float32'
    arguments.defaults = [ast.Name(as_written(d, path)) for d in node.args.defaults]
    arguments.kw_defaults = [d and ast.Name(as_written(d, path)) for d in node.args.kw_defaults]
    return "(" + re.sub(r"^(self|cls)(, |$)", "", ast.unparse(arguments)) + ")"


def as_written(node, path):
    """The source text of the expression at `node` of the module at `path`."""
    return ast.get_source_segment(source(path), node)


def source(path):
    """The text of the module at `path`, read anew at each use: `mkdocs serve` rebuilds the
    pages with the same modules loaded, and must show code edited since."""
    return Path(path).read_text(encoding="utf-8")


def is_property(node):
    return any(isinstance(decorator, ast.Name) and decorator.id == "property"
               for decorator in getattr(node, "decorator_list", ()))


def assignment_comments(path, class_name=None):
    """{name: (its section, the comments beside it and just above it)} of each assignment of
    the module at `path`, or of its class `class_name` (dataclass fields included): what each
    is, as the code says it. A section is a comment of one capitalized word, perhaps with a
    parenthesis, ending with a period: `# Training.`"""
    text = source(path)
    own_line, trailing = {}, {}  # by line number
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            alone = token.line.strip().startswith("#")
            (own_line if alone else trailing)[token.start[0]] = token.string[1:].strip()
    body = ast.parse(text).body
    if class_name:
        body = next(node for node in body
                    if isinstance(node, ast.ClassDef) and node.name == class_name).body
    result, section = {}, ""
    for node in body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            name = node.target.id
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
        else:
            continue
        above, line = [], node.lineno - 1
        while line in own_line:
            if SECTION.match(own_line[line]):
                section = own_line[line].rstrip(".")
                break
            above.insert(0, own_line[line])
            line -= 1
        said = above + ([trailing[node.lineno]] if node.lineno in trailing else [])
        result[name] = (section, " ".join(said))
    return result
