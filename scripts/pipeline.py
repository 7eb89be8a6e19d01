"""Runs the five World Models stages in a chain: here, or on SLURM with afterok dependencies.

    python scripts/pipeline.py --preset=demo --out_dir=runs/demo          # ~30 min, 2-core CPU
    python scripts/pipeline.py --preset=world_models --out_dir=/pine/scr/me/wm --launcher=slurm
    python scripts/pipeline.py --preset=tiny --out_dir=/tmp/tiny          # fake env, seconds

Rerunning with the same --out_dir resumes (finished stages skip their work). Ends with a
table (stage, wall time, outputs) and the controller's real score beside the random
policy's on the same seeds; pictures go to <out_dir>/pictures. See rl755/pipeline/.
"""

from absl import app, flags

from rl755 import pipeline

FLAGS = flags.FLAGS
flags.DEFINE_enum("preset", "demo", sorted(pipeline.PRESETS), "Sizes of the run.")
flags.DEFINE_string("out_dir", None, "Where everything the run makes goes.")
flags.DEFINE_enum("launcher", "local", ["local", "slurm"], "Run here, or submit to SLURM.")
flags.DEFINE_list("stages", None, "Only these stages (local), e.g. train_controller,evaluate.")
flags.DEFINE_integer("seed", 0, "Seed of rollouts, CMA-ES and evaluation.")
flags.DEFINE_integer("num_threads", None, "TF threads of the training stages (default: TF's).")
flags.DEFINE_bool("dry_run", False, "SLURM: write the sbatch scripts without submitting.")
flags.DEFINE_bool(
    "deterministic",
    None,
    "Every stage bit-for-bit repeatable (seeded, TF op determinism, ordered tf.data): the same "
    "command and --seed give the same weights, controller and scores. Default: each stage "
    "decides on its machine, on without a GPU (so on for local CPU runs), off on a GPU. "
    "See README 'Repeatable runs'.",
)
flags.mark_flag_as_required("out_dir")


def main(argv):
    del argv
    preset = pipeline.get_preset(FLAGS.preset)
    print(f"Preset {FLAGS.preset}: {preset.description}")
    if FLAGS.launcher == "slurm":
        results = pipeline.submit_slurm(
            preset, FLAGS.out_dir, FLAGS.seed, FLAGS.dry_run, deterministic=FLAGS.deterministic
        )
        for result in results:
            print(result.summary())
        return
    pipeline.run_local(
        preset,
        FLAGS.out_dir,
        seed=FLAGS.seed,
        stages=FLAGS.stages,
        threads=FLAGS.num_threads,
        deterministic=FLAGS.deterministic,
    )


if __name__ == "__main__":
    app.run(main)
