"""`ZooModel`: one trained model as a row, and everything generated from it.

A row holds what cannot be derived: the model's name (its function name in
`rl755.models.<env>.saved_models` and its directory `<models_dir>/<env folder>/<name>/`), its
environment and kind, the catalogue model it instantiates, the EXACT flags it was trained
with, and one line (plus optional notes) on what it is. From the row come: the training
command (`train_command`), the docstring of its saved_models function (`docstring`), the
"train it first with ..." message of a missing model, the zoo tables of docs/guides/zoo.md,
and for encoders
the name of the dataset of rollouts they encoded (`dataset`, CamelCase of the name).

Loading is lazy: `row()` / `row.load()` imports the loader named for its kind (a
"module:function" string, see `LOADERS`) only then. It reads the user's trained copy, or
without one the copy shipped in the repository (rl755.zoo.shipped). Rows are frozen
dataclasses of strings, so they pickle (Ray workers load their own copy).
"""

from __future__ import annotations

import dataclasses
import logging
import shlex
import textwrap

from rl755.common import config, lookup
from rl755.environments import Environments

log = logging.getLogger(__name__)

ENCODER, SEQUENTIAL, CONTROLLER = "encoder", "sequential", "controller"
KINDS = (ENCODER, SEQUENTIAL, CONTROLLER)

#: The training script of each kind.
SCRIPTS = {
    ENCODER: "scripts/models/train_obs_encoder.py",
    SEQUENTIAL: "scripts/models/train_sequential_model.py",
    CONTROLLER: "scripts/models/train_controller.py",
}

#: "module:function" loading a row of each kind (imported only when a model is loaded).
LOADERS = {
    ENCODER: "rl755.models.encoders.saved:load_encoder",
    SEQUENTIAL: "rl755.models.sequential.saved:load_sequential_model",
    CONTROLLER: "rl755.controller.saved:load_trained_controller",
}

#: What loading returns, for docstrings.
RETURNS = {
    ENCODER: "an ObservationEncoder (rl755.models.common.encoder), weights loaded",
    SEQUENTIAL: "a SequentialModel (rl755.models.common.sequential), weights loaded",
    CONTROLLER: "an rl755.controller.saved.TrainedController (controller, params [N], meta)",
}

_WIDTH = 92


