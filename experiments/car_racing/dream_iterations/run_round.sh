#!/bin/bash
# One turn of iterative collection for the CarRacing dream stretch (issue #12), round R >= 2:
# collect NC rollouts of the previous round's dream controller (30% random actions), encode
# them, fine-tune the previous round's MDN-RNN on every encoded set so far, train a new dream
# controller in it, and score that in the real game (20 episodes, seeds 1000-1019).
#   R=2 PREV_CTRL=$RL755_MODELS_DIR/car_racing/dream_controller_750_iter1_t1.0 \
#   PREV_MODEL=$RL755_MODELS_DIR/car_racing/mdn_rnn_with_heads_750_iter1 \
#   bash experiments/car_racing/dream_iterations/run_round.sh
# SELECT_IN=real: the controller is still trained in the dream only, but its periodic
# evaluations (8 episodes) and the final selection (4 x 16) play real episodes (default:
# dream, as in rounds 1-5). STEPS: fine-tuning steps (800). NC: rollouts collected (100).
# Rerunning a round resumes it (each stage skips or resumes what is done). ~25 min on 2 cores
# (~45 with SELECT_IN=real).
set -euo pipefail
cd "$(dirname "$0")/../../.."
: "${RL755_DATA_DIR:?set RL755_DATA_DIR}" "${RL755_MODELS_DIR:?set RL755_MODELS_DIR}"
: "${R:?set R (the round, >= 2)}" "${PREV_CTRL:?set PREV_CTRL}" "${PREV_MODEL:?set PREV_MODEL}"
PY=${PY:-.venv/bin/python}
DATA=$RL755_DATA_DIR/car_racing
RAW=$DATA/raw_rollouts_iter$R
ENC=$DATA/encoded_rollouts
MODEL=$RL755_MODELS_DIR/car_racing/mdn_rnn_with_heads_750_iter$R
SELECT_IN=${SELECT_IN:-dream}
case $SELECT_IN in
  dream) CTRL=$RL755_MODELS_DIR/car_racing/dream_controller_750_iter${R}_t1.0
         SELECT=(--eval_episodes=64 --select_episodes=256 --parallelism=0) ;;
  real) CTRL=$RL755_MODELS_DIR/car_racing/dream_controller_750_iter${R}_realsel
        SELECT=(--eval_episodes=8 --select_episodes=16 --parallelism=2) ;;
  *) echo "SELECT_IN must be dream or real, got $SELECT_IN" >&2; exit 2 ;;
esac
NC=${NC:-100}
# Two collection processes (2 cores), NC / 2 rollouts each; a failed one stops the round.
pids=()
for part in 0 1; do
  $PY scripts/data_gen/collect_rollouts.py --environment=CAR_RACING --policy=controller \
    --controller_dir="$PREV_CTRL" --random_action_prob=0.3 --num_rollouts=$((NC / 2)) \
    --out_format=tfrecord --out_dir="$RAW/part$part" --seed=$((760 + 10 * R + part)) &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done
for split in train validation; do
  for part in 0 1; do
    $PY scripts/data_gen/encode_raw_rollouts.py --environment=CAR_RACING \
      --model=raw_rollout_vae_32ld_750 --split=$split \
      --rollouts_pattern="$RAW/part$part/rollouts-{split}-*" \
      --out_dir="$ENC/raw_rollout_vae_32ld_750_iter${R}_$part"
  done
done
$PY scripts/models/train_sequential_model.py --environment=CAR_RACING \
  --model=mdn_rnn.mdn_rnn_with_heads --rollouts_dataset=RawRolloutVae32ld750 \
  --rollouts_pattern="$ENC/raw_rollout_vae_32ld_750*/encoded-{split}-*" \
  --initial_weights="$PREV_MODEL" --train_steps=${STEPS:-800} --batch_size=32 \
  --sequence_length=200 --learning_rate=1e-3 --save_every_n_steps=200 --sample_observations \
  --model_dir="$MODEL"
$PY scripts/models/train_controller.py --environment=CAR_RACING --mode=dream \
  --encoder=raw_rollout_vae_32ld_750 --sequential_model_dir="$MODEL" \
  --controller=LinearController --temperature=1.0 --done_threshold=0 \
  --cma_population_size=32 --cma_trials_per_member=8 --cma_generations=100 \
  --rollout_max_steps=1000 --dream_initial_states=256 --eval_every=10 \
  --eval_in="$SELECT_IN" "${SELECT[@]}" --select_top=4 --seed=755 --model_dir="$CTRL"
$PY scripts/models/evaluate_controller.py --environment=CAR_RACING --model_dir="$CTRL" \
  --num_episodes=20 --seed=1000
