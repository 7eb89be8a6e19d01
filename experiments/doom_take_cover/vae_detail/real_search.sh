#!/bin/bash
# Section 3 of README.md: CMA-ES in the real game from the shipped dream_controller (a bound on
# what this search finds with these features, not a dream result), then 100 episodes of its
# best member and of its CMA-ES mean on seeds 1000-1099. Rerun to resume; RUNS= moves the output.
set -euo pipefail
cd "$(dirname "$0")/../../.."
PY=${PY:-.venv/bin/python}
D=${RUNS:-/work/runs}/doom_real
$PY scripts/models/train_controller.py --environment=DOOM_TAKE_COVER \
  --encoder=raw_rollout_vae_64ld --sequential_model=mdn_rnn_64ld_hold --controller=LinearController \
  --cell_state --mode=real --cma_population_size=16 --cma_trials_per_member=4 --cma_generations=10 \
  --rollout_max_steps=2100 --eval_every=0 --parallelism=2 --seed=20261207 \
  --initial_params=rl755/zoo/shipped/doom_take_cover/dream_controller --model_dir=$D/real_from_dream
# The saved controller is the best training fitness (4 episodes); the CMA-ES mean beside it.
mkdir -p $D/real_mean
cp $D/real_from_dream/controller.json $D/real_mean/
$PY -c "import pickle, numpy as np; es = pickle.load(open('$D/real_from_dream/model-010.cma.pkl', 'rb')); np.save('$D/real_mean/controller_params.npy', np.asarray(es.mean, np.float32))"
for c in real_from_dream real_mean; do
  $PY scripts/models/evaluate_controller.py --environment=DOOM_TAKE_COVER --model_dir=$D/$c \
    --out_dir=$D/eval_$c --seed=1000 --num_episodes=100
done
