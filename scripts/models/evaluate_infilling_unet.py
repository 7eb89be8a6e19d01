"""Compares trained infilling U-Nets on the same held-out windows: error, SSIM, sharpness, diversity.

    python scripts/models/evaluate_infilling_unet.py \
        --model_dir=$HOME/rl755_models/doom_take_cover/unet_l2 \
        --model_dir=$HOME/rl755_models/doom_take_cover/unet_gan \
        --num_examples=512 --num_draws=4 --out_dir=$HOME/rl755_runs/unet_cmp

Writes infilling_benchmark.json, table.txt and infills.png into --out_dir and prints the
table. Library: rl755.models.infilling.eval.evaluate_infilling_models.
"""

from absl import app, flags

from rl755.common import tf_setup

tf_setup.quiet()

FLAGS = flags.FLAGS
flags.DEFINE_multi_string("model_dir", None, "A train_infilling_unet.py --model_dir (repeatable).")
flags.DEFINE_list("names", None, "A name per --model_dir (default: the directories' names).")
flags.DEFINE_string("out_dir", None, "Where the JSON, table and picture go.")
flags.DEFINE_enum("split", "validation", ["train", "validation"], "Rollouts to draw windows from.")
flags.DEFINE_integer("num_examples", 256, "Windows evaluated (the same for every model).")
flags.DEFINE_integer("num_draws", 4, "Noise draws per window (>= 2).")
flags.DEFINE_integer("batch_size", 64, "Windows per forward pass.")
flags.DEFINE_integer("seed", 0, "Picks the windows, masks and noise.")
flags.DEFINE_string(
    "rollouts_pattern", None, "Glob with '{split}' (default: where the first model trained)."
)
flags.DEFINE_integer("picture_examples", 6, "Windows shown in infills.png.")
flags.DEFINE_integer("num_threads", None, "TensorFlow thread pool size (default: TF's own).")
for _name in ("model_dir", "out_dir"):
    flags.mark_flag_as_required(_name)


def main(argv):
    del argv
    from rl755.common import run_record
    from rl755.common.errors import BadInput
    from rl755.models.infilling.eval import evaluate_infilling_models

    tf_setup.limit_threads(FLAGS.num_threads)
    try:
        out = evaluate_infilling_models(
            model_dirs=FLAGS.model_dir,
            out_dir=FLAGS.out_dir,
            names=FLAGS.names,
            split=FLAGS.split,
            num_examples=FLAGS.num_examples,
            num_draws=FLAGS.num_draws,
            batch_size=FLAGS.batch_size,
            seed=FLAGS.seed,
            rollouts_pattern=FLAGS.rollouts_pattern,
            picture_examples=FLAGS.picture_examples,
            run_flags=run_record.flags_dict(),
        )
    except BadInput as e:
        raise app.UsageError(str(e)) from e
    s = out["settings"]
    print(f"{s['environment']} {s['task']}, K = {s['context_frames']}, {s['examples']} windows:")
    print(out["table"])
    print(f"Wrote {', '.join(out['files'].values())}.")


if __name__ == "__main__":
    app.run(main)
