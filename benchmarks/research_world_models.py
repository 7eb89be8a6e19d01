"""Infilling pretraining and retrieval against the plain transformer, at equal compute (FAKE_PIXELS).

    python benchmarks/research_world_models.py --out_dir=/tmp/research \
        [--train_steps=1500] [--batch_size=32] [--sequence_length=16] [--num_rollouts=400]

1. Collects `num_rollouts` FAKE_PIXELS episodes for training and a quarter as many held out,
   with smooth random steering pulled towards the middle and random pedals, and encodes them with the environment's exact analytic
   encoder (z = [column, speed, 0, 0]: the toy models' Z = 4; the decoder draws the frame).
2. Trains every variant through stage 4 (`train_sequential_model`) for the same number of
   steps, batch and sequence length: the same training sequences (CPU seconds reported too):
     autoregressive  transformer.tiny_infilling_transformer_with_heads, --task=autoregressive
     mixed           the same model, --task=mixed
     infill->AR      the same model, --task=infill for half the steps, then autoregressive
     transformer     transformer.tiny_deterministic_transformer_with_heads
     retrieval       transformer.tiny_retrieval_transformer_with_heads (+ its index)
3. Scores them with the world-model benchmark (rl755.evaluation) on the held-out episodes:
   next-step error, open-loop error at k = 1, 5, 10, 15 after 4 real steps (latent and
   decoded frames), episode-end calibration, reward error, and the dream-versus-real gap of
   the fixed policies on real FAKE_PIXELS episodes.
Writes <out_dir>/research.json and table.txt and prints the table. Rerunning with the same
out_dir reuses the data and resumes the training. The CarRacing comparison: README section
"Infilling and retrieval transformers".
"""

from __future__ import annotations

import os
import time

import numpy as np
from absl import app, flags

from rl755.common import tf_setup

tf_setup.quiet()

FLAGS = flags.FLAGS
flags.DEFINE_string("out_dir", None, "Where the data, models and results go.")
flags.DEFINE_integer("num_rollouts", 400, "Training episodes (a quarter as many held out).")
flags.DEFINE_integer("train_steps", 1500, "Training steps of every variant.")
flags.DEFINE_integer("batch_size", 32, "Training sequences per step.")
flags.DEFINE_integer("sequence_length", 16, "Training sequence length.")
flags.DEFINE_list("variants", None, "A subset of the variants (default: all).")
flags.DEFINE_integer("num_starts", 256, "Open-loop windows.")
flags.DEFINE_integer("dream_gap_episodes", 20, "Episodes per reference policy (0: none).")
flags.DEFINE_integer("seed", 0, "Seeds the episodes, the training and the benchmark.")
flags.DEFINE_integer("num_threads", None, "TensorFlow thread pool size.")
flags.mark_flag_as_required("out_dir")

INFILLING = "transformer.tiny_infilling_transformer_with_heads"
#: label -> (model, [(task, fraction of the steps)])
VARIANTS = {
    "autoregressive": (INFILLING, [("autoregressive", 1.0)]),
    "mixed": (INFILLING, [("mixed", 1.0)]),
    "infill->AR": (INFILLING, [("infill", 0.5), ("autoregressive", 0.5)]),
    "transformer": (
        "transformer.tiny_deterministic_transformer_with_heads",
        [("autoregressive", 1.0)],
    ),
    "retrieval": ("transformer.tiny_retrieval_transformer_with_heads", [("autoregressive", 1.0)]),
}
Z = 4


