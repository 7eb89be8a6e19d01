"""Evaluating controllers inside the learned model ("dream"), batched on one device.

    dream = DreamEvaluator(sequential_model, controller, initial_z, max_steps=1000, temperature=1.15)
    out = dream.evaluate(params, trial_ids, seed=gen)     # params [P, N], trial_ids [T]
    out["returns"], out["steps"], out["reward_std"]      # [P, T] each

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
                                threshold is brittle where the head is not yet sharp:
                                docs/results/doom-take-cover.md has an MDN-RNN whose p(done) at a dream's
                                first step is 0.16, so 0.09 ends
                                every dream there, while Bernoulli draws (0) gave episode
                                lengths close to the real game's.
  done_prob_scale = k (default 1) multiplies done_prob before either rule (k p >= 1 ends): k > 1
                                is a harsher dream for a head that under-predicts episode
                                ends where the controller goes (`scripts/models/dream_gap.py`
                                measures that: mean lengths and end rates, dream and real).

An ensemble (`ensemble=(m_1, ..., m_K)`: more sequential models of the same Z and actions,
e.g. MDN-RNNs fine-tuned on other data or from other seeds) makes the dream pessimistic where
the models disagree, so that a controller does not win by exploiting one model's errors (what
it did on CarRacing: experiments/car_racing/dream_iterations/README.md). Every member
steps on the same (z_t, a_t) with its own state; with M = K + 1 members (the first is
`sequential_model`, whose h the controller reads):
  reward_t    = mean_m reward_m - disagreement_penalty * std_m reward_m  (population std)
  done_prob_t = mean_m done_prob_m
  z_{t+1}     = the sample of one member, drawn uniformly for each episode and step.
`evaluate` also returns each episode's mean per-step std of the members' rewards. K = 0 is
the single-model dream, draw for draw.

Every draw is stateless, keyed by `evaluate`'s `seed` and the step: the same seed replays the
same dreams, another seed (CMA-ES: one per generation) draws new ones. Episode t of every
population member starts from the same initial z (`initial_z[trial_ids[t]]`: real reset frames, encoded),
as real trials share seeds.
"""

from __future__ import annotations

import logging

import numpy as np
import tensorflow as tf

from rl755.controller.agent import controller_features

log = logging.getLogger(__name__)


def encoded_initial_states(make_env, encode_fn, seeds) -> np.ndarray:
    """Resets a real environment with each seed and encodes the first frame: [K, Z]."""
    env = make_env()
    try:
        frames = np.stack([env.reset(seed=int(s))[0] for s in seeds])
    finally:
        env.close()
    return np.asarray(encode_fn(frames), np.float32)


def check_dream_model(name: str, encoder, seq, temperature: float, max_steps: int) -> None:
    """A ValueError unless `seq` (called `name` in messages) can dream beside `encoder`: a
    reward head and `sample_next`; a warning if it has no episode-end head (dreams then run
    `max_steps` steps)."""
    if seq is None or encoder is None:
        raise ValueError("--mode=dream needs an --encoder and a --sequential_model.")
    if getattr(seq, "has_reward_head", True) is False:
        raise ValueError(
            f"--mode=dream needs a sequential model with a reward head; {name} "
            "has none (train one with reward/done heads, e.g. mdn_rnn.mdn_rnn_with_heads)."
        )
    if getattr(seq, "has_done_head", True) is False:
        log.warning("%s has no episode-end head: dream episodes run %d steps.", name, max_steps)
    try:
        seq.sample_next(
            tf.zeros([1, seq.hidden_size]),
            temperature=temperature,
            z=tf.zeros([1, seq.representation_size]),
        )
    except NotImplementedError as e:
        raise ValueError(f"--mode=dream needs a sequential model with sample_next: {e}") from e


