#!/bin/bash
# The longer-trained MDN-RNN and its controllers (README.md here). Rerun to resume; RUNS= moves the data.
set -euo pipefail
cd "$(dirname "$0")/../../.."
PY=${PY:-.venv/bin/python}
RUNS=${RUNS:-/work/runs}
R=$RUNS/doom_dream/data/doom_take_cover/raw_rollouts   # set 1: the doom_dream recipe's (seed 755)
O=$RUNS/doom_longer
Z=rl755/zoo/shipped/doom_take_cover
COLLECT="scripts/data_gen/car_racing/parallel_rollout_main.py --environment=DOOM_TAKE_COVER --max_steps=2100 --parallelism=2 --out_format=tfrecord --compression=GZIP"
echo "== $(date -Is) collect sets 2-3"
$PY $COLLECT --num_rollouts=400 --out_dir=$O/data/raw_rollouts_controller --seed=756 \
  --policy=controller --controller_dir=$Z/dream_controller_episodes --random_action_prob=0.3
$PY $COLLECT --num_rollouts=800 --out_dir=$O/data/raw_rollouts_hold --seed=757 \
  --policy=RepeatRandomPolicy --policy_kwargs=min_repeat=20,max_repeat=200
for set in "1_random $R" "2_controller $O/data/raw_rollouts_controller" "3_hold $O/data/raw_rollouts_hold"; do
  name=${set%% *}; raw=${set#* }
  for split in train validation; do
    echo "== $(date -Is) encode $name $split"
    $PY scripts/data_gen/encode_raw_rollouts.py --environment=DOOM_TAKE_COVER --model=vae.Vae \
      --model_dir=$Z/raw_rollout_vae_64ld --split=$split "--rollouts_pattern=$raw/rollouts-{split}*.tfrecord-*" \
      --out_dir=$O/data/encoded_rollouts/raw_rollout_vae_64ld_$name
  done
done
for steps in 2000; do
  echo "== $(date -Is) MDN-RNN to step $steps"
  $PY scripts/models/train_sequential_model.py --environment=DOOM_TAKE_COVER --model=mdn_rnn.mdn_rnn_with_heads \
    --rollouts_dataset=RawRolloutVae64ld "--rollouts_pattern=$O/data/encoded_rollouts/raw_rollout_vae_64ld_[123]_*/encoded-{split}*" \
    --model_dir=$O/models/mdn_rnn_64ld_longer --train_steps=$steps --learning_rate=1e-3 \
    --learning_rate_decay=0.9995 --min_learning_rate=1e-4 --sample_observations --slice_start=episode_start \
    --seed=0 --batch_size=32 --sequence_length=500 --save_every_n_steps=250 --initial_weights=$Z/mdn_rnn_64ld_hold
  snap=$O/models/mdn_rnn_64ld_longer_$steps
  if [ ! -d $snap ]; then cp -r $O/models/mdn_rnn_64ld_longer $snap.tmp && mv $snap.tmp $snap; fi
  echo "== $(date -Is) CMA-ES in the dream of step $steps"
  $PY scripts/models/train_controller.py --environment=DOOM_TAKE_COVER --model_dir=$O/models/dream_controller_$steps \
    --sequential_model_dir=$snap --eval_in=dream --encoder_dir=$Z/raw_rollout_vae_64ld --encoder_model=vae.Vae \
    --representation_size=64 --controller=LinearController --cell_state=True --mode=dream --temperature=1.15 \
    --done_threshold=0 --parallelism=0 --seed=755 --cma_population_size=16 --cma_trials_per_member=8 \
    --cma_generations=40 --rollout_max_steps=2100 --dream_initial_states=64 --eval_every=5 --eval_episodes=64 \
    --select_episodes=256 --select_top=4
  echo "== $(date -Is) 100 real episodes, seeds 1000-1099"
  $PY scripts/models/evaluate_controller.py --environment=DOOM_TAKE_COVER --model_dir=$O/models/dream_controller_$steps \
    --out_dir=$O/evaluation/dream_controller_$steps --seed=1000 --compare_random=True --num_episodes=100
done
# Whole episodes: the step-2000 model goes on for 800 steps on slices of 2,100 steps (sets 2-3,
# whose episodes run long), then CMA-ES at ends x1.5, as in ../dream_calibration/ section 3.
W=$O/models/mdn_rnn_64ld_longer_whole
echo "== $(date -Is) MDN-RNN on whole episodes"
$PY scripts/models/train_sequential_model.py --environment=DOOM_TAKE_COVER --model=mdn_rnn.mdn_rnn_with_heads \
  --rollouts_dataset=RawRolloutVae64ld "--rollouts_pattern=$O/data/encoded_rollouts/raw_rollout_vae_64ld_[23]_*/encoded-{split}*" \
  --model_dir=$W --train_steps=800 --learning_rate=3e-4 --sample_observations --slice_start=episode_start \
  --seed=3 --batch_size=16 --sequence_length=2100 --save_every_n_steps=100 --validation_steps=4 \
  --initial_weights=$O/models/mdn_rnn_64ld_longer_2000
if [ ! -d ${W}_800 ]; then cp -r $W ${W}_800.tmp && mv ${W}_800.tmp ${W}_800; fi
echo "== $(date -Is) CMA-ES in the whole-episode dream, ends x1.5"
$PY scripts/models/train_controller.py --environment=DOOM_TAKE_COVER --model_dir=$O/models/dream_controller_whole800_s15 \
  --sequential_model_dir=${W}_800 --eval_in=dream --encoder_dir=$Z/raw_rollout_vae_64ld --encoder_model=vae.Vae \
  --representation_size=64 --controller=LinearController --cell_state=True --mode=dream --temperature=1.15 \
  --done_threshold=0 --done_prob_scale=1.5 --parallelism=0 --seed=755 --cma_population_size=16 \
  --cma_trials_per_member=8 --cma_generations=40 --rollout_max_steps=2100 --dream_initial_states=64 \
  --eval_every=5 --eval_episodes=64 --select_episodes=256 --select_top=4
echo "== $(date -Is) 100 real episodes, seeds 1000-1099"
$PY scripts/models/evaluate_controller.py --environment=DOOM_TAKE_COVER --model_dir=$O/models/dream_controller_whole800_s15 \
  --out_dir=$O/evaluation/dream_controller_whole800_s15 --seed=1000 --compare_random=True --num_episodes=100
# Data that reaches the late game: 400 rollouts of the shipped dream_controller with 30% random
# actions (set 4), then whole episodes of sets 2-4 from the step-2000 model, then as above.
echo "== $(date -Is) collect set 4"
$PY $COLLECT --num_rollouts=400 --out_dir=$O/data/raw_rollouts_shipped --seed=762 \
  --policy=controller --controller_dir=$Z/dream_controller --random_action_prob=0.3
for split in train validation; do
  echo "== $(date -Is) encode 4_shipped $split"
  $PY scripts/data_gen/encode_raw_rollouts.py --environment=DOOM_TAKE_COVER --model=vae.Vae \
    --model_dir=$Z/raw_rollout_vae_64ld --split=$split "--rollouts_pattern=$O/data/raw_rollouts_shipped/rollouts-{split}*.tfrecord-*" \
    --out_dir=$O/data/encoded_rollouts/raw_rollout_vae_64ld_4_shipped
done
W4=$O/models/mdn_rnn_64ld_longer_whole4
echo "== $(date -Is) MDN-RNN on whole episodes of sets 2-4"
$PY scripts/models/train_sequential_model.py --environment=DOOM_TAKE_COVER --model=mdn_rnn.mdn_rnn_with_heads \
  --rollouts_dataset=RawRolloutVae64ld "--rollouts_pattern=$O/data/encoded_rollouts/raw_rollout_vae_64ld_[234]_*/encoded-{split}*" \
  --model_dir=$W4 --train_steps=400 --learning_rate=3e-4 --sample_observations --slice_start=episode_start \
  --seed=4 --batch_size=16 --sequence_length=2100 --save_every_n_steps=100 --validation_steps=4 \
  --initial_weights=$O/models/mdn_rnn_64ld_longer_2000
if [ ! -d ${W4}_400 ]; then cp -r $W4 ${W4}_400.tmp && mv ${W4}_400.tmp ${W4}_400; fi
echo "== $(date -Is) CMA-ES in its dream, ends x1.5"
$PY scripts/models/train_controller.py --environment=DOOM_TAKE_COVER --model_dir=$O/models/dream_controller_whole4_400_s15 \
  --sequential_model_dir=${W4}_400 --eval_in=dream --encoder_dir=$Z/raw_rollout_vae_64ld --encoder_model=vae.Vae \
  --representation_size=64 --controller=LinearController --cell_state=True --mode=dream --temperature=1.15 \
  --done_threshold=0 --done_prob_scale=1.5 --parallelism=0 --seed=755 --cma_population_size=16 \
  --cma_trials_per_member=8 --cma_generations=40 --rollout_max_steps=2100 --dream_initial_states=64 \
  --eval_every=5 --eval_episodes=64 --select_episodes=256 --select_top=4
echo "== $(date -Is) 100 real episodes, seeds 1000-1099"
$PY scripts/models/evaluate_controller.py --environment=DOOM_TAKE_COVER --model_dir=$O/models/dream_controller_whole4_400_s15 \
  --out_dir=$O/evaluation/dream_controller_whole4_400_s15 --seed=1000 --compare_random=True --num_episodes=100
echo "== $(date -Is) done"
