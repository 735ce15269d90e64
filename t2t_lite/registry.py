"""Registries of problems and hparams sets, looked up by snake_case name.

The built-in problems and hparams sets live in `t2t_lite.problems` and `t2t_lite.hparams`; they are
imported on the first lookup, so that the core never imports them directly.
"""

import glob
import importlib
import importlib.util
import os
import re
import sys
import traceback

from t2t_lite.utils.errors import UserError, did_you_mean
from t2t_lite.utils.json_records import damaged, read_record


def snake_case(name):
    """TranslateEndeWmt32k -> translate_ende_wmt32k."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


class Registry:
    """Names to objects; a duplicate name is a programming error, an unknown one a user error."""

    def __init__(self, kind, builtins_module):
        self.kind = kind
        self._builtins_module = builtins_module
        self._entries = {}

    def register(self, obj=None, *, name=None):
        """Decorator: `@register` or `@register(name="...")`; the default name is snake_case."""

        def decorate(obj):
            key = name or snake_case(obj.__name__)
            if key in self._entries:
                raise ValueError(f"{self.kind} '{key}' is already registered")
            self._entries[key] = obj
            return obj

        return decorate(obj) if obj is not None else decorate

    def get(self, name):
        self._load_builtins()
        if name not in self._entries:
            raise UserError(
                f"unknown {self.kind} '{name}'{did_you_mean(name, self._entries)}; "
                "`t2t-lite-trainer --registry_help` lists them all"
            )
        return self._entries[name]

    def names(self):
        self._load_builtins()
        return sorted(self._entries)

    def _load_builtins(self):
        importlib.import_module(self._builtins_module)


problems = Registry("problem", "t2t_lite.problems")
hparams_sets = Registry("hparams set", "t2t_lite.hparams")
register_hparams = hparams_sets.register


def register_problem(cls=None, *, name=None):
    """Registers a Problem class; its `name` (the prefix of its data files) becomes `name`."""

    def decorate(cls):
        problems.register(cls, name=name)
        if name:
            cls.name = name
        return cls

    return decorate(cls) if cls is not None else decorate


def problem_spec_path(data_dir, name):
    """Where t2t-lite-datagen records a problem it made from the user's files."""
    return os.path.join(data_dir, f"{name}.problem.json")


def problem(name, data_dir=None):
    """A new instance of the registered Problem `name`, or of the problem that t2t-lite-datagen
    made under that name in data_dir (its spec names the registered class that rebuilds it)."""
    if name in problems.names() or not data_dir:
        return problems.get(name)()
    spec_path = problem_spec_path(data_dir, name)
    remake = (f"make it again with the t2t-lite-datagen command that wrote {data_dir} (or "
              "restore it from a copy)")
    if not os.path.exists(spec_path):
        if glob.glob(os.path.join(glob.escape(data_dir), f"{glob.escape(name)}[.-]*")):
            raise UserError(f"{spec_path} is missing (deleted, or a bad copy?), though "
                            f"{data_dir} holds {name}'s data: {remake}")  # its record lost
        raise UserError(
            f"unknown problem '{name}'{did_you_mean(name, problems.names())}: it is neither "
            "registered (`t2t-lite-trainer --registry_help` lists them) nor made from your "
            f"files by t2t-lite-datagen in {data_dir}")
    spec = read_record(spec_path, dict, remake)
    if "problem_class" not in spec:
        raise damaged(spec_path, "no problem_class", remake)
    registered = spec["problem_class"]
    if not isinstance(registered, str) or registered not in problems.names():
        raise UserError(f"{spec_path} is damaged (its problem_class {registered!r} is no "
                        f"registered problem class): {remake}")
    try:
        return problems.get(registered).from_spec(name, spec)
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise UserError(f"{spec_path} is damaged ({type(error).__name__}: {error}): "
                        f"{remake}") from None


def hparams(name):
    """The HParams of the registered set `name`."""
    return hparams_sets.get(name)()


def help_string():
    sections = [("Problems", problems.names()), ("hparams sets", hparams_sets.names())]
    return "\n".join(f"{title}:\n" + "".join(f"  {n}\n" for n in names)
                     for title, names in sections)


def import_usr_dir(path):
    """Imports a user's module or package (like tensor2tensor's --t2t_usr_dir) so that it can
    register problems and hparams sets."""
    path = os.path.abspath(os.path.expanduser(path))
    is_package = os.path.isdir(path)
    init = os.path.join(path, "__init__.py") if is_package else path
    if not os.path.isfile(init):
        raise UserError(f"--usr_dir {path}: no such module or package (expected a .py file or a "
                        "directory with __init__.py)")
    module_name = os.path.splitext(os.path.basename(path.rstrip(os.sep)))[0]
    loaded = sys.modules.get(module_name)
    if loaded is not None:
        if os.path.realpath(getattr(loaded, "__file__", None) or "") == os.path.realpath(init):
            return loaded  # imported already: registered once
        # Python finds modules by name: another module of this name is in use (e.g. json).
        raise UserError(f"--usr_dir {path}: the module name '{module_name}' is taken by "
                        f"{getattr(loaded, '__file__', None) or 'a built-in module'}, which "
                        f"t2t_lite imports: rename yours (e.g. my_{module_name})")
    spec = importlib.util.spec_from_file_location(
        module_name, init, submodule_search_locations=[path] if is_package else None)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as error:
        del sys.modules[module_name]
        raise UserError(f"--usr_dir {error.filename} line {error.lineno}: {error.msg}: fix the "
                        "syntax error there") from None
    except Exception as error:  # noqa: BLE001 (whatever the user's code raised; not Ctrl-C)
        for name in [n for n in sys.modules if n == module_name or
                     n.startswith(module_name + ".")]:
            del sys.modules[name]
        fix = ("fix the import there, or install the module it names"
               if isinstance(error, ImportError) else "fix the error there")
        message = (str(error).strip().splitlines() or [""])[0]
        raise UserError(f"--usr_dir {_where(error, path, init)}: {type(error).__name__}"
                        f"{': ' + message if message else ''}: {fix}") from None
    return module


def _where(error, path, init):
    """'FILE line N' of the innermost line of the user's module or package that `error` passed
    through (an error raised inside a library it called is named where the user's code called
    it)."""
    frames = [frame for frame in traceback.extract_tb(error.__traceback__)
              if frame.filename == init or frame.filename.startswith(path + os.sep)]
    if not frames:
        return init
    return f"{frames[-1].filename} line {frames[-1].lineno}"
