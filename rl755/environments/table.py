"""The environments rl755 knows: ONE entry each (docs/guides/new-environment.md).

An entry names a gymnasium id (`open_ai_name`) or a class (`constructor="package.module:Class"`,
old gym API adapted), what `make()` returns, and the model sizes that differ from World Models'
CarRacing defaults (`presets`, read by rl755.models.catalogue). Order is listing order.
"""

from __future__ import annotations

import os
import tempfile

from rl755.environments.spec import EnvironmentSpec, ModelPresets, TransformerSize

_TOY_TRANSFORMER = TransformerSize(num_layers=2, model_dim=16, num_heads=2, window=8)
# action = [steering in [-1, 1], gas in [0, 1], brake in [0, 1]]. As in World Models, a
# controller's brake is clip(tanh(y), 0, 1): zero outputs drive at half gas without braking
# (a scaled brake would hold it at 0.5, and early CMA-ES generations barely move).
_STEERING_GAS_BRAKE = dict(
    action_low=(-1.0, 0.0, 0.0),
    action_high=(1.0, 1.0, 1.0),
    controller_squash=("scaled", "scaled", "clipped"),
)

ENVIRONMENTS: tuple[EnvironmentSpec, ...] = (
    EnvironmentSpec(
        name="CAR_RACING",
        open_ai_name="rl755/CarRacing-v3",
        # CarRacing-v3 with off-screen road polygons skipped before drawing: the same frames
        # (rl755.environments.car_racing).
        register_module="rl755.environments.car_racing",
        observation_shape=(96, 96, 3),
        **_STEERING_GAS_BRAKE,
        max_episode_steps=1000,
        description="Box2D top-down racing; 96x96 RGB frames; 1000-step episodes.",
        # The VAE keeps rows 0:84 (the indicator bar goes) and resizes them to 64x64.
        presets=ModelPresets(crop_rows=(0, 84)),
    ),
    EnvironmentSpec(
        name="FAKE_PIXELS",
        open_ai_name="rl755/FakePixels-v0",
        folder_name="fake",
        observation_shape=(16, 16, 3),
        **_STEERING_GAS_BRAKE,  # CarRacing's action layout
        max_episode_steps=24,
        register_module="rl755.testing.fake_env",
        description="Tiny deterministic pixel env for tests and smoke runs (16x16, 24 steps).",
        # Toy sizes: VAE Z = 4 (14,683 params: no crop or resize, conv 8/16 -> 2x2x16, decoder
        # Dense(64) -> 16/8/3 with kernels 3, 4, 2), LSTM 16, 3 Gaussians, transformers 2x16,
        # infilling U-Net 8/16.
        presets=ModelPresets(
            representation_size=4,
            image_size=None,
            encoder_filters=(8, 16),
            decoder_dense_size=64,
            decoder_filters=(16, 8),
            decoder_kernels=(3, 4, 2),
            rnn_units=16,
            num_components=3,
            transformer_sizes=tuple((p, _TOY_TRANSFORMER) for p in ("tiny", "small", "base")),
            unet_filters=(8, 16),
            patch_discriminator_filters=(8, 16),
        ),
    ),
    EnvironmentSpec(
        name="DOOM_TAKE_COVER",
        open_ai_name="VizdoomTakeCover-v1",
        # The (240, 320, 3) "screen" of the observation dict, resized to 64x64 at the boundary.
        observation_shape=(64, 64, 3),
        # One-hot over (NOOP, MOVE_RIGHT, MOVE_LEFT); reward +1 per step survived.
        num_discrete_actions=3,
        action_meanings=("NOOP", "MOVE_RIGHT", "MOVE_LEFT"),
        # World Models caps an episode at 2100 steps (60 s of game time at 35 fps).
        max_episode_steps=2100,
        make_kwargs=(
            ("max_episode_steps", 2100),
            # ViZDoom writes its ini file into the working directory unless told otherwise.
            ("doom_config_path", os.path.join(tempfile.gettempdir(), "rl755_vizdoom.ini")),
        ),
        register_module="vizdoom.gymnasium_wrapper",
        observation_key="screen",
        frame_size=(64, 64),
        description="ViZDoom TakeCover: dodge fireballs; 64x64 frames; 3 discrete actions; "
        "reward = steps survived (max 2100).",
        # World Models' Doom sizes: Z = 64, LSTM 512; the MDN-RNN's episode-end head unweighted.
        presets=ModelPresets(representation_size=64, rnn_units=512, mdn_rnn_done_pos_weight=1.0),
    ),
    EnvironmentSpec(
        name="BREAKOUT",
        open_ai_name="ALE/Breakout-v5",
        # The (210, 160, 3) Atari screen, resized to 64x64 at the boundary.
        observation_shape=(64, 64, 3),
        num_discrete_actions=4,
        action_meanings=("NOOP", "FIRE", "RIGHT", "LEFT"),
        # ALE v5: frameskip 4, sticky actions 0.25, 108,000 frames = 27,000 steps at most.
        max_episode_steps=27000,
        register_module="ale_py",
        frame_size=(64, 64),
        description="Atari Breakout (ale-py, ROM included); 64x64 frames; 4 discrete actions.",
    ),
)
