"""Ships a trained zoo model into the repository (rl755/zoo/shipped/<env folder>/<name>/).

    python scripts/dev/ship_model.py --environment=DOOM_TAKE_COVER --name=raw_rollout_vae_64ld
    python scripts/dev/ship_model.py --environment=DOOM_TAKE_COVER --name=mdn_rnn_64ld \
        --model_dir=$RL755_MODELS_DIR/doom_take_cover/mdn_rnn_64ld_episodes
    python scripts/dev/ship_model.py --environment=DOOM_TAKE_COVER --name=dream_controller

Exports the newest complete checkpoint of the model dir (default: the row's
<models_dir>/<env folder>/<name>), weights as float16, with a shipped.json recording the row,
the source run's code version and this export; a controller ships after its encoder and
sequential model. Then `git add rl755/zoo/shipped`. Library: rl755.zoo.ship.ship_model.
"""

from absl import app, flags

from rl755.common import tf_setup

tf_setup.quiet()

FLAGS = flags.FLAGS
flags.DEFINE_string("environment", None, "Environments name of the zoo row.")
flags.DEFINE_string("name", None, "The zoo row's name (rl755/zoo/rows.py).")
flags.DEFINE_string(
    "model_dir", None, "The trained model's dir (default: <models_dir>/<env folder>/<name>)."
)
flags.DEFINE_string(
    "shipped_dir", None, "Where shipped models go (default: rl755/zoo/shipped, $RL755_SHIPPED_DIR)."
)
flags.mark_flags_as_required(["environment", "name"])


def main(argv):
    del argv
    from rl755.common.errors import exit_on_bad_input
    from rl755.zoo import shipped
    from rl755.zoo.ship import ship_model

    with exit_on_bad_input():
        record = ship_model(FLAGS.environment, FLAGS.name, FLAGS.model_dir, FLAGS.shipped_dir)
    conversion = record.get("conversion")
    error = f", largest float16 error {conversion['max_abs_error']:.2g}" if conversion else ""
    print(
        f"Shipped {record['environment']} {record['name']} ({record['kind']}, "
        f"{record['dtype']}{error}) from {record['source']['model_dir']} to {record['path']}: "
        f"{record['size_bytes'] / 1e6:.2f} MB; all shipped models "
        f"{record['total_shipped_bytes'] / 1e6:.2f} MB of "
        f"{shipped.SIZE_LIMIT_BYTES / 1e6:.0f} MB."
    )
    if record["flags_differ"]:
        print(
            "Warning: the zoo row's flags differ from the source run's: "
            + ", ".join(record["flags_differ"])
            + ". Put the exact flags in rl755/zoo/rows.py and ship again."
        )


if __name__ == "__main__":
    app.run(main)
