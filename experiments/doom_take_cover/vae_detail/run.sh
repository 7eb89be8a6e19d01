#!/bin/bash
# The shipped VAE trained further, then the world model and a controller on its z (README.md
# here). Rerun to resume: every stage skips what it finished; RUNS= moves the data.
set -euo pipefail
cd "$(dirname "$0")/../../.."
PY=${PY:-.venv/bin/python}
RUNS=${RUNS:-/work/runs}
VAE_STEPS=${VAE_STEPS:-3000}
MDN_STEPS=${MDN_STEPS:-750}
WHOLE_STEPS=${WHOLE_STEPS:-400}
R=$RUNS/doom_dream/data/doom_take_cover/raw_rollouts   # set 1: the doom_dream recipe's (seed 755)
L=$RUNS/doom_longer/data                                # sets 2-4: ../longer_mdn_rnn/run.sh's
O=$RUNS/doom_vae
E=$O/data/encoded_rollouts
V=$O/models/vae_64ld_more
Z=rl755/zoo/shipped/doom_take_cover
COLLECT="scripts/data_gen/car_racing/parallel_rollout_main.py --environment=DOOM_TAKE_COVER --max_steps=2100 --parallelism=2 --out_format=tfrecord --compression=GZIP"

# 0. Set 1 (the recipe's first step).
if [ ! -e "$R/dataset_info.json" ]; then
  echo "Collect set 1 first: $PY scripts/pipeline.py --preset=doom_dream --out_dir=$RUNS/doom_dream" \
    "--until=collect_random" >&2
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

snapshot() {  # snapshot DIR COPY: a copy of a model dir as it is now (once)
  if [ ! -d $2 ]; then cp -r $1 $2.tmp && mv $2.tmp $2; fi
}

# 4. The MDN-RNN on the new z: the shipped mdn_rnn_64ld_hold MDN_STEPS further on 500-step slices
#    of sets 1-4, then WHOLE_STEPS of 16 whole episodes of sets 2-4 (../longer_mdn_rnn/ steps 3 and 6).
M=$O/models/mdn_rnn_vae_more
echo "== $(date -Is) MDN-RNN on 500-step slices of sets 1-4"
$PY scripts/models/train_sequential_model.py --environment=DOOM_TAKE_COVER --model=mdn_rnn.mdn_rnn_with_heads \
  --rollouts_dataset=RawRolloutVae64ld "--rollouts_pattern=$E/vae_more_[1234]_*/encoded-{split}*" \
  --model_dir=$M --train_steps=$MDN_STEPS --learning_rate=1e-3 --learning_rate_decay=0.9995 \
  --min_learning_rate=1e-4 --sample_observations --slice_start=episode_start --seed=0 --batch_size=32 \
  --sequence_length=500 --save_every_n_steps=250 --initial_weights=$Z/mdn_rnn_64ld_hold
snapshot $M ${M}_$MDN_STEPS
W=$O/models/mdn_rnn_vae_more_whole
echo "== $(date -Is) MDN-RNN on whole episodes of sets 2-4"
$PY scripts/models/train_sequential_model.py --environment=DOOM_TAKE_COVER --model=mdn_rnn.mdn_rnn_with_heads \
  --rollouts_dataset=RawRolloutVae64ld "--rollouts_pattern=$E/vae_more_[234]_*/encoded-{split}*" \
  --model_dir=$W --train_steps=$WHOLE_STEPS --learning_rate=3e-4 --sample_observations \
  --slice_start=episode_start --seed=4 --batch_size=16 --sequence_length=2100 --save_every_n_steps=100 \
  --validation_steps=4 --initial_weights=${M}_$MDN_STEPS
snapshot $W ${W}_$WHOLE_STEPS

# 5. CMA-ES in its dream at ends x1.5 (../longer_mdn_rnn/ step 6's flags, the new VAE), then 100
#    real episodes on seeds 1000-1099.
controller() {  # controller NAME CONTROLLER GENERATIONS [POPULATION TRIALS]: CMA-ES in the dream, 100 real episodes
  echo "== $(date -Is) CMA-ES in the dream: $1"
  $PY scripts/models/train_controller.py --environment=DOOM_TAKE_COVER --model_dir=$O/models/$1 \
    --sequential_model_dir=${W}_$WHOLE_STEPS --eval_in=dream --encoder_dir=$V --encoder_model=vae.Vae \
    --representation_size=64 --controller=$2 --cell_state=True --mode=dream --temperature=1.15 \
    --done_threshold=0 --done_prob_scale=1.5 --parallelism=0 --seed=755 --cma_population_size=${4:-16} \
    --cma_trials_per_member=${5:-8} --cma_generations=$3 --rollout_max_steps=2100 --dream_initial_states=64 \
    --eval_every=5 --eval_episodes=64 --select_episodes=256 --select_top=4
  echo "== $(date -Is) 100 real episodes, seeds 1000-1099"
  $PY scripts/models/evaluate_controller.py --environment=DOOM_TAKE_COVER --model_dir=$O/models/$1 \
    --out_dir=$O/evaluation/$1 --seed=1000 --compare_random=True --num_episodes=100
}
controller dream_controller_vae_more LinearController 40

# 6. The paper's controller (one output at ±1/3, 1,088 parameters) in the same dream.
controller dream_controller_vae_more_threshold ThresholdController 40

# 7. Step 5's search continued to generation 120 (a copy, so step 5's controller stays).
snapshot $O/models/dream_controller_vae_more $O/models/dream_controller_vae_more_120
controller dream_controller_vae_more_120 LinearController 120

# 8. The paper's search size with its controller: 64 members x 16 dreams a generation.
controller dream_controller_vae_more_paper_cma ThresholdController 60 64 16

# 9. Step 8's search continued to generation 120 (a copy, so step 8's controller stays).
snapshot $O/models/dream_controller_vae_more_paper_cma $O/models/dream_controller_vae_more_paper_cma_120
controller dream_controller_vae_more_paper_cma_120 ThresholdController 120 64 16
echo "== $(date -Is) done"
