"""The zoo: trained models as rows of one registry (rl755/zoo/rows.py).

    from rl755 import zoo
    vae = zoo.get("CAR_RACING", "raw_rollout_vae_32ld")()      # loads the newest checkpoint
    print(zoo.get("CAR_RACING", "mdn_rnn_vae_32ld").train_command())
    zoo.names("DOOM_TAKE_COVER", kind="sequential")           # ['mdn_rnn_64ld', ...]

Each row (`ZooModel`) names a model, its environment, kind (encoder | sequential |
controller), catalogue model and exact training flags; loading is lazy. The names are the
values of `--encoder=`, `--sequential_model=`, `--saved_controller=` and of encode's
`--model=`; unknown names fail at once, listing the valid ones. For the seed's environments,
`rl755.models.<env>.saved_models.<name>()` is the same loader (generated from the rows by
rl755.zoo.saved_source, docstring included); a new environment needs no file.

The zoo imports only rl755.common and rl755.environments: it is data, so any layer may read
it; the loaders (models, controller) are imported by name when a model is loaded.
"""

from __future__ import annotations

from collections.abc import Callable

from rl755.environments import Environment, Environments
from rl755.zoo import readme
from rl755.zoo.entry import CONTROLLER, ENCODER, KINDS, SEQUENTIAL, ZooModel, wrap_command
from rl755.zoo.rows import MODELS

__all__ = [
    "CONTROLLER",
    "ENCODER",
    "KINDS",
    "MODELS",
    "SEQUENTIAL",
    "ZooModel",
    "get",
    "names",
    "readme_tables",
    "rows",
    "saved_model_functions",
    "wrap_command",
]

#: Flag names that take zoo names, and the kind each expects.
FLAG_KINDS = {
    "encoder": ENCODER,
    "sequential_model": SEQUENTIAL,
    "saved_controller": CONTROLLER,
}


def rows(environment: Environment | str | None = None, kind: str | None = None) -> list[ZooModel]:
    """The rows, in table order, of one environment and/or kind."""
    env = None if environment is None else Environments.from_name(environment).name
    if kind is not None and kind not in KINDS:
        raise ValueError(f"Unknown kind {kind!r}; valid: {', '.join(KINDS)}.")
    return [
        r
        for r in MODELS
        if (env is None or r.environment == env) and (kind is None or r.kind == kind)
    ]


def names(environment: Environment | str, kind: str | None = None) -> list[str]:
    return [r.name for r in rows(environment, kind)]


def get(environment: Environment | str, name: str, kind: str | None = None) -> ZooModel:
    """The row `name` of `environment` (and `kind`); unknown names raise LookupError listing
    the valid ones. The row is callable: `get(...)()` loads the model."""
    env = Environments.from_name(environment)
    for row in rows(env, kind):
        if row.name == name:
            return row
    what = f"{kind} " if kind else ""
    valid = ", ".join(names(env, kind)) or "(none yet)"
    raise LookupError(
        f"Unknown {what}model {name!r} for {env.name}. Trained {what}models in the zoo "
        f"(rl755/zoo/rows.py; rl755.models.{env.folder_name}.saved_models): {valid}."
    )


def saved_model_functions(environment: Environment | str, module: str) -> dict[str, Callable]:
    """{name: no-argument loader} of one environment, as functions of `module`, each with its
    row's docstring (the saved_models modules are written out by rl755.zoo.saved_source)."""

    def function(row: ZooModel) -> Callable:
        def load():
            return row.load()

        load.__name__ = load.__qualname__ = row.name
        load.__module__ = module
        load.__doc__ = row.docstring()
        return load

    return {row.name: function(row) for row in rows(environment)}


def readme_tables() -> str:
    """The zoo tables of docs/guides/zoo.md (scripts/dev/zoo_table.py)."""
    return readme.tables(MODELS)
