#!/bin/bash
# The longer-trained MDN-RNN and its controllers (README.md here). Rerun to resume; RUNS= moves the data.
set -euo pipefail
cd "$(dirname "$0")/../../.."
PY=${PY:-.venv/bin/python}
RUNS=${RUNS:-/work/runs}
R=$RUNS/doom_dream/data/doom_take_cover/raw_rollouts   # set 1: the doom_dream recipe's (seed 755)
O=$RUNS/doom_longer
E=$O/data/encoded_rollouts
Z=rl755/zoo/shipped/doom_take_cover
COLLECT="scripts/data_gen/car_racing/parallel_rollout_main.py --environment=DOOM_TAKE_COVER --max_steps=2100 --parallelism=2 --out_format=tfrecord --compression=GZIP"

encode() {  # encode NAME RAW_DIR: both splits with the shipped VAE into $E/raw_rollout_vae_64ld_NAME
  for split in train validation; do
    echo "== $(date -Is) encode $1 $split"
    $PY scripts/data_gen/encode_raw_rollouts.py --environment=DOOM_TAKE_COVER --model=vae.Vae \
      --model_dir=$Z/raw_rollout_vae_64ld --split=$split "--rollouts_pattern=$2/rollouts-{split}*.tfrecord-*" \
      --out_dir=$E/raw_rollout_vae_64ld_$1
  done
}

snapshot() {  # snapshot DIR COPY: a copy of a model dir as it is now (once)
  if [ ! -d $2 ]; then cp -r $1 $2.tmp && mv $2.tmp $2; fi
}

whole_episodes() {  # whole_episodes SETS STEPS SEED MODEL_DIR: 16 whole episodes a step, from step 2000's model
  $PY scripts/models/train_sequential_model.py --environment=DOOM_TAKE_COVER --model=mdn_rnn.mdn_rnn_with_heads \
    --rollouts_dataset=RawRolloutVae64ld "--rollouts_pattern=$E/raw_rollout_vae_64ld_[$1]_*/encoded-{split}*" \
    --model_dir=$4 --train_steps=$2 --learning_rate=3e-4 --sample_observations --slice_start=episode_start \
    --seed=$3 --batch_size=16 --sequence_length=2100 --save_every_n_steps=100 --validation_steps=4 \
    --initial_weights=$O/models/mdn_rnn_64ld_longer_2000
}

controller() {  # controller MDN_RNN_DIR NAME [FLAG...]: CMA-ES in its dream (the recipe's flags), 100 real episodes
  local model=$1 name=$2
  shift 2
  echo "== $(date -Is) CMA-ES in the dream of $(basename $model) $*"
  $PY scripts/models/train_controller.py --environment=DOOM_TAKE_COVER --model_dir=$O/models/$name \
    --sequential_model_dir=$model --eval_in=dream --encoder_dir=$Z/raw_rollout_vae_64ld --encoder_model=vae.Vae \
    --representation_size=64 --controller=LinearController --cell_state=True --mode=dream --temperature=1.15 \
    --done_threshold=0 "$@" --parallelism=0 --seed=755 --cma_population_size=16 --cma_trials_per_member=8 \
    --cma_generations=40 --rollout_max_steps=2100 --dream_initial_states=64 --eval_every=5 --eval_episodes=64 \
    --select_episodes=256 --select_top=4
  echo "== $(date -Is) 100 real episodes, seeds 1000-1099"
  $PY scripts/models/evaluate_controller.py --environment=DOOM_TAKE_COVER --model_dir=$O/models/$name \
    --out_dir=$O/evaluation/$name --seed=1000 --compare_random=True --num_episodes=100
}

# 1-2. Sets 2 and 3, and the three sets encoded.
echo "== $(date -Is) collect sets 2-3"
$PY $COLLECT --num_rollouts=400 --out_dir=$O/data/raw_rollouts_controller --seed=756 \
  --policy=controller --controller_dir=$Z/dream_controller_episodes --random_action_prob=0.3
$PY $COLLECT --num_rollouts=800 --out_dir=$O/data/raw_rollouts_hold --seed=757 \
  --policy=RepeatRandomPolicy --policy_kwargs=min_repeat=20,max_repeat=200
encode 1_random $R
encode 2_controller $O/data/raw_rollouts_controller
encode 3_hold $O/data/raw_rollouts_hold

# 3-4. The shipped MDN-RNN 2,000 steps further on 500-step slices of sets 1-3; its controller.
echo "== $(date -Is) MDN-RNN to step 2000"
$PY scripts/models/train_sequential_model.py --environment=DOOM_TAKE_COVER --model=mdn_rnn.mdn_rnn_with_heads \
  --rollouts_dataset=RawRolloutVae64ld "--rollouts_pattern=$E/raw_rollout_vae_64ld_[123]_*/encoded-{split}*" \
  --model_dir=$O/models/mdn_rnn_64ld_longer --train_steps=2000 --learning_rate=1e-3 \
  --learning_rate_decay=0.9995 --min_learning_rate=1e-4 --sample_observations --slice_start=episode_start \
  --seed=0 --batch_size=32 --sequence_length=500 --save_every_n_steps=250 --initial_weights=$Z/mdn_rnn_64ld_hold
snapshot $O/models/mdn_rnn_64ld_longer $O/models/mdn_rnn_64ld_longer_2000
controller $O/models/mdn_rnn_64ld_longer_2000 dream_controller_2000

# 5. Whole episodes: the step-2000 model 800 steps on slices of 2,100 steps of sets 2-3, then
#    CMA-ES at ends x1.5, as in ../dream_calibration/ section 3.
W=$O/models/mdn_rnn_64ld_longer_whole
echo "== $(date -Is) MDN-RNN on whole episodes"
whole_episodes 23 800 3 $W
snapshot $W ${W}_800
controller ${W}_800 dream_controller_whole800_s15 --done_prob_scale=1.5

# 6. Data that reaches the late game: 400 rollouts of the shipped dream_controller with 30% random
#    actions (set 4), then whole episodes of sets 2-4 from the step-2000 model, then as in 5.
echo "== $(date -Is) collect set 4"
$PY $COLLECT --num_rollouts=400 --out_dir=$O/data/raw_rollouts_shipped --seed=762 \
  --policy=controller --controller_dir=$Z/dream_controller --random_action_prob=0.3
encode 4_shipped $O/data/raw_rollouts_shipped
W4=$O/models/mdn_rnn_64ld_longer_whole4
echo "== $(date -Is) MDN-RNN on whole episodes of sets 2-4"
whole_episodes 234 400 4 $W4
snapshot $W4 ${W4}_400
controller ${W4}_400 dream_controller_whole4_400_s15 --done_prob_scale=1.5
echo "== $(date -Is) done"
