"""An exact world model of the fake pixel environment (`rl755.testing.fake_env`), for tests.

`FakeLatentEncoder` reads the column position and speed bar off a frame:
z = [x_hat, speed_hat], where x_hat = col / (size - 2) is x quantized exactly as the frame
draws it (the frame cannot show x more finely). `FakeDynamicsModel` is a
`SequentialModel` whose `step` runs the environment's own dynamics on an internal state
(x, speed, edge counter) started from the first z it is given, and whose `sample_next`
returns the next frame's z, the reward and the termination exactly. The only
dream-to-real difference is therefore the quantization of the *initial* x
(|x_hat - x| <= 1 / (2 * (size - 2))), which shifts each step's reward by at most
2 * that; everything else (steering, clipping, speed, termination) is reproduced.

    enc = FakeLatentEncoder()
    z, _ = enc.compute_full_representation(frames)        # uint8 [B, 16, 16, 3] -> [B, 2]
    model = FakeDynamicsModel()
    state = model.initial_state(B)
    h, state = model.step(z, a, state)                     # h: [B, 4] = (x', speed', r, done)
    nxt = model.sample_next(h)                             # {"z": [B, 2], "reward", "done_prob"}
"""

from __future__ import annotations

import tensorflow as tf

from rl755.models.common.encoder import ObservationEncoder
from rl755.models.common.sequential import SequentialModel
from rl755.testing import fake_env


class _FakeLatents:
    """What the fake encoder and dynamics share: the frame size S and z = (x_hat, speed_hat)."""

    def __init__(self, size: int = fake_env.SIZE, **kwargs):
        super().__init__(**kwargs)
        self.size = size

    @property
    def representation_size(self) -> int:
        return 2


class FakeLatentEncoder(_FakeLatents, ObservationEncoder):
    """Fixed analytic encoder of FakePixels frames: uint8 [B, S, S, 3] -> [B, 2]."""

    def compute_full_representation(self, x, training=None):
        x = tf.convert_to_tensor(x)
        column = tf.cast(tf.equal(x[:, 0, :, 0], 255), tf.int32)  # [B, S]
        col = tf.cast(tf.argmax(column, axis=1), tf.float32)  # first lit column
        speed_px = tf.reduce_sum(tf.cast(tf.equal(x[:, -1, :, 2], 200), tf.float32), axis=1)
        x_hat = col / (self.size - 2)
        speed_hat = (speed_px - 1.0) / (self.size - 1)
        z = tf.stack([x_hat, speed_hat], axis=1)  # [B, 2]
        return z, {"std_devs": tf.zeros_like(z)}

    def call(self, x, training=None):
        return self.compute_full_representation(x, training=training)[0]

    def get_loss_fn(self):
        raise NotImplementedError("FakeLatentEncoder is analytic: it has nothing to train.")


class FakeDynamicsModel(_FakeLatents, SequentialModel):
    """The fake environment's exact dynamics in latent space; hidden = (x', speed', r, done)."""

    @property
    def action_size(self) -> int:
        return 3

    @property
    def hidden_size(self) -> int:
        return 4

    @property
    def has_reward_head(self) -> bool:
        return True

    @property
    def has_done_head(self) -> bool:
        return True

    def get_loss_fn(self):
        raise NotImplementedError("FakeDynamicsModel is exact: it has nothing to train.")

    def initial_state(self, batch_size: int):
        zeros = tf.zeros([batch_size], tf.float32)
        return (zeros, zeros, zeros, zeros)  # x, speed, edge steps, started

    def step(self, z, a, state):
        x, speed, edge, started = state
        z = tf.cast(z, tf.float32)
        a = tf.clip_by_value(tf.cast(a, tf.float32), [-1.0, 0.0, 0.0], [1.0, 1.0, 1.0])
        x = tf.where(started > 0, x, z[:, 0])
        speed = tf.where(started > 0, speed, z[:, 1])
        steer, gas, brake = a[:, 0], a[:, 1], a[:, 2]
        x = tf.clip_by_value(x + 0.25 * steer, 0.0, 1.0)
        speed = tf.clip_by_value(0.5 * speed + 0.5 * (gas - brake), 0.0, 1.0)
        reward = 1.0 - 2.0 * tf.abs(x - 0.5) + 0.1 * (gas - brake)
        at_edge = tf.logical_or(x <= 0.0, x >= 1.0)
        edge = tf.where(at_edge, edge + 1.0, tf.zeros_like(edge))
        done = tf.cast(edge >= 4.0, tf.float32)
        hidden = tf.stack([x, speed, reward, done], axis=1)  # [B, 4]
        return hidden, (x, speed, edge, tf.ones_like(started))

    def sample_next(self, hidden, temperature: float = 1.0, seed=None, z=None):
        x, speed = hidden[:, 0], hidden[:, 1]
        # The frame draws round(x * (S - 2)) and round(speed * (S - 1)) (half to even,
        # like Python's round and tf.round).
        x_hat = tf.round(x * (self.size - 2)) / (self.size - 2)
        speed_hat = tf.round(speed * (self.size - 1)) / (self.size - 1)
        return {
            "z": tf.stack([x_hat, speed_hat], axis=1),
            "reward": hidden[:, 2],
            "done_prob": hidden[:, 3],
        }

    def get_hidden_representation(self, x, mask=None, training=None, position: int = -1):
        hidden = self.call(x)  # [B, T, H]
        return hidden[:, position]

    def call(self, x, training=None):
        x = tf.convert_to_tensor(x, tf.float32)  # [B, T, Z + A]
        state = self.initial_state(tf.shape(x)[0])
        outputs = []
        for t in range(x.shape[1]):
            h, state = self.step(x[:, t, :2], x[:, t, 2:], state)
            outputs.append(h)
        return tf.stack(outputs, axis=1)
