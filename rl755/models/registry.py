"""Registrations of sequential models: one row per `--model=` name, checked when it is made.

    register(Sequential(
        "gru.gru_with_heads",                       # the --model value, "<family>.<name>"
        "examples.gru_world_model:gru_world_model", # the builder ("module:function" or a function)
        presets={"units": 64},                      # keyword defaults: values or Preset(...)
        heads=True,                                 # predict_reward=True, predict_done=True
        description="a GRU + a deterministic z head",
    ))

The builder is called as `builder(representation_size=Z, action_size=A, **presets,
**overrides)` (plus `predict_reward=True, predict_done=True` when `heads`) and returns a
`SequentialModel` (rl755/models/common/sequential.py). A preset value is a default, or a
`Preset` naming a field of the environment's `ModelPresets` (rl755/environments/spec.py), so
that environments can size the model (a `Preset` whose value is None is not passed: the
builder's own default applies).

Checked at registration (so at the import of the file that registers), each failure a
`RegistrationError` naming that file: the name's form; a builder that does not exist (a
misspelled family); a name registered twice with different rows; a `Preset` of no
`ModelPresets` field; a builder argument without a default that no preset gives (a missing
preset); a preset the builder does not take. A builder given as "module:function" is checked
by reading the module's source, without importing it (the catalogue stays free of
TensorFlow until a model is built).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable
from typing import Any

from rl755.common import lookup

#: Arguments every sequential builder receives from the environment.
SIZES = ("representation_size", "action_size")
#: Arguments a builder receives when the registration has heads.
HEADS = ("predict_reward", "predict_done")


class RegistrationError(ValueError):
    """A registration that cannot work (see the module docstring)."""


@dataclasses.dataclass(frozen=True)
class Preset:
    """A default read from the environment's `ModelPresets`: `field`, then, for a field that
    holds (name, value) pairs or a dataclass, each of `path` in turn.

    Preset("rnn_units")                                   -> presets.rnn_units
    Preset("transformer_sizes", "tiny", "num_layers")     -> that size's num_layers
    """

    field: str
    path: tuple[str, ...] = ()

    def __init__(self, field: str, *path: str):
        object.__setattr__(self, "field", field)
        object.__setattr__(self, "path", tuple(path))

    def read(self, presets) -> Any:
        value = getattr(presets, self.field)
        for key in self.path:
            value = dict(value)[key] if isinstance(value, tuple) else getattr(value, key)
        return value

    def __str__(self) -> str:
        return ".".join(("presets", self.field, *self.path))


@dataclasses.dataclass(frozen=True)
class Sequential:
    """One sequential `--model=` name (see the module docstring).

    Attributes:
      name: "<family>.<name>", e.g. "mdn_rnn.mdn_rnn_with_heads".
      builder: "package.module:function" (imported when a model is built) or the function.
      presets: {builder argument: default value or `Preset`}; stored as sorted pairs.
      heads: True: reward and episode-end heads (what dream training needs).
      description: one line for the model tables and the `--model` help.
      where: the file that registered it (set by `register`).
    """

    name: str
    builder: str | Callable
    presets: Any = ()
    heads: bool = False
    description: str = ""
    where: str = dataclasses.field(default="", compare=False)

    def __post_init__(self):
        items = self.presets.items() if isinstance(self.presets, dict) else self.presets
        object.__setattr__(self, "presets", tuple(items))

    @property
    def family(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def builder_name(self) -> str:
        if isinstance(self.builder, str):
            return self.builder
        return f"{self.builder.__module__}:{self.builder.__qualname__}"

    def arguments(self, presets) -> dict:
        """The builder's keyword arguments from an environment's `ModelPresets`."""
        args = {}
        for key, value in self.presets:
            value = value.read(presets) if isinstance(value, Preset) else value
            if value is not None:
                args[key] = value
        if self.heads:
            args.update(dict.fromkeys(HEADS, True))
        return args

    def resolve_builder(self) -> Callable:
        if callable(self.builder):
            return self.builder
        return lookup.import_object(self.builder, what=f"builder of {self.name}")


_REGISTERED: dict[str, Sequential] = {}


def register(entry: Sequential, where: str | None = None) -> Sequential:
    """Checks `entry` and adds it (see the module docstring). `where`: the registering file
    (default: the caller's). Registering an equal row again does nothing."""
    where = where or sys._getframe(1).f_code.co_filename
    entry = dataclasses.replace(entry, where=where)
    check(entry)
    old = _REGISTERED.get(entry.name)
    if old is not None and old != entry:
        raise RegistrationError(
            f"{where}: sequential model {entry.name!r} is already registered by {old.where} "
            f"(builder {old.builder_name}); choose another name."
        )
    _REGISTERED.setdefault(entry.name, entry)
    return entry


def unregister(name: str) -> None:
    """Removes a registration (tests that register a model for a while)."""
    _REGISTERED.pop(name, None)


def registered() -> list[Sequential]:
    """Every registration, in registration order."""
    return list(_REGISTERED.values())


def get(name: str) -> Sequential | None:
    return _REGISTERED.get(name)


def check(entry: Sequential) -> None:
    """Raises RegistrationError naming `entry.where` when the row cannot build a model."""
    from rl755.environments.spec import ModelPresets

    def fail(message: str):
        raise RegistrationError(f"{entry.where}: {entry.name!r}: {message}")

    parts = entry.name.split(".")
    if len(parts) != 2 or not all(p.isidentifier() for p in parts):
        fail("a model name is '<family>.<name>', two Python identifiers joined by a dot.")
    fields = [f.name for f in dataclasses.fields(ModelPresets)]
    for key, value in entry.presets:
        if isinstance(value, Preset) and value.field not in fields:
            fail(f"preset {key}={value}: ModelPresets has no field {value.field!r}.")
    params, takes_any = _parameters(entry, fail)
    given = {key for key, _ in entry.presets} | set(SIZES) | (set(HEADS) if entry.heads else set())
    missing = [p for p, required in params.items() if required and p not in given]
    if missing:
        fail(
            f"the builder {entry.builder_name} needs {', '.join(missing)}, which no preset "
            "gives: add them to the registration's presets."
        )
    unknown = [k for k in given if k not in params]
    if unknown and not takes_any:
        fail(f"the builder {entry.builder_name} takes no argument {', '.join(sorted(unknown))}.")


def _parameters(entry: Sequential, fail) -> tuple[dict[str, bool], bool]:
    """({argument: required}, takes **kwargs) of the builder, read without importing it when
    it is a "module:function" string."""
    if callable(entry.builder):
        sig = inspect.signature(entry.builder)
        ps = sig.parameters.values()
        named = {
            p.name: p.default is inspect.Parameter.empty
            for p in ps
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        }
        return named, any(p.kind == p.VAR_KEYWORD for p in ps)
    module, sep, function = str(entry.builder).partition(":")
    if not sep or not module or not function.isidentifier():
        fail(f"builder {entry.builder!r}: expected 'package.module:function' or a function.")
    try:
        spec = importlib.util.find_spec(module)
    except ModuleNotFoundError:
        spec = None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        fail(f"builder {entry.builder!r}: there is no module {module!r}.")
    with open(spec.origin) as f:
        tree = ast.parse(f.read(), spec.origin)
    defs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    node = defs.get(function)
    if node is None:
        public = ", ".join(sorted(n for n in defs if not n.startswith("_")))
        fail(f"builder {entry.builder!r}: {spec.origin} defines no {function!r}; it has: {public}.")
    if isinstance(node, ast.ClassDef):
        init = [n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"]
        if not init:
            return {}, True  # an inherited constructor: checked when built
        node = init[0]
    a = node.args
    positional = [*a.posonlyargs, *a.args]
    first_default = len(positional) - len(a.defaults)
    named = {p.arg: i < first_default for i, p in enumerate(positional) if p.arg != "self"}
    named.update({p.arg: d is None for p, d in zip(a.kwonlyargs, a.kw_defaults)})
    return named, a.kwarg is not None


def import_modules(modules: str, variable: str) -> None:
    """Imports each comma-separated module (their registrations run); a module that does not
    exist fails naming `variable`."""
    for name in filter(None, (m.strip() for m in modules.split(","))):
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name and name.startswith(e.name):
                raise RegistrationError(
                    f"{variable}={modules!r}: there is no module {name!r} (a comma-separated "
                    "list of importable modules that register models)."
                ) from e
            raise
