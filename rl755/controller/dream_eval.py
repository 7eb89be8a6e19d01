"""Evaluating controllers inside the learned model ("dream"), batched on one device.

    dream = DreamEvaluator(sequential_model, controller, initial_z, max_steps=1000, temperature=1.15)
    out = dream.evaluate(params, trial_ids, seed=gen)     # params [P, N], trial_ids [T]
    out["returns"], out["steps"]                          # [P, T], [P, T]

All P x T episodes run together in one TF loop (`tf.while_loop` inside one tf.function):
the controller acts on [z_t, h_t] (+ the LSTM cell c_t with `cell_state=True`; batched
[P, T, D] x params [P, N]), the model steps h_{t+1}, state = step(z_t, a_t, state) and samples
{z_{t+1}, reward_t, done_prob_t} with `sample_next(h_{t+1}, temperature, seed, z=z_t)`.

An episode ends after `max_steps`, or when the episode-end head says so:
  done_threshold = 0 (default)  a Bernoulli(done_prob) draw each step (a calibrated hazard:
                                `done_probability` divides a weighted head's weight out of
                                its odds, rl755/models/common/sequential.py);
  done_threshold = p > 0        as soon as done_prob > p, deterministically. World Models'
                                Doom dream ends an episode when the done logit is > 0 with ends
                                weighted 10x in training, i.e. at a calibrated probability
                                above 1/11 ~ 0.09: `done_threshold=0.09` on any head. A
                                threshold is brittle where the head is not yet sharp: README
                                "DoomTakeCover" has an MDN-RNN whose p(done) at a dream's
                                first step is 0.16, so 0.09 ends
                                every dream there, while Bernoulli draws (0) gave episode
                                lengths close to the real game's.

Every draw is stateless, keyed by `evaluate`'s `seed` and the step: the same seed replays the
same dreams, another seed (CMA-ES: one per generation) draws new ones. Episode t of every
member starts from the same initial z (`initial_z[trial_ids[t]]`: real reset frames, encoded),
as real trials share seeds.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from rl755.controller.agent import controller_features


def encoded_initial_states(make_env, encode_fn, seeds) -> np.ndarray:
    """Resets a real environment with each seed and encodes the first frame: [K, Z]."""
    env = make_env()
    try:
        frames = np.stack([env.reset(seed=int(s))[0] for s in seeds])
    finally:
        env.close()
    return np.asarray(encode_fn(frames), np.float32)


class DreamEvaluator:
    """Batched dream rollouts of many controllers in a sequential model."""

    def __init__(
        self,
        sequential_model,
        controller,
        initial_z: np.ndarray,
        max_steps: int,
        temperature: float = 1.0,
        action_fn=None,
        end_episodes: bool = True,
        cell_state: bool = False,
        done_threshold: float = 0.0,
    ):
        """`action_fn` maps controller outputs [B, A] (TF) to the actions the model was trained
        on, e.g. `Environments.DOOM_TAKE_COVER.to_stored_action` (one-hot of the argmax) for
        discrete environments; None feeds the outputs as they are (continuous actions).
        `end_episodes=False` ignores the episode-end head: every dream lasts max_steps (models
        without a trained done head; benchmarks at random weights). `cell_state`: the
        controller also reads the LSTM's cell c. `done_threshold`: see the module docstring."""
        want = sequential_model.representation_size + sequential_model.hidden_size
        what = "Z + H"
        if cell_state:
            want += sequential_model.cell_size
            what = "Z + H + C"
        if controller.input_size != want:
            raise ValueError(
                f"Controller input size {controller.input_size} does not match the sequential "
                f"model's {what} = {want}."
            )
        if not 0.0 <= float(done_threshold) < 1.0:
            raise ValueError(f"done_threshold must be in [0, 1), got {done_threshold}.")
        initial_z = np.asarray(initial_z, np.float32)
        if initial_z.ndim != 2 or initial_z.shape[1] != sequential_model.representation_size:
            raise ValueError(
                f"initial_z must be [K, {sequential_model.representation_size}], got "
                f"{initial_z.shape}."
            )
        self.model = sequential_model
        self.controller = controller
        self.initial_z = initial_z
        self.max_steps = int(max_steps)
        self.temperature = float(temperature)
        self.action_fn = action_fn
        self.end_episodes = bool(end_episodes)
        self.cell_state = bool(cell_state)
        self.done_threshold = float(done_threshold)
        self._rollout_fn = tf.function(self._rollout)

    def _rollout(self, params, z0, seed):
        # params [P, N]; z0 [P * T, Z]; seed [2] int32 (stateless draws: seed[0], 2t + k).
        p = tf.shape(params)[0]
        b = tf.shape(z0)[0]
        t_per = b // p
        model, ctrl = self.model, self.controller
        state = model.initial_state(z0.shape[0])
        h = tf.zeros([b, model.hidden_size], tf.float32)
        total = tf.zeros([b], tf.float32)
        alive = tf.ones([b], tf.float32)
        steps = tf.zeros([b], tf.float32)
        z = z0

        def body(t, z, h, state, total, alive, steps):
            features = controller_features(z, h, state, model, self.cell_state)  # [B, D]
            features = tf.reshape(features, [p, t_per, -1])  # [P, T, D]
            a = tf.reshape(ctrl.act(params, features), [b, ctrl.action_size])  # [B, A]
            if self.action_fn is not None:
                a = self.action_fn(a)  # e.g. one-hot for discrete environments
            h, state = model.step(z, a, state)
            # Stateless draws keyed by (seed, step): each generation's `seed` gives its own
            # dreams, and the same seed the same ones.
            nxt = model.sample_next(
                h, temperature=self.temperature, seed=tf.stack([seed[0], 2 * t + 1]), z=z
            )
            total += alive * tf.cast(nxt["reward"], tf.float32)
            steps += alive
            done_prob = tf.cast(nxt["done_prob"], tf.float32)
            if self.done_threshold > 0:
                done = tf.cast(done_prob > self.done_threshold, tf.float32)
            else:
                u = tf.random.stateless_uniform([b], seed=tf.stack([seed[0], 2 * t]))
                done = tf.cast(u < done_prob, tf.float32)
            if self.end_episodes:
                alive *= 1.0 - done
            return t + 1, tf.cast(nxt["z"], tf.float32), h, state, total, alive, steps

        def cond(t, z, h, state, total, alive, steps):
            return tf.logical_and(t < self.max_steps, tf.reduce_max(alive) > 0)

        _, _, _, _, total, _, steps = tf.while_loop(
            cond, body, (tf.constant(0), z, h, state, total, alive, steps)
        )
        return tf.reshape(total, [p, t_per]), tf.reshape(steps, [p, t_per])

    def evaluate(self, params: np.ndarray, trial_ids, seed: int = 0) -> dict:
        """params [P, N], trial_ids [T] (rows of initial_z) -> returns, steps: [P, T]."""
        params = np.asarray(params, np.float32)
        trial_ids = np.asarray(trial_ids, np.int64)
        z0 = np.tile(self.initial_z[trial_ids], (len(params), 1))  # [P * T, Z]
        total, steps = self._rollout_fn(
            tf.constant(params), tf.constant(z0), tf.constant([seed % (2**31), 1], tf.int32)
        )
        return {
            "returns": total.numpy().astype(np.float64),
            "steps": steps.numpy().astype(np.int64),
        }
