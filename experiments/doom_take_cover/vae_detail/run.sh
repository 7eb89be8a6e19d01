#!/bin/bash
# The shipped VAE trained further, then the world model and a controller on its z (README.md
# here). Rerun to resume: every stage skips what it finished; RUNS= moves the data.
set -euo pipefail
cd "$(dirname "$0")/../../.."
PY=${PY:-.venv/bin/python}
RUNS=${RUNS:-/work/runs}
VAE_STEPS=${VAE_STEPS:-3000}
MDN_STEPS=${MDN_STEPS:-750}
R=$RUNS/doom_dream/data/doom_take_cover/raw_rollouts   # set 1: the doom_dream recipe's (seed 755)
L=$RUNS/doom_longer/data                                # sets 2-4: ../longer_mdn_rnn/run.sh's
O=$RUNS/doom_vae
E=$O/data/encoded_rollouts
V=$O/models/vae_64ld_more
Z=rl755/zoo/shipped/doom_take_cover
COLLECT="scripts/data_gen/car_racing/parallel_rollout_main.py --environment=DOOM_TAKE_COVER --max_steps=2100 --parallelism=2 --out_format=tfrecord --compression=GZIP"

# 0. Set 1 (the recipe's first stage; stopped once collect_random is done).
if [ ! -e "$R/dataset_info.json" ]; then
  echo "Collect set 1 first: $PY scripts/pipeline.py --preset=doom_dream --out_dir=$RUNS/doom_dream" \
    "(stop it when collect_random is done)" >&2
  exit 1
fi

# 1. The shipped VAE (3,000 steps of 100 frames) trained VAE_STEPS more on set 1.
echo "== $(date -Is) VAE"
$PY scripts/models/train_obs_encoder.py --environment=DOOM_TAKE_COVER --model=vae.Vae \
  --representation_size=64 --batch_size=100 --obs_sampled_per_rollout=32 --learning_rate=5e-4 \
  --save_every_n_steps=500 --train_steps=$VAE_STEPS --initial_weights=$Z/raw_rollout_vae_64ld \
  "--rollouts_pattern=$R/rollouts-{split}*.tfrecord-*" --model_dir=$V

# 2. Sets 2-4 as ../longer_mdn_rnn/run.sh collects them (same seeds, so the same rollouts).
echo "== $(date -Is) collect sets 2-4"
$PY $COLLECT --num_rollouts=400 --out_dir=$L/raw_rollouts_controller --seed=756 \
  --policy=controller --controller_dir=$Z/dream_controller_episodes --random_action_prob=0.3
$PY $COLLECT --num_rollouts=800 --out_dir=$L/raw_rollouts_hold --seed=757 \
  --policy=RepeatRandomPolicy --policy_kwargs=min_repeat=20,max_repeat=200
$PY $COLLECT --num_rollouts=400 --out_dir=$L/raw_rollouts_shipped --seed=762 \
  --policy=controller --controller_dir=$Z/dream_controller --random_action_prob=0.3

# 3. Every set encoded with the new VAE, both splits.
encode() {  # encode NAME RAW_DIR
  for split in train validation; do
    echo "== $(date -Is) encode $1 $split"
    $PY scripts/data_gen/encode_raw_rollouts.py --environment=DOOM_TAKE_COVER --model=vae.Vae \
      --model_dir=$V --split=$split "--rollouts_pattern=$2/rollouts-{split}*.tfrecord-*" \
      --out_dir=$E/vae_more_$1
  done
}
encode 1_random $R
encode 2_controller $L/raw_rollouts_controller
encode 3_hold $L/raw_rollouts_hold
encode 4_shipped $L/raw_rollouts_shipped
