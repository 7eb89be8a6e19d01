"""The environments rl755 knows, and how to make them.

Each environment is ONE entry (an `EnvironmentSpec`) in rl755/environments/table.py: a
gymnasium id or a constructor "package.module:Class" (old gym-API classes are adapted), what
`make()` returns, the action layout and the model sizes (`ModelPresets`). Nothing else is
per-environment except tuned exploration policies and trained models (rl755.zoo).

    env = Environments.CAR_RACING.make(seed=0)
    obs, info = env.reset(seed=0)          # obs: uint8 [96, 96, 3]
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())

`Environments.from_name("CAR_RACING")` resolves a flag value strictly: an unknown name
raises a ValueError that lists the valid names.

Discrete environments (DOOM_TAKE_COVER, BREAKOUT) look continuous to the rest of rl755:
rollouts, policies, sequential models and controllers always handle actions as float32
vectors [A]; for a discrete environment that vector is one-hot over its
`num_discrete_actions` actions. `make()` puts the conversion at the environment boundary
(`env.step` takes the [A] vector and plays its argmax), and the member converts explicitly:

    env_enum = Environments.DOOM_TAKE_COVER
    env_enum.to_env_action([0.0, 1.0, 0.0])        # -> 1 (MOVE_RIGHT), what the game plays
    env_enum.from_env_action(2)                     # -> float32 [0, 0, 1] (stored one-hot)
    env_enum.to_stored_action(controller_output)    # [..., A] -> one-hot of the argmax
                                                    # (continuous: clipped to the box);
                                                    # numpy or TF tensors (dream rollouts)

Frames: environments with a `frame_size` are resized there at the boundary (Doom's 240x320
screen and Atari's 210x160 to 64x64, as World Models did), so `observation_shape` is what
reset/step return and what rollouts store; `env.render()` still gives the full frame.
"""

from rl755.environments.registry import Environment, Environments
from rl755.environments.spec import EnvironmentSpec, ModelPresets, TransformerSize
from rl755.environments.wrappers import FrameObservation, OldGymApi, OneHotActions, OneHotBox

__all__ = [
    "Environment",
    "EnvironmentSpec",
    "Environments",
    "FrameObservation",
    "ModelPresets",
    "OldGymApi",
    "OneHotActions",
    "OneHotBox",
    "TransformerSize",
]