def exact_encoder():
    """FAKE_PIXELS' analytic encoder padded to Z = 4, with a decoder that draws the frame."""
    import tensorflow as tf

    from rl755.testing.fake_world_model import FakeLatentEncoder

    class PaddedEncoder(FakeLatentEncoder):
        @property
        def representation_size(self) -> int:
            return Z

        def compute_full_representation(self, x, training=None):
            z, _ = super().compute_full_representation(x, training)
            z = tf.concat([z, tf.zeros_like(z)], axis=1)
            return z, {"std_devs": tf.zeros_like(z)}

        def decode(self, z):
            z = np.clip(np.asarray(z)[:, :2], 0.0, 1.0)
            s = self.size
            frames = np.zeros((len(z), s, s, 3), np.float32)
            for i, (x, speed) in enumerate(z):
                col = int(round(x * (s - 2)))
                frames[i, : s - 2, col : col + 2] = (1.0, 128 / 255, 0.0)
                frames[i, s - 1, : int(round(speed * (s - 1))) + 1, 2] = 200 / 255
            return tf.constant(frames)

    return PaddedEncoder()


def collect_encoded(directory: str, num_rollouts: int, seed: int = 0) -> str:
    """Writes encoded-{train,validation} shards of FAKE_PIXELS episodes (smooth random steering,
    random pedals) under `directory`; returns their pattern. Kept when already there."""
    from rl755.common import sharded_io
    from rl755.common.structs import Rollout
    from rl755.testing import fake_env

    pattern = os.path.join(directory, "encoded-{split}*.tfrecord-*")
    if os.path.exists(os.path.join(directory, "dataset_info.json")):
        return pattern
    os.makedirs(directory, exist_ok=True)
    encoder = exact_encoder()
    rng = np.random.default_rng(seed)
    for split, count, offset in (
        ("train", num_rollouts, 0),
        ("validation", max(2, num_rollouts // 4), 10**6),
    ):
        rollouts = []
        for i in range(count):
            env = fake_env.FakePixelEnv()
            frame, _ = env.reset(seed=seed + offset + i)
            frames, actions, rewards, done, steer = [], [], [], False, 0.0
            for _ in range(fake_env.MAX_STEPS):
                # Smooth noise pulled to the middle: about 3 in 4 episodes run all 24 steps.
                pull = 0.5 * (0.5 - env._x)
                steer = float(np.clip(0.7 * steer + 0.6 * rng.normal() + pull, -1, 1))
                action = np.array([steer, rng.uniform(), rng.uniform() * 0.5], np.float32)
                frames.append(frame)
                frame, r, done, _, _ = env.step(action)
                actions.append(action)
                rewards.append(r)
                if done:
                    break
            z = encoder.compute_representation(np.stack(frames)).numpy()
            rollouts.append(Rollout(list(z), actions, rewards, done))
        path = os.path.join(directory, sharded_io.shard_name(f"encoded-{split}", 0, 1))
        sharded_io.write_tfrecord(path, [r.serialize() for r in rollouts], "GZIP")
    sharded_io.write_dataset_info(
        directory, {"environment": "FAKE_PIXELS", "representation_size": Z, "has_std_devs": False}
    )
    return pattern


def train_variants(out_dir, pattern, variants, train_steps, batch_size, sequence_length, seed=0):
    """Trains each variant (resuming); returns {label: {"model_dir", "cpu_seconds", ...}}."""
    import tensorflow as tf

    from rl755.models.sequential.train import train_sequential_model

    runs = {}
    for label in variants:
        model, schedule = VARIANTS[label]
        model_dir = os.path.join(out_dir, "models", label.replace(">", "").replace("-", "_"))
        cpu, wall, done = 0.0, 0.0, 0
        for task, fraction in schedule:
            done += int(round(fraction * train_steps))
            tf.keras.utils.set_random_seed(seed)
            c0, t0 = time.process_time(), time.perf_counter()
            train_sequential_model(
                model_dir=model_dir,
                train_steps=done,
                environment="FAKE_PIXELS",
                model=model,
                rollouts_dataset="VaeEncodedRollouts",
                rollouts_pattern=pattern,
                batch_size=batch_size,
                sequence_length=sequence_length,
                learning_rate=1e-3,
                save_every_n_steps=max(1, done),
                validation_steps=0,
                task=task,
                run_flags={"benchmark": "research_world_models", "variant": label, "task": task},
            )
            cpu += time.process_time() - c0
            wall += time.perf_counter() - t0
        runs[label] = dict(
            model_dir=model_dir,
            model=model,
            schedule=schedule,
            train_steps=done,
            training_sequences=done * batch_size,
            task=" then ".join(task for task, _ in schedule),
            cpu_seconds=cpu,
            wall_seconds=wall,
        )
    return runs


def evaluate(runs, pattern, num_starts=256, dream_gap_episodes=20, seed=0):
    """The world-model benchmark of every trained variant on the held-out episodes."""
    from rl755.environments import Environments
    from rl755.evaluation import benchmark, gap
    from rl755.evaluation.rollouts import load_rollouts
    from rl755.evaluation.run import PatternRollouts
    from rl755.models.sequential.train import load_trained_model

    data = load_rollouts(PatternRollouts(Environments.FAKE_PIXELS, pattern), "validation")
    settings = benchmark.Settings(
        horizons=(1, 5, 10, 15), context_length=4, num_starts=num_starts, chunk_length=16, seed=seed
    )
    encoder = exact_encoder()
    reports = []
    for label, run in runs.items():
        model = load_trained_model(run["model_dir"])
        gap_fn = None
        if dream_gap_episodes > 0:

            def gap_fn(model=model, label=label):
                return gap.model_dream_gap(
                    "FAKE_PIXELS",
                    exact_encoder,
                    lambda: model,
                    num_episodes=dream_gap_episodes,
                    seed=seed + 2 * 10**6,
                    max_steps=24,
                    model_name=label,
                    encoder_name="exact",
                )

        report = benchmark.evaluate_world_model(
            label, model, data, settings, encoder.decode, gap_fn
        )
        report.summary["training"] = {k: v for k, v in run.items() if k != "model_dir"}
        reports.append(report)
    return reports, benchmark.baselines(data, settings), data


def run(
    out_dir,
    variants=None,
    num_rollouts=400,
    train_steps=1500,
    batch_size=32,
    sequence_length=16,
    num_starts=256,
    dream_gap_episodes=20,
    seed=0,
) -> dict:
    """The whole comparison (module docstring); returns the JSON dict (+ "table")."""
    from rl755.common import sharded_io
    from rl755.evaluation import benchmark

    variants = list(variants or VARIANTS)
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise ValueError(f"Unknown variants {unknown}; valid: {', '.join(VARIANTS)}.")
    pattern = collect_encoded(os.path.join(out_dir, "data"), num_rollouts, seed)
    runs = train_variants(
        out_dir, pattern, variants, train_steps, batch_size, sequence_length, seed
    )
    reports, base, data = evaluate(runs, pattern, num_starts, dream_gap_episodes, seed)
    table = benchmark.format_table(reports, base)
    result = {
        "settings": dict(
            num_rollouts=num_rollouts,
            train_steps=train_steps,
            batch_size=batch_size,
            sequence_length=sequence_length,
            seed=seed,
            held_out_rollouts=data.num_rollouts,
            held_out_steps=int(data.lengths.sum()),
        ),
        "baselines": base,
        "models": [r.summary for r in reports],
    }
    sharded_io.write_json_atomic(os.path.join(out_dir, "research.json"), result)
    sharded_io.write_text_atomic(os.path.join(out_dir, "table.txt"), table + "\n")
    return {**result, "table": table}


def main(argv):
    del argv
    tf_setup.limit_threads(FLAGS.num_threads)
    out = run(
        FLAGS.out_dir,
        FLAGS.variants,
        FLAGS.num_rollouts,
        FLAGS.train_steps,
        FLAGS.batch_size,
        FLAGS.sequence_length,
        FLAGS.num_starts,
        FLAGS.dream_gap_episodes,
        FLAGS.seed,
    )
    s = out["settings"]
    print(
        f"FAKE_PIXELS: {s['num_rollouts']} training episodes, {s['train_steps']} steps x "
        f"{s['batch_size']} x {s['sequence_length']} per model; {s['held_out_rollouts']} held-out "
        f"episodes ({s['held_out_steps']} steps):"
    )
    print(out["table"])


if __name__ == "__main__":
    app.run(main)
