"""Runs the five World Models stages in a chain: here, or on SLURM with afterok dependencies.

    python scripts/pipeline.py --preset=demo --out_dir=runs/demo          # about 15 min, 2-core CPU
    python scripts/pipeline.py --preset=tiny --out_dir=/tmp/tiny          # fake env, seconds
    python scripts/pipeline.py --preset=tiny --environment=CATCH --out_dir=/tmp/catch
    # on a cluster: the tiny preset first (a few minutes of 1-2 CPUs, 2G, one GPU per GPU stage)
    python scripts/pipeline.py --preset=tiny --launcher=slurm --out_dir=$SCRATCH/tiny \
        --gpu_partition=gpu
    python scripts/pipeline.py --preset=world_models --launcher=slurm --out_dir=$SCRATCH/wm \
        --partition=general --gpu_partition=volta-gpu --mem=train_controller=64G

--environment runs the preset's sizes on any environment of rl755/environments/table.py:
its models sized by the entry's ModelPresets, the stages connected by the run's own
directories (no zoo rows needed). Without it (or with the preset's own environment) the
preset runs as it is.

A headline result's whole recipe runs the same way (docs/guides/recipes.md; it prints its
expected wall time): --preset=doom_dream, car_racing_real (tiny_doom_dream,
tiny_car_racing_real: the same steps at tiny sizes). scripts/pack_run.py and
scripts/unpack_run.py carry a run to another machine.

Rerunning with the same --out_dir resumes (finished stages skip their work; on SLURM they are
not submitted again). Ends with a table (stage, wall time, outputs) and the controller's real
score beside the random policy's on the same seeds; pictures go to <out_dir>/pictures. On
SLURM the last job ("report") writes them; `scripts/status.py <out_dir>` follows the chain.

SLURM resources: each stage asks for its preset's (tiny: 1-2 CPUs, 2G), changed by the
"slurm" object of the rl755 config file and by --partition/--gpu_partition/--cpus/--mem/
--gpus/--time/--qos: VALUE for every stage, STAGE=VALUE for one (stage names as in the
table, or "encode" for both encode stages); repeat a flag for several stages. Every job is
checked against the cluster before anything is submitted. See rl755/pipeline/resources.py.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow's first import

from absl import app, flags  # noqa: E402

from rl755 import pipeline  # noqa: E402
from rl755.common.errors import BadInput  # noqa: E402
from rl755.pipeline import recipe_runner  # noqa: E402
from rl755.pipeline.recipe_book import RECIPES  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_enum(
    "preset",
    "demo",
    sorted([*pipeline.PRESETS, *RECIPES]),
    "Sizes of the run, or a headline result's whole recipe (docs/guides/recipes.md).",
)
flags.DEFINE_string("out_dir", None, "Where everything the run makes goes.")
flags.DEFINE_string(
    "environment",
    None,
    "Run the preset on this environment of the table (default: the preset's own), e.g. CATCH.",
)
flags.DEFINE_enum("launcher", "local", ["local", "slurm"], "Run here, or submit to SLURM.")
flags.DEFINE_list("stages", None, "Only these stages (local), e.g. train_controller,evaluate.")
flags.DEFINE_string(
    "until",
    None,
    "Recipe: stop after this step, e.g. collect_random; rerun without it to go on.",
)
flags.DEFINE_integer("seed", 0, "Seed of rollouts, CMA-ES and evaluation.")
flags.DEFINE_integer("num_threads", None, "TF threads of the training stages (default: TF's).")
flags.DEFINE_bool("dry_run", False, "SLURM: write the sbatch scripts without submitting.")
flags.DEFINE_bool(
    "deterministic",
    None,
    "Every stage bit-for-bit repeatable (seeded, TF op determinism, ordered tf.data): the same "
    "command and --seed give the same weights, controller and scores. Default: each stage "
    "decides on its machine, on without a GPU (so on for local CPU runs), off on a GPU. "
    "See docs/getting-started/repeatable-runs.md.",
)
flags.DEFINE_bool(
    "report",
    False,
    "Only write the summary and pictures of the run in --out_dir (SLURM's last job).",
)
_STAGE_VALUE = " [STAGE=]VALUE, repeatable; default: the preset's, or the config file's."
flags.DEFINE_multi_string(
    "partition",
    [],
    "SLURM: partition of the CPU stages (and of GPU stages without a GPU one)." + _STAGE_VALUE,
)
flags.DEFINE_string("gpu_partition", None, "SLURM: partition of the stages asking for GPUs.")
flags.DEFINE_multi_string("cpus", [], "SLURM: CPUs per job, e.g. --cpus=collect=8." + _STAGE_VALUE)
flags.DEFINE_multi_string("mem", [], "SLURM: memory per job, e.g. --mem=16G." + _STAGE_VALUE)
flags.DEFINE_multi_string(
    "gpus", [], "SLURM: GPUs per job; --gpus=0 runs the GPU stages on CPUs." + _STAGE_VALUE
)
flags.DEFINE_multi_string("time", [], "SLURM: time limit, minutes or [D-]H:MM:SS." + _STAGE_VALUE)
flags.DEFINE_multi_string("qos", [], "SLURM: quality of service." + _STAGE_VALUE)
flags.DEFINE_string("gpu_qos", None, "SLURM: quality of service of the GPU stages.")
flags.DEFINE_string("account", None, "SLURM: account to charge.")
flags.mark_flag_as_required("out_dir")

_RESOURCE_FLAGS = ("partition", "cpus", "mem", "gpus", "time", "qos")


def main(argv):
    del argv
    try:
        return _main()
    except BadInput as e:
        print(f"scripts/pipeline.py: {e}", file=sys.stderr)
        return 2


def _main():
    if FLAGS.report:
        if recipe_runner.read_recipe_file(FLAGS.out_dir) is not None:
            recipe_runner.report(FLAGS.out_dir)
        else:
            pipeline.report_from_records(FLAGS.out_dir)
        return 0
    given = [f"--{name}" for name in _RESOURCE_FLAGS if FLAGS[name].value]
    given += [f"--{n}" for n in ("gpu_partition", "gpu_qos", "account") if FLAGS[n].value]
    if FLAGS.launcher != "slurm" and given:
        raise BadInput(f"{', '.join(given)} only apply with --launcher=slurm.")
    if FLAGS.preset in RECIPES:
        if FLAGS.environment:
            raise BadInput("--environment applies to presets; a recipe names its environment.")
        return _recipe()
    if FLAGS.until:
        raise BadInput("--until applies to recipes; a preset runs a subset with --stages.")
    preset = pipeline.get_preset(FLAGS.preset, _environment(FLAGS.environment))
    print(f"Preset {FLAGS.preset}: {preset.description}")
    if FLAGS.launcher == "slurm":
        overrides = pipeline.parse_overrides(
            {name: FLAGS[name].value for name in _RESOURCE_FLAGS},
            gpu_partition=FLAGS.gpu_partition,
            gpu_qos=FLAGS.gpu_qos,
            account=FLAGS.account,
        )
        results = pipeline.submit_slurm(
            preset,
            FLAGS.out_dir,
            FLAGS.seed,
            FLAGS.dry_run,
            overrides=overrides,
            deterministic=FLAGS.deterministic,
        )
        for result in results:
            print(result.summary())
        submitted = [r for r in results if r.job_id and not r.note]
        if not FLAGS.dry_run:
            follow = "Follow them" if submitted else "Nothing to do; status"
            print(
                f"\n{len(submitted)} of {len(results)} stages submitted. "
                f"{follow}: python scripts/status.py {FLAGS.out_dir}"
            )
        return 0
    pipeline.run_local(
        preset,
        FLAGS.out_dir,
        seed=FLAGS.seed,
        stages=FLAGS.stages,
        threads=FLAGS.num_threads,
        deterministic=FLAGS.deterministic,
    )
    return 0


def _environment(name):
    from rl755.environments import Environments

    try:
        return None if name is None else Environments.from_name(name).name
    except ValueError as e:
        raise BadInput(f"--environment: {e}") from None


def _recipe():
    """A headline result's recipe (rl755.pipeline.recipe_runner)."""
    recipe = RECIPES[FLAGS.preset]
    print(f"Recipe {FLAGS.preset}: {recipe.description}")
    for where, estimate in recipe.wall_time.items():
        print(f"  expected wall time, {where}: {estimate}")
    if FLAGS.stages or FLAGS.num_threads:
        raise BadInput(
            "--stages and --num_threads apply to presets; a recipe skips its finished steps "
            "itself and runs each with its own flags."
        )
    if FLAGS.until:
        try:
            recipe.step(FLAGS.until)
        except ValueError as e:
            raise BadInput(f"--until: {e}") from None
    if FLAGS.launcher == "slurm":
        overrides = pipeline.parse_overrides(
            {name: FLAGS[name].value for name in _RESOURCE_FLAGS},
            gpu_partition=FLAGS.gpu_partition,
            gpu_qos=FLAGS.gpu_qos,
            account=FLAGS.account,
        )
        results = recipe_runner.submit_recipe(
            FLAGS.preset,
            FLAGS.out_dir,
            FLAGS.seed,
            FLAGS.dry_run,
            overrides=overrides,
            deterministic=FLAGS.deterministic,
            until=FLAGS.until,
        )
        for result in results:
            print(result.summary())
        return 0
    recipe_runner.run_recipe(
        FLAGS.preset,
        FLAGS.out_dir,
        seed=FLAGS.seed,
        deterministic=FLAGS.deterministic,
        until=FLAGS.until,
    )
    return 0


if __name__ == "__main__":
    app.run(main)
