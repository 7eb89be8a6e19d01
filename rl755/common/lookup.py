"""Strict name lookups for flags such as `--policy`, `--model`, `--rollouts_dataset`.

    resolve("rl755.data_gen", "policies.UniformRandomPolicy")  -> that class
    import_object("rl755.testing.old_api_env:OldApiDots")         -> that class (imported now)

An unknown module or attribute raises `LookupError` naming the valid choices, at once,
before any compute starts.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from typing import Any


def _public_names(obj: Any, base_class: type | None = None) -> list[str]:
    """Classes and functions defined in module `obj` (or re-exported in its `__all__`)."""
    names = []
    exported = set(getattr(obj, "__all__", ()))
    for name, value in vars(obj).items():
        if name.startswith("_") or inspect.ismodule(value):
            continue
        defined_here = getattr(value, "__module__", None) == getattr(obj, "__name__", None)
        if not (defined_here or name in exported):
            continue
        if not (inspect.isclass(value) or inspect.isfunction(value)):
            continue
        if base_class is not None and inspect.isclass(value) and not issubclass(value, base_class):
            continue
        names.append(name)
    return sorted(names)


def _submodules(package: str) -> list[str]:
    try:
        pkg = importlib.import_module(package)
    except ImportError:
        return []
    if not hasattr(pkg, "__path__"):
        return []
    return sorted(m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_"))


def resolve(
    package: str, dotted_name: str, base_class: type | None = None, what: str = "name"
) -> Any:
    """Resolves `dotted_name` under `package`, e.g. ("rl755.data_gen", "policies.UniformRandomPolicy").

    The longest importable module prefix is imported, the rest is looked up as attributes.
    `base_class` only filters the suggestions listed in error messages.
    """
    if not dotted_name or not all(p.isidentifier() for p in dotted_name.split(".")):
        raise LookupError(f"Invalid {what} {dotted_name!r}: expected a dotted Python name.")
    parts = dotted_name.split(".")
    module = None
    attr_parts: list[str] = []
    for i in range(len(parts), -1, -1):
        mod_name = ".".join([package, *parts[:i]])
        try:
            module = importlib.import_module(mod_name)
        except ModuleNotFoundError as e:
            # Re-raise a missing dependency inside an existing module.
            if e.name and not mod_name.startswith(e.name) and not e.name.startswith(package):
                raise
            continue
        attr_parts = parts[i:]
        break
    if module is None:
        raise LookupError(f"Package {package} does not exist (looking up {what} {dotted_name!r}).")
    obj: Any = module
    for j, attr in enumerate(attr_parts):
        if not hasattr(obj, attr):
            where = ".".join([package, *parts[: len(parts) - len(attr_parts) + j]])
            choices = _public_names(obj, base_class) if inspect.ismodule(obj) else []
            subs = _submodules(where) if inspect.ismodule(obj) else []
            hint = []
            if choices:
                hint.append("names there: " + ", ".join(choices))
            if subs:
                hint.append("modules there: " + ", ".join(subs))
            raise LookupError(
                f"Unknown {what} {dotted_name!r}: {where} has no {attr!r}. "
                + ("; ".join(hint) if hint else "")
            )
        obj = getattr(obj, attr)
    return obj


def list_choices(package: str, module: str, base_class: type | None = None) -> list[str]:
    """Public classes/functions of `package.module` (for help texts and errors)."""
    return _public_names(importlib.import_module(f"{package}.{module}"), base_class)


def import_object(reference: str, what: str = "constructor") -> Any:
    """Imports and returns the object named "package.module:Attribute" (attributes may be dotted).

    Used for environment constructors and the zoo's loaders, so a module is imported only
    when its object is used. A malformed reference, a missing module or attribute raise
    `LookupError` saying which part is missing.
    """
    module_name, sep, attr = str(reference).partition(":")
    names = [module_name, *attr.split(".")]
    if not sep or not all(p.isidentifier() for n in names for p in n.split(".")):
        raise LookupError(f"Invalid {what} {reference!r}: expected 'package.module:Attribute'.")
    try:
        obj = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name and module_name.startswith(e.name):
            raise LookupError(f"{what} {reference!r}: there is no module {e.name!r}.") from e
        raise  # a missing dependency inside an existing module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise LookupError(
                f"{what} {reference!r}: {module_name} has no {attr!r}; names there: "
                + ", ".join(_public_names(importlib.import_module(module_name)))
            )
        obj = getattr(obj, part)
    return obj