@dataclasses.dataclass(frozen=True)
class ZooModel:
    """One trained model; see the module docstring.

    Attributes:
      name: function name in saved_models, `--encoder=` / `--sequential_model=` /
        `--saved_controller=` value, and the model dir's basename.
      environment: an `Environments` name.
      kind: "encoder", "sequential" or "controller".
      model: the rl755.models.catalogue name (`--model=`); None for controllers.
      flags: the exact training flags besides --environment, --model and --model_dir.
      summary: one line on what it is (docs/guides/zoo.md's table, first docstring line).
      notes: more docstring text: data, results, history.
      resumes_from: the zoo model whose directory was copied and resumed to make this one.
    """

    name: str
    environment: str
    kind: str
    model: str | None
    flags: str
    summary: str
    notes: str = ""
    resumes_from: str | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"{self.name}: kind must be one of {KINDS}, got {self.kind!r}.")
        if (self.model is None) != (self.kind == CONTROLLER):
            raise ValueError(f"{self.name}: encoders and sequential models name a --model.")
        if self.kind == ENCODER and "representation_size" not in self.flag_values():
            raise ValueError(f"{self.name}: an encoder's flags must give --representation_size.")

    # ---- derived facts -------------------------------------------------------------------------
    def flag_values(self) -> dict[str, str]:
        """--name=value flags as {name: value} ("" for a bare --flag)."""
        values = {}
        for token in shlex.split(self.flags):
            key, _, value = token.removeprefix("--").partition("=")
            values[key] = value
        return values

    @property
    def representation_size(self) -> int | None:
        """Z of an encoder (from its --representation_size)."""
        size = self.flag_values().get("representation_size")
        return None if size is None else int(size)

    @property
    def dataset(self) -> str | None:
        """An encoder's `--rollouts_dataset` name: CamelCase of its name (raw_rollout_vae_32ld
        -> RawRolloutVae32ld); for a sequential model the dataset it was trained on."""
        if self.kind == ENCODER:
            return "".join(part[:1].upper() + part[1:] for part in self.name.split("_"))
        return self.flag_values().get("rollouts_dataset")

    @property
    def folder_name(self) -> str:
        return Environments.from_name(self.environment).folder_name

    def model_dir(self) -> str:
        """`<models_dir>/<env folder>/<name>` as configured now (rl755.common.config)."""
        return str(config.env_models_dir(self.folder_name) / self.name)

    def display_dir(self, name: str | None = None) -> str:
        return f"<models_dir>/{self.folder_name}/{name or self.name}"

    def train_command(self, model_dir: str | None = None) -> str:
        """The command that trains it (one line), into `model_dir` (default `<models_dir>/...`)."""
        parts = [f"python {SCRIPTS[self.kind]}", f"--environment={self.environment}"]
        if self.model is not None:
            parts.append(f"--model={self.model}")
        parts.append(f"--model_dir={model_dir or self.display_dir()}")
        return " ".join([*parts, self.flags])

    def how_to_train(self, model_dir: str | None = None) -> str:
        """`train_command`, preceded by the copy step when it resumes another model's dir."""
        command = self.train_command(model_dir)
        if self.resumes_from is None:
            return command
        target = model_dir or self.display_dir()
        source = (
            str(config.env_models_dir(self.folder_name) / self.resumes_from)
            if model_dir
            else self.display_dir(self.resumes_from)
        )
        return (
            f'cp -r {source} {target}, set "model": "{self.model}" in '
            f"the newest {target}/model-NNN.json checkpoint marker, then: {command}"
        )

    def docstring(self) -> str:
        """The docstring of its saved_models function."""
        text = [_fill(self.summary.rstrip(".") + ".")]
        if self.notes:
            text += ["", _fill(self.notes)]
        text += ["", "Trained with:" if not self.resumes_from else _fill(self._resume_text())]
        text += ["", wrap_command(self.train_command(), indent="    ")]
        text += ["", _fill(self._where_text())]
        return "\n".join(text) + "\n"

    def _resume_text(self) -> str:
        return (
            f"Made by copying `{self.resumes_from}`'s model dir to {self.display_dir()}, "
            f'setting "model": "{self.model}" in its newest model-NNN.json checkpoint marker, and '
            "resuming:"
        )

    def _where_text(self) -> str:
        where = (
            f"Loads the newest complete checkpoint of `{self.display_dir()}/`, or without one "
            f"the shipped copy `rl755/zoo/shipped/{self.folder_name}/{self.name}/` (float16 "
            f"weights) if there is one (`rl755.zoo.get({self.environment!r}, {self.name!r})()`) "
            "and returns "
            f"{RETURNS[self.kind]}; the exact flags, data and git commit of the run are in "
            "its runs/*.json. A missing model fails with the command above."
        )
        if self.kind == ENCODER:
            where += (
                f" Rollouts it encodes (scripts/data_gen/encode_raw_rollouts.py "
                f"--model={self.name}) are `--rollouts_dataset={self.dataset}`."
            )
        return where

    # ---- loading -------------------------------------------------------------------------------
    def load(self, source: str | None = None):
        """The trained model (see `RETURNS`), from `source`: "trained" (the user's
        `model_dir()`), "shipped" (the copy committed in the repository, rl755.zoo.shipped) or
        None: the trained copy when there is one, else the shipped one. The object gets
        `zoo_source` ("trained" or "shipped"), and a log line says which was used. A missing
        model fails with `how_to_train` (and the shipped copy's state)."""
        from rl755.zoo import shipped

        if source is not None and source not in shipped.SOURCES:
            raise ValueError(f"Unknown source {source!r}; valid: {', '.join(shipped.SOURCES)}.")
        trained_dir = self.model_dir()
        shipped_dir = shipped.shipped_dir(self)
        if source is None:
            has_trained = shipped.has_trained_copy(self.kind, trained_dir)
            use_shipped = not has_trained and shipped.is_shipped(self)
            source = shipped.SHIPPED if use_shipped else shipped.TRAINED
        if source == shipped.SHIPPED:
            if not shipped.is_shipped(self):
                raise FileNotFoundError(
                    f"{self.environment} {self.name} is not shipped: {shipped_dir} holds no "
                    f"{shipped.RECORD_FILE}. Ship a trained copy with: "
                    f"{shipped.ship_command(self)}"
                )
            model = self.load_from(str(shipped_dir))
            log.info(
                "%s %s: loaded the shipped copy %s (float16 weights, cast to float32).",
                self.environment,
                self.name,
                shipped_dir,
            )
        else:
            how_to_train = self.how_to_train(trained_dir)
            if not shipped.is_shipped(self):
                how_to_train += (
                    f" (not shipped yet: no {shipped_dir}/{shipped.RECORD_FILE}; once trained, "
                    f"ship it with: {shipped.ship_command(self)})"
                )
            model = self.load_from(trained_dir, how_to_train)
            log.info("%s %s: loaded the trained copy %s.", self.environment, self.name, trained_dir)
        model.zoo_source = source
        return model

    def load_from(self, model_dir: str, how_to_train: str | None = None):
        """The model in `model_dir` (a training run's dir or a shipped folder), through the
        loader of its kind (`LOADERS`)."""
        loader = lookup.import_object(LOADERS[self.kind], what="zoo loader")
        how_to_train = how_to_train or self.how_to_train(model_dir)
        if self.kind == CONTROLLER:
            return loader(model_dir, how_to_train=how_to_train)
        if self.kind == ENCODER:
            return loader(
                self.environment,
                self.model,
                model_dir,
                representation_size=self.representation_size,
                how_to_train=how_to_train,
            )
        return loader(self.environment, self.model, model_dir, how_to_train=how_to_train)

    def __call__(self):
        return self.load()

    def from_source(self, source: str | None):
        """A picklable no-argument loader from `source` (see `load`); the row itself for None."""
        return self if source is None else FromSource(self, source)


@dataclasses.dataclass(frozen=True)
class FromSource:
    """`row.load(source)` as a picklable no-argument constructor (Ray workers call it)."""

    row: ZooModel
    source: str

    def __call__(self):
        return self.row.load(self.source)


def wrap_command(command: str, indent: str = "", width: int = _WIDTH) -> str:
    """A shell command over several lines (`\\` continuations) at flag boundaries."""
    lines, line = [], indent
    for token in command.split(" "):
        if line.strip() and len(line) + 1 + len(token) + 2 > width:
            lines.append(line + " \\")
            line = indent + "    " + token
        else:
            line = f"{line} {token}" if line.strip() else line + token
    return "\n".join([*lines, line])


def _fill(text: str) -> str:
    return textwrap.fill(" ".join(text.split()), _WIDTH, break_on_hyphens=False)
