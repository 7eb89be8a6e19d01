"""The Rollout record and its TFRecord form.

A rollout of T steps (the observation the policy saw, the action it took, the reward
that followed):

    obs_l[t]     uint8 [H, W, C]  (or float32 [Z] for encoded rollouts)
    action_l[t]  float32 [A]
    reward_l[t]  float32 scalar
    done         True if the episode terminated (not truncated) after the last step

As a `tf.train.SequenceExample`:
    context:        "num_steps" int64, "done" int64 (0/1), "observation_shape" int64 [ndim],
                    "observation_dtype" bytes ("uint8" or "float32")
    feature_lists:  "observations" one bytes feature per step (the raw frame bytes,
                    `frame.tobytes()`, decoded with `tf.io.decode_raw`) for uint8 frames,
                    or one float_list per step for float observations;
                    "actions" one float_list [A] per step; "rewards" one float_list [1] per step;
                    optional "observation_std_devs" one float_list [Z] per step (encoded rollouts).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import tensorflow as tf

# TensorFlow is imported by the functions that need it, not by this module: a Rollout is
# plain numpy, and Ray rollout workers that write pickles never load TF.


@dataclasses.dataclass
class Rollout:
    """One episode. See the module docstring for shapes."""

    obs_l: list = dataclasses.field(default_factory=list)
    action_l: list = dataclasses.field(default_factory=list)
    reward_l: list = dataclasses.field(default_factory=list)
    done: bool = False
    obs_std_l: list | None = None
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.obs_l)

    def validate(self) -> None:
        """Raises ValueError if the lists disagree in length or the frames in shape."""
        n = len(self.obs_l)
        if len(self.action_l) != n or len(self.reward_l) != n:
            raise ValueError(
                f"Rollout lists disagree: {n} observations, {len(self.action_l)} actions, "
                f"{len(self.reward_l)} rewards (each step needs one of each)."
            )
        if n == 0:
            raise ValueError("Rollout is empty: it has no steps.")
        shape = np.shape(self.obs_l[0])
        for t, o in enumerate(self.obs_l):
            if np.shape(o) != shape:
                raise ValueError(f"Observation {t} has shape {np.shape(o)}, expected {shape}.")
        if self.obs_std_l is not None and len(self.obs_std_l) != n:
            raise ValueError(f"obs_std_l has {len(self.obs_std_l)} entries, expected {n}.")

    # ---- TFRecord conversion ----------------------------------------------------------------
    def to_sequence_example(self) -> tf.train.SequenceExample:
        import tensorflow as tf

        self.validate()
        obs = np.asarray(self.obs_l)
        ex = tf.train.SequenceExample()
        ctx = ex.context.feature
        ctx["num_steps"].int64_list.value.append(len(self))
        ctx["done"].int64_list.value.append(int(bool(self.done)))
        ctx["observation_shape"].int64_list.value.extend(obs.shape[1:])
        fl = ex.feature_lists.feature_list
        if obs.dtype == np.uint8:
            ctx["observation_dtype"].bytes_list.value.append(b"uint8")
            obs_list = fl["observations"]
            for frame in obs:
                obs_list.feature.add().bytes_list.value.append(frame.tobytes())
        else:
            ctx["observation_dtype"].bytes_list.value.append(b"float32")
            obs_list = fl["observations"]
            for o in obs.astype(np.float32):
                obs_list.feature.add().float_list.value.extend(o.reshape(-1))
        actions = fl["actions"]
        for a in self.action_l:
            actions.feature.add().float_list.value.extend(np.asarray(a, np.float32).reshape(-1))
        rewards = fl["rewards"]
        for r in self.reward_l:
            rewards.feature.add().float_list.value.append(float(r))
        if self.obs_std_l is not None:
            stds = fl["observation_std_devs"]
            for s in self.obs_std_l:
                stds.feature.add().float_list.value.extend(np.asarray(s, np.float32).reshape(-1))
        return ex

    def serialize(self) -> bytes:
        return self.to_sequence_example().SerializeToString()

    @classmethod
    def from_sequence_example(cls, ex: tf.train.SequenceExample | bytes) -> Rollout:
        """Inverse of `to_sequence_example` (numpy, for inspection and tests)."""
        if isinstance(ex, bytes | bytearray):
            import tensorflow as tf

            parsed = tf.train.SequenceExample()
            parsed.ParseFromString(bytes(ex))
            ex = parsed
        ctx = ex.context.feature
        shape = tuple(ctx["observation_shape"].int64_list.value)
        dtype = ctx["observation_dtype"].bytes_list.value[0].decode()
        fl = ex.feature_lists.feature_list
        if dtype == "uint8":
            obs_l = [
                np.frombuffer(f.bytes_list.value[0], np.uint8).reshape(shape)
                for f in fl["observations"].feature
            ]
        else:
            obs_l = [
                np.asarray(f.float_list.value, np.float32).reshape(shape)
                for f in fl["observations"].feature
            ]
        action_l = [np.asarray(f.float_list.value, np.float32) for f in fl["actions"].feature]
        reward_l = [float(f.float_list.value[0]) for f in fl["rewards"].feature]
        obs_std_l = None
        if "observation_std_devs" in fl:
            obs_std_l = [
                np.asarray(f.float_list.value, np.float32)
                for f in fl["observation_std_devs"].feature
            ]
        return cls(
            obs_l=obs_l,
            action_l=action_l,
            reward_l=reward_l,
            done=bool(ctx["done"].int64_list.value[0]),
            obs_std_l=obs_std_l,
        )

    @classmethod
    def deserialize(cls, data: bytes) -> Rollout:
        return cls.from_sequence_example(data)


def parse_rollout_tensors(
    serialized: tf.Tensor,
    observation_shape: tuple[int, ...],
    action_size: int,
    observation_dtype: tf.DType | None = None,
    with_std_devs: bool = False,
    decode_observations: bool = True,
) -> dict[str, tf.Tensor]:
    """Parses one serialized rollout inside a tf.data pipeline.

    Returns a dict:
      "observations": [T, *observation_shape] (uint8 frames, or float32 [T, Z])
      "actions": float32 [T, A]; "rewards": float32 [T]; "done": bool scalar;
      "observation_std_devs": float32 [T, Z] when with_std_devs.
    With decode_observations=False, uint8 "observations" stay raw bytes, string [T]
    (decode only the frames you need with `decode_frames`). `observation_dtype` is
    tf.uint8 (the default) or tf.float32.
    """
    import tensorflow as tf

    observation_dtype = tf.uint8 if observation_dtype is None else observation_dtype
    context_features = {
        "num_steps": tf.io.FixedLenFeature([], tf.int64),
        "done": tf.io.FixedLenFeature([], tf.int64),
    }
    if observation_dtype == tf.uint8:
        obs_feature = tf.io.FixedLenSequenceFeature([], tf.string)
    else:
        obs_feature = tf.io.FixedLenSequenceFeature(list(observation_shape), tf.float32)
    sequence_features = {
        "observations": obs_feature,
        "actions": tf.io.FixedLenSequenceFeature([action_size], tf.float32),
        "rewards": tf.io.FixedLenSequenceFeature([1], tf.float32),
    }
    if with_std_devs:
        sequence_features["observation_std_devs"] = tf.io.FixedLenSequenceFeature(
            list(observation_shape), tf.float32
        )
    ctx, seq = tf.io.parse_single_sequence_example(
        serialized, context_features=context_features, sequence_features=sequence_features
    )
    obs = seq["observations"]
    if observation_dtype == tf.uint8 and decode_observations:
        obs = decode_frames(obs, observation_shape)
    out = {
        "observations": obs,
        "actions": seq["actions"],
        "rewards": tf.squeeze(seq["rewards"], -1),
        "done": tf.cast(ctx["done"], tf.bool),
    }
    if with_std_devs:
        out["observation_std_devs"] = seq["observation_std_devs"]
    return out


def decode_frames(raw: tf.Tensor, observation_shape: tuple[int, ...]) -> tf.Tensor:
    """Raw frame bytes string [N] -> uint8 [N, *observation_shape]."""
    import tensorflow as tf

    frames = tf.io.decode_raw(raw, tf.uint8)
    return tf.reshape(frames, [-1, *observation_shape])
