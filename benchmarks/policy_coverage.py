"""How much of the track the random policies show: RandomPolicy vs HastingsRandomPolicy.

    python benchmarks/policy_coverage.py --num_rollouts=4 --max_steps=300

Prints, per policy: share of frames with grey road just ahead of the car, track tiles
visited per rollout (driving forward), return, and the lag-1 autocorrelation of each
action dimension (smoothness). "Hastings, no track pull" is the same Perlin noise without
the pull toward the visible road.
"""

from absl import app, flags

from rl755.common import tf_setup

tf_setup.quiet()

FLAGS = flags.FLAGS
flags.DEFINE_integer("num_rollouts", 4, "Rollouts per policy.")
flags.DEFINE_integer("max_steps", 300, "Steps per rollout.")
flags.DEFINE_integer("seed", 1, "Base seed (the same tracks for every policy).")


def main(argv):
    del argv
    from rl755.data_gen.policy_stats import measure_policy
    from rl755.environments import Environments
    from rl755.policies import resolve_policy

    candidates = {
        "RandomPolicy": resolve_policy("CAR_RACING", "RandomPolicy"),
        "Hastings, no track pull": resolve_policy(
            "CAR_RACING", "HastingsRandomPolicy", track_pull=0.0
        ),
        "HastingsRandomPolicy": resolve_policy("CAR_RACING", "HastingsRandomPolicy"),
    }
    print(f"CAR_RACING, {FLAGS.num_rollouts} rollouts x {FLAGS.max_steps} steps, seed {FLAGS.seed}")
    for name, fn in candidates.items():
        s = measure_policy(
            Environments.CAR_RACING, fn, FLAGS.num_rollouts, FLAGS.max_steps, FLAGS.seed
        )
        print(
            f"{name:26s} road ahead {s['road_fraction']:.2f} | tiles/rollout "
            f"{s['tiles_per_rollout']:6.1f} | return {s['return_per_rollout']:7.1f} | "
            f"action autocorr {s['action_autocorr']}"
        )


if __name__ == "__main__":
    app.run(main)
