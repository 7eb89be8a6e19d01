"""Finding the trained world model of a pipeline preset: the user's registry, else the preset's
pipeline output directory, else the models shipped in the repository (what
notebooks/world_model_tour.ipynb opens).

    world = find_world_model(preset="demo")      # WorldModel: encoder, sequential model loaded
    print(world)                                  # which models, from where
"""

from __future__ import annotations

import dataclasses
import os

from rl755.pipeline.presets import get_preset
from rl755.pipeline.stages import REPO_ROOT, stage_environ


@dataclasses.dataclass
class WorldModel:
    """Trained models of one environment, found by `find_world_model`.

    Attributes:
      environment: the Environments member.
      source: where they were found, for people ("the registry (...)", "the demo run ..." or
        "the models shipped in the repository (...)").
      models_dir: the models directory in force (RL755_MODELS_DIR now points there), or the
        shipped models' root.
      encoder_name, sequential_name: their saved_models names.
      controller_name: the saved_models name of the controller, None when none was trained.
      encoder, sequential_model: the loaded models (None with load=False).
    """

    environment: object
    source: str
    models_dir: str
    encoder_name: str
    sequential_name: str
    controller_name: str | None
    encoder: object = None
    sequential_model: object = None

    def __str__(self) -> str:
        controller = self.controller_name or "none trained"
        return (
            f"{self.environment.name} models from {self.source}:\n"
            f"  encoder {self.encoder_name}, sequential model {self.sequential_name}, "
            f"controller {controller}"
        )


def _has_weights(model_dir: str) -> bool:
    import glob

    return bool(glob.glob(os.path.join(model_dir, "*.weights.h5")))


def find_world_model(preset: str = "demo", run_dir: str | None = None, load: bool = True):
    """The trained models of a pipeline preset's names (CarRacing for "demo"), from
    1. the registry: `<models_dir>/<env>/<name>/` of the user's settings (docs/getting-started/configuration.md),
    else 2. the preset's pipeline output, `run_dir` (default `runs/<preset>` in the repository),
    whose data and models directories then become this process's RL755_DATA_DIR and
    RL755_MODELS_DIR (as `pipeline.run_local` does), so every registry name resolves there,
    else 3. the models the preset names as shipped in the repository (`Preset.shipped`, e.g.
    the demo's seed-0 encoder and MDN-RNN and the `real_controller`; no training needed).
    Raises FileNotFoundError saying where it looked and how to train the models."""
    from rl755 import zoo
    from rl755.common import config
    from rl755.environments import Environments
    from rl755.zoo import shipped

    p = get_preset(preset)
    env = Environments.from_name(p.environment)
    run_dir = os.path.abspath(run_dir or os.path.join(REPO_ROOT, "runs", preset))
    names = (p.encoder_name, p.sequential_name, p.controller_name)
    candidates = [
        (f"the registry ({config.models_dir()})", str(config.models_dir()), None, names),
        (f"the {preset} run {run_dir}", os.path.join(run_dir, "models"), run_dir, names),
    ]
    for source, models_dir, out_dir, (encoder, sequential, controller) in candidates:
        folder = os.path.join(models_dir, env.folder_name)
        if not all(_has_weights(os.path.join(folder, n)) for n in (encoder, sequential)):
            continue
        if out_dir is not None:
            os.environ.update(stage_environ(out_dir))
        has_controller = os.path.exists(os.path.join(folder, controller, "controller.json"))
        world = WorldModel(
            env, source, models_dir, encoder, sequential, controller if has_controller else None
        )
        if load:
            world.encoder = zoo.get(env, encoder, kind=zoo.ENCODER)()
            world.sequential_model = zoo.get(env, sequential, kind=zoo.SEQUENTIAL)()
        return world
    rows = [zoo.get(env, n) for n in p.shipped]
    if rows and all(shipped.is_shipped(row) for row in rows[:2]):
        encoder, sequential, controller = rows
        world = WorldModel(
            env,
            f"the models shipped in the repository ({shipped.root()})",
            str(shipped.root()),
            encoder.name,
            sequential.name,
            controller.name if shipped.is_shipped(controller) else None,
        )
        if load:
            world.encoder = encoder.load(source=shipped.SHIPPED)
            world.sequential_model = sequential.load(source=shipped.SHIPPED)
        return world
    looked = "; ".join(
        os.path.join(m, env.folder_name, p.encoder_name) for _, m, _, _ in candidates
    )
    raise FileNotFoundError(
        f"No trained {env.name} encoder {p.encoder_name} and sequential model "
        f"{p.sequential_name} (looked in {looked}; none shipped for preset {preset!r}). Train "
        f"them with `make demo` (about 15 minutes on 2 cores; writes {run_dir}), or point "
        "RL755_MODELS_DIR (docs/getting-started/configuration.md) at a models directory that "
        "has them."
    )