def check_disagreement_penalty(penalty: float, ensemble) -> None:
    """A ValueError for a disagreement penalty without ensemble members to disagree (a flag
    that would silently do nothing)."""
    if penalty and not ensemble:
        raise ValueError(
            "--dream_disagreement_penalty weighs the disagreement of a dream ensemble: give "
            "--dream_ensemble or --dream_ensemble_dirs too (or leave the penalty at 0)."
        )


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
        ensemble=(),
        disagreement_penalty: float = 0.0,
        done_prob_scale: float = 1.0,
    ):
        """`action_fn` maps controller outputs [B, A] (TF) to the actions the model was trained
        on, e.g. `Environments.DOOM_TAKE_COVER.to_stored_action` (one-hot of the argmax) for
        discrete environments; None feeds the outputs as they are (continuous actions).
        `end_episodes=False` ignores the episode-end head: every dream lasts max_steps (models
        without a trained done head; benchmarks at random weights). `cell_state`: the
        controller also reads the LSTM's cell c. `done_threshold`, `done_prob_scale`, `ensemble`,
        `disagreement_penalty`: see the module docstring."""
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
        if not float(done_prob_scale) > 0:
            raise ValueError(f"done_prob_scale must be > 0, got {done_prob_scale}.")
        ensemble = tuple(ensemble)
        for i, member in enumerate(ensemble):
            sizes = (member.representation_size, member.action_size)
            if sizes != (sequential_model.representation_size, sequential_model.action_size):
                raise ValueError(
                    f"Ensemble member {i + 1} has Z, A = {sizes}; the dream's model has "
                    f"{(sequential_model.representation_size, sequential_model.action_size)}: "
                    "every member must read and predict the same representation and actions."
                )
        if disagreement_penalty < 0:
            raise ValueError(f"disagreement_penalty must be >= 0, got {disagreement_penalty}.")
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
        self.done_prob_scale = float(done_prob_scale)
        self.ensemble = ensemble
        self.disagreement_penalty = float(disagreement_penalty)
        self._rollout_fn = tf.function(self._rollout)

    def _rollout(self, params, z0, seed):
        # params [P, N]; z0 [P * T, Z]; seed [2] int32. Stateless draws (seed[0], key): the
        # episode ends 2t, the first model's sample 2t + 1, member m's sample 2Lm + 2t + 1,
        # the member whose z is kept 2L(M) + t (L = max_steps, M members).
        p = tf.shape(params)[0]
        b = tf.shape(z0)[0]
        t_per = b // p
        model, ctrl = self.model, self.controller
        members = (model, *self.ensemble)
        span = 2 * self.max_steps
        states = tuple(m.initial_state(z0.shape[0]) for m in members)
        h = tf.zeros([b, model.hidden_size], tf.float32)
        total = tf.zeros([b], tf.float32)
        spread = tf.zeros([b], tf.float32)  # sum over alive steps of the rewards' std
        alive = tf.ones([b], tf.float32)
        steps = tf.zeros([b], tf.float32)
        z = z0

        def body(t, z, h, states, total, spread, alive, steps):
            features = controller_features(z, h, states[0], model, self.cell_state)  # [B, D]
            features = tf.reshape(features, [p, t_per, -1])  # [P, T, D]
            a = tf.reshape(ctrl.act(params, features), [b, ctrl.action_size])  # [B, A]
            if self.action_fn is not None:
                a = self.action_fn(a)  # e.g. one-hot for discrete environments
            hs, new_states, outs = [], [], []
            for m, (member, member_state) in enumerate(zip(members, states)):
                h_m, member_state = member.step(z, a, member_state)
                # Stateless draws keyed by (seed, step): each generation's `seed` gives its
                # own dreams, and the same seed the same ones.
                key = tf.stack([seed[0], span * m + 2 * t + 1])
                outs.append(member.sample_next(h_m, temperature=self.temperature, seed=key, z=z))
                hs.append(h_m)
                new_states.append(member_state)
            h = hs[0]
            if len(members) == 1:
                nxt = outs[0]
                reward = tf.cast(nxt["reward"], tf.float32)
                done_prob = tf.cast(nxt["done_prob"], tf.float32)
                z_next = tf.cast(nxt["z"], tf.float32)
                reward_std = tf.zeros([b], tf.float32)
            else:
                rewards = tf.stack([tf.cast(o["reward"], tf.float32) for o in outs])  # [M, B]
                reward_std = tf.math.reduce_std(rewards, axis=0)
                reward = tf.reduce_mean(rewards, axis=0) - self.disagreement_penalty * reward_std
                done_prob = tf.reduce_mean(
                    tf.stack([tf.cast(o["done_prob"], tf.float32) for o in outs]), axis=0
                )
                zs = tf.stack([tf.cast(o["z"], tf.float32) for o in outs], axis=1)  # [B, M, Z]
                pick = tf.random.stateless_uniform(
                    [b],
                    seed=tf.stack([seed[0], span * len(members) + t]),
                    maxval=len(members),
                    dtype=tf.int32,
                )
                z_next = tf.gather(zs, pick, axis=1, batch_dims=1)  # [B, Z]
            total += alive * reward
            spread += alive * reward_std
            steps += alive
            if self.done_prob_scale != 1.0:  # a product above 1 ends the episode either way
                done_prob = done_prob * self.done_prob_scale
            if self.done_threshold > 0:
                done = tf.cast(done_prob > self.done_threshold, tf.float32)
            else:
                u = tf.random.stateless_uniform([b], seed=tf.stack([seed[0], 2 * t]))
                done = tf.cast(u < done_prob, tf.float32)
            if self.end_episodes:
                alive *= 1.0 - done
            return t + 1, z_next, h, tuple(new_states), total, spread, alive, steps

        def cond(t, z, h, states, total, spread, alive, steps):
            return tf.logical_and(t < self.max_steps, tf.reduce_max(alive) > 0)

        loop = (tf.constant(0), z, h, states, total, spread, alive, steps)
        _, _, _, _, total, spread, _, steps = tf.while_loop(cond, body, loop)
        shape = [p, t_per]
        return tf.reshape(total, shape), tf.reshape(steps, shape), tf.reshape(spread, shape)

    def evaluate(self, params: np.ndarray, trial_ids, seed: int = 0) -> dict:
        """params [P, N], trial_ids [T] (rows of initial_z) -> returns, steps,
        reward_std (the members' per-step reward std, averaged over the episode; 0 without
        an ensemble): [P, T]."""
        params = np.asarray(params, np.float32)
        trial_ids = np.asarray(trial_ids, np.int64)
        z0 = np.tile(self.initial_z[trial_ids], (len(params), 1))  # [P * T, Z]
        total, steps, spread = self._rollout_fn(
            tf.constant(params), tf.constant(z0), tf.constant([seed % (2**31), 1], tf.int32)
        )
        return {
            "returns": total.numpy().astype(np.float64),
            "steps": steps.numpy().astype(np.int64),
            "reward_std": (spread / tf.maximum(steps, 1.0)).numpy().astype(np.float64),
        }
