"""The source of `rl755/models/<env folder>/saved_models.py`, generated from the zoo's rows.

    python scripts/dev/zoo_table.py --write    # rewrites the four modules (and the docs tables)

Each module holds one explicit no-argument function per row of its environment, whose
docstring is the row's (how it was trained, where its weights are), so that `help()`, IDEs
and the API reference see them; `tests/test_zoo.py` fails when a module is not what this
generates.
"""

from __future__ import annotations

from rl755.environments import Environments
from rl755.zoo.entry import ENCODER, SEQUENTIAL, ZooModel
from rl755.zoo.rows import MODELS

#: The environments of the original interface, `rl755.models.<env folder>.saved_models`.
ENVIRONMENTS = ("CAR_RACING", "FAKE_PIXELS", "DOOM_TAKE_COVER", "BREAKOUT")

#: The return annotation of a row's function, by kind (controllers: see the docstring).
_RETURNS = {ENCODER: " -> ObservationEncoder", SEQUENTIAL: " -> SequentialModel"}


def module_path(environment: str) -> str:
    """The module's file, relative to the repository's root."""
    return f"rl755/models/{Environments.from_name(environment).folder_name}/saved_models.py"


def _function(row: ZooModel) -> str:
    doc = row.docstring().rstrip("\n").replace('"""', r"\"\"\"")
    body = "\n".join(("    " + line).rstrip() for line in doc.split("\n"))
    return (
        f"def {row.name}(){_RETURNS.get(row.kind, '')}:\n"
        f'    r"""{body.lstrip()}\n    """\n'
        f'    return zoo.get("{row.environment}", "{row.name}").load()\n'
    )


def source(environment: str) -> str:
    """The text of the environment's saved_models module."""
    env = Environments.from_name(environment).name
    rows = [r for r in MODELS if r.environment == env]
    head = (
        f'"""Trained {env} models (the original interface): one no-argument function per '
        f"rl755.zoo row\nof {env}; help(<function>) shows how each was trained.\n\n"
        "Generated from rl755/zoo/rows.py by `python scripts/dev/zoo_table.py --write`; do "
        'not edit.\n"""\n\n'
        "from __future__ import annotations\n\n"
        "from typing import TYPE_CHECKING\n\n"
        "from rl755 import zoo\n\n"
        "if TYPE_CHECKING:\n"
        "    from rl755.models.common.encoder import ObservationEncoder\n"
        "    from rl755.models.common.sequential import SequentialModel\n"
    )
    return head + "".join("\n\n" + _function(r) for r in rows)
