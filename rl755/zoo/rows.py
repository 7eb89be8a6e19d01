"""The trained models rl755 knows: one `ZooModel` row each (flags exactly as they were run).

Add a row after training a model worth keeping, then `python scripts/dev/zoo_table.py --write`.
"""

from __future__ import annotations

from rl755.zoo.entry import CONTROLLER, ENCODER, SEQUENTIAL, ZooModel

_CAR_SEQ = (
    "--rollouts_dataset=RawRolloutVae32ld --train_steps=20000 --batch_size=100 "
    "--sequence_length=32 --learning_rate=1e-3 --save_every_n_steps=1000"
)
_CAR_CMA = (
    "--cma_population_size=64 --cma_trials_per_member=16 --cma_generations=1800 "
    "--eval_every=25 --eval_episodes=100"
)
_FAKE_SEQ = (
    "--rollouts_dataset=RawRolloutVae4ld --train_steps=200 --batch_size=8 --sequence_length=8 "
    "--save_every_n_steps=100 --sample_observations"
)
_DOOM_SEQ = "--rollouts_dataset=RawRolloutVae64ld --batch_size=32 --sequence_length=100 --learning_rate=1e-3"

MODELS: tuple[ZooModel, ...] = (
    # ---- CAR_RACING ----------------------------------------------------------------------------
    ZooModel(
        "raw_rollout_vae_32ld",
        "CAR_RACING",
        ENCODER,
        "vae.Vae",
        "--train_steps=100000 --batch_size=100 --representation_size=32 "
        "--save_every_n_steps=5000 --obs_sampled_per_rollout=100 --learning_rate=1e-4",
        "World Models ConvVAE, Z = 32, 4,348,547 params, with the paper's settings",
        notes="Trained on the random-policy raw rollouts (`<data_dir>/car_racing/raw_rollouts/"
        "rollouts-train*.tfrecord-*`, the paper's 10,000 rollouts of up to 1000 frames): "
        "100,000 steps x 100 frames = 1 pass over 10M frames.",
    ),
    ZooModel(
        "mdn_rnn_vae_32ld",
        "CAR_RACING",
        SEQUENTIAL,
        "mdn_rnn.mdn_rnn",
        _CAR_SEQ + " --sample_observations",
        "World Models MDN-RNN (LSTM 256, 5 Gaussians per latent dimension, 422,368 params), "
        "z sampled from the VAE posterior as in the paper",
        notes="Batch 100 as in the paper; sequences of 32 steps instead of whole episodes, to "
        "fit CPU memory.",
    ),
    ZooModel(
        "mdn_rnn_with_heads_vae_32ld",
        "CAR_RACING",
        SEQUENTIAL,
        "mdn_rnn.mdn_rnn_with_heads",
        _CAR_SEQ + " --sample_observations",
        "the same MDN-RNN plus reward and episode-end heads, for training controllers inside "
        "the model",
    ),
    ZooModel(
        "base_transformer_vae_32ld",
        "CAR_RACING",
        SEQUENTIAL,
        "transformer.base_deterministic_transformer",
        _CAR_SEQ + " --difference_targets",
        "base transformer (6 layers x 256, 8 heads, window 128; 4.76M params) predicting "
        "differences z_{t+1} - z_t",
    ),
    ZooModel(
        "lstm_vae_32ld",
        "CAR_RACING",
        SEQUENTIAL,
        "lstm.deterministic_lstm",
        _CAR_SEQ,
        "LSTM 256, regression of z_{t+1}",
    ),
    ZooModel(
        "linear_controller_vae_mdn_rnn",
        "CAR_RACING",
        CONTROLLER,
        None,
        "--encoder=raw_rollout_vae_32ld --sequential_model=mdn_rnn_vae_32ld "
        f"--controller=LinearController --mode=real {_CAR_CMA} --parallelism=64",
        "World Models' full agent: LinearController on [z, h] ((32 + 256) x 3 + 3 = 867 "
        "params), CMA-ES in the real environment (population 64 x 16 trials, the best member "
        "tested every 25 generations)",
    ),
    ZooModel(
        "dream_linear_controller_vae_mdn_rnn",
        "CAR_RACING",
        CONTROLLER,
        None,
        "--encoder=raw_rollout_vae_32ld --sequential_model=mdn_rnn_with_heads_vae_32ld "
        f"--controller=LinearController --mode=dream --temperature=1.15 {_CAR_CMA} "
        "--parallelism=8",
        'the same controller trained inside `mdn_rnn_with_heads_vae_32ld` ("dream", '
        "temperature 1.15 as in the paper's Doom experiment), evaluated in the real "
        "environment every 25 generations",
    ),
    ZooModel(
        "hidden_layer_controller_vae",
        "CAR_RACING",
        CONTROLLER,
        None,
        "--encoder=raw_rollout_vae_32ld --sequential_model=none "
        f"--controller=HiddenLayerController --hidden_units=40 --mode=real {_CAR_CMA} "
        "--parallelism=64",
        "the paper's V-only controller: HiddenLayerController (40 hidden units, 1,443 params) "
        "on z, no sequential model",
    ),
    ZooModel(
        "raw_rollout_vae_32ld_demo",
        "CAR_RACING",
        ENCODER,
        "vae.Vae",
        "--train_steps=2000 --batch_size=32 --representation_size=32 --save_every_n_steps=500 "
        "--obs_sampled_per_rollout=50 --learning_rate=1e-3",
        "the `make demo` ConvVAE (Z = 32) of seed 0: 2,000 steps of 32 frames sampled from "
        "40 random rollouts of 300 steps; ships in the repository",
        notes="Trained by `python scripts/pipeline.py --preset=demo --seed=0` (its stage 2); "
        "that run's stage 3 encodes the rollouts with it as `RawRolloutVae32ld`.",
    ),
    ZooModel(
        "mdn_rnn_vae_32ld_demo",
        "CAR_RACING",
        SEQUENTIAL,
        "mdn_rnn.mdn_rnn",
        "--rollouts_dataset=RawRolloutVae32ld --train_steps=1500 --batch_size=16 "
        "--sequence_length=32 --learning_rate=1e-3 --save_every_n_steps=500 "
        "--sample_observations",
        "the `make demo` MDN-RNN (LSTM 256, 5 Gaussians) of seed 0: 1,500 steps of 16 x 32 "
        "on the demo's rollouts encoded by its VAE (raw_rollout_vae_32ld_demo, which the "
        "demo's run directory names raw_rollout_vae_32ld, hence the dataset "
        "RawRolloutVae32ld); ships in the repository",
        notes="Trained by `python scripts/pipeline.py --preset=demo --seed=0` (its stage 4), "
        "inside that run's directory, where the encoded dataset is RawRolloutVae32ld.",
    ),
    ZooModel(
        "raw_rollout_vae_32ld_750",
        "CAR_RACING",
        ENCODER,
        "vae.Vae",
        "--train_steps=4000 --batch_size=100 --representation_size=32 --save_every_n_steps=500 "
        "--obs_sampled_per_rollout=100 --learning_rate=1e-3",
        "ConvVAE (Z = 32) on 750 HastingsRandomPolicy rollouts of 1,000 steps: a second "
        "CarRacing world model, 19x the demo's frames",
        notes="Collected by collect_rollouts.py --environment=CAR_RACING "
        "--policy=HastingsRandomPolicy --max_steps=1000 --out_format=tfrecord, 500 rollouts at "
        "--seed=755 and 250 at --seed=756 into the default raw_rollouts dir. Ships in the "
        "repository, so the real-environment run on it resumes anywhere "
        "(experiments/car_racing/real_controller_750/README.md has where it stands).",
    ),
    ZooModel(
        "mdn_rnn_with_heads_vae_32ld_750",
        "CAR_RACING",
        SEQUENTIAL,
        "mdn_rnn.mdn_rnn_with_heads",
        "--rollouts_dataset=RawRolloutVae32ld750 --train_steps=4000 --batch_size=32 "
        "--sequence_length=200 --learning_rate=1e-3 --save_every_n_steps=500 "
        "--sample_observations",
        "MDN-RNN (LSTM 256, 5 Gaussians, reward and episode-end heads) on the 750 rollouts "
        "encoded by raw_rollout_vae_32ld_750, for real and dream controllers; ships in the "
        "repository",
    ),
    ZooModel(
        "real_controller_p4",
        "CAR_RACING",
        CONTROLLER,
        None,
        "--encoder=raw_rollout_vae_32ld_demo --sequential_model=mdn_rnn_vae_32ld_demo "
        "--controller=LinearController --mode=real --cma_population_size=4 "
        "--cma_trials_per_member=4 --cma_generations=100 --rollout_max_steps=1000 --sigma=0.1 "
        "--eval_every=5 --eval_episodes=8 --parallelism=2 --select_episodes=16 --select_top=4 "
        "--initial_params=runs/demo/models/car_racing/linear_controller_vae_mdn_rnn",
        "the first CarRacing agent, shipped as real_controller before it: LinearController "
        "on [z, h] of the demo's models, CMA-ES in the real environment, 4 x 4 episodes of "
        "1,000 steps x 100 generations, from `make demo`'s controller; real_controller starts "
        "from it; ships in the repository",
        notes="Reproduce its score with no training: python scripts/models/evaluate_controller.py "
        "--environment=CAR_RACING --saved_controller=real_controller_p4 --num_episodes=100 "
        "--seed=1000: 774.0 +- 161.2 (650.3 +- 252.3 after 40 generations). "
        "--initial_params is make demo's seed-0 controller (run make demo first; on another "
        "kind of CPU it trains another one). Its last checkpoint: experiments/car_racing/"
        "real_controller/ (its CMA-ES state is in commit e84268c); copy it to the "
        "row's dir and rerun with more generations to resume exactly.",
    ),
    ZooModel(
        "real_controller",
        "CAR_RACING",
        CONTROLLER,
        None,
        "--encoder=raw_rollout_vae_32ld_demo --sequential_model=mdn_rnn_vae_32ld_demo "
        "--controller=LinearController --mode=real --cma_population_size=8 "
        "--cma_trials_per_member=4 --cma_generations=26 --rollout_max_steps=1000 --sigma=0.03 "
        "--eval_every=5 --eval_episodes=8 --parallelism=2 --select_episodes=16 --select_top=4 "
        "--initial_params=rl755/zoo/shipped/car_racing/real_controller_p4",
        "the CarRacing agent: real_controller_p4 trained on by CMA-ES in the real "
        "environment with population 8 x 4 episodes of 1,000 steps and sigma0 0.03 (26 "
        "generations), the demo's encoder and MDN-RNN; ships in the repository",
        notes="Reproduce its score with no training: python scripts/models/evaluate_controller.py "
        "--environment=CAR_RACING --saved_controller=real_controller --num_episodes=100 "
        "--seed=1000 (its shipped encoder and MDN-RNN come with it): 800.8 +- 123.9 "
        "(real_controller_p4 on the same seeds: 774.0 +- 161.2). The run started from the "
        "controller then shipped under this name, now real_controller_p4 (the same "
        "parameters), so its run record names this row's own shipped folder. Its last checkpoint: "
        "experiments/car_racing/real_controller_p8/ (README: the CMA-ES state is in commit "
        "e84268c); copy it to the row's dir and rerun with more generations to resume exactly.",
    ),
    # ---- FAKE_PIXELS (tests and smoke runs) ----------------------------------------------------
    ZooModel(
        "raw_rollout_vae_4ld",
        "FAKE_PIXELS",
        ENCODER,
        "vae.Vae",
        "--train_steps=300 --batch_size=32 --representation_size=4 --save_every_n_steps=100 "
        "--obs_sampled_per_rollout=10 --learning_rate=3e-3",
        "tiny ConvVAE, Z = 4, 14,683 params, for smoke runs",
        notes="Trained on `<data_dir>/fake/raw_rollouts/rollouts-{train,validation}*.tfrecord-*`.",
    ),
    ZooModel(
        "mdn_rnn_vae_4ld",
        "FAKE_PIXELS",
        SEQUENTIAL,
        "mdn_rnn.mdn_rnn",
        _FAKE_SEQ,
        "tiny MDN-RNN (LSTM 16, 3 Gaussians), z sampled from the VAE posterior; the pipeline's "
        "`tiny` preset trains it",
    ),
    ZooModel(
        "mdn_rnn_with_heads_vae_4ld",
        "FAKE_PIXELS",
        SEQUENTIAL,
        "mdn_rnn.mdn_rnn_with_heads",
        _FAKE_SEQ,
        "the tiny MDN-RNN with reward and episode-end heads, for dream training",
    ),
    ZooModel(
        "linear_controller_vae",
        "FAKE_PIXELS",
        CONTROLLER,
        None,
        "--encoder=raw_rollout_vae_4ld --sequential_model=none --cma_population_size=8 "
        "--cma_trials_per_member=2 --cma_generations=10 --rollout_max_steps=24 --eval_every=5 "
        "--eval_episodes=8 --parallelism=0",
        "a V-only LinearController (4 x 3 + 3 = 15 params), CMA-ES in the fake environment "
        "(a smoke run of stage 5)",
    ),
    ZooModel(
        "linear_controller_vae_mdn_rnn",
        "FAKE_PIXELS",
        CONTROLLER,
        None,
        "--encoder=raw_rollout_vae_4ld --sequential_model=mdn_rnn_vae_4ld "
        "--cma_population_size=4 --cma_trials_per_member=1 --cma_generations=2 "
        "--rollout_max_steps=24",
        "LinearController on [z, h], CMA-ES in the fake environment (the pipeline's `tiny` "
        "preset)",
    ),
    # ---- DOOM_TAKE_COVER (experiments/doom_take_cover/small_scale/README.md) -------------------
    ZooModel(
        "raw_rollout_vae_64ld",
        "DOOM_TAKE_COVER",
        ENCODER,
        "vae.Vae",
        "--train_steps=6000 --batch_size=100 --representation_size=64 --save_every_n_steps=500 "
        "--learning_rate=1e-3 --obs_sampled_per_rollout=32",
        "World Models' Doom ConvVAE, Z = 64, 4,446,915 params",
        notes="Trained on 3,200 RepeatRandomPolicy raw rollouts (1,027,113 frames, "
        "`<data_dir>/doom_take_cover/raw_rollouts/rollouts-train*.tfrecord-*`, collect seed "
        "755) and stopped at step 3000 of 6000 (model-006, 300k frames seen): validation loss "
        "41.7. The rows mdn_rnn_64ld and mdn_rnn_64ld_end_weighted were trained on the "
        "encodings of an earlier 1500-step VAE of this name on 400 rollouts "
        "(experiments/doom_take_cover/small_scale/README.md).",
    ),
    ZooModel(
        "mdn_rnn_64ld",
        "DOOM_TAKE_COVER",
        SEQUENTIAL,
        "mdn_rnn.mdn_rnn_with_heads",
        "--train_steps=600 " + _DOOM_SEQ,
        "MDN-RNN (LSTM 512, 5 Gaussians per latent dimension) with reward and episode-end " "heads",
        notes="Its done head (unweighted, presets.mdn_rnn_done_pos_weight = 1) was trained on "
        "slices that started only where a whole slice fit and predicted 0.0004 per step "
        "against a real hazard of 0.0038; the same command with today's sampler (slices start "
        "anywhere; the experiment's `mdn_rnn_64ld_sliced`) gives 0.0033. "
        "experiments/doom_take_cover/small_scale/README.md has what dream-trained controllers "
        "do with them.",
    ),
    ZooModel(
        "mdn_rnn_64ld_end_weighted",
        "DOOM_TAKE_COVER",
        SEQUENTIAL,
        "mdn_rnn.mdn_rnn_with_heads_end_weighted",
        "--train_steps=800 " + _DOOM_SEQ,
        "`mdn_rnn_64ld` trained 200 more steps with episode ends weighted 50x in the loss",
        notes="The workaround for the old slice sampler's rare episode ends: its done head "
        "predicts 0.0066 per step on the validation rollouts (real hazard 0.0038; "
        "`mdn_rnn_64ld`: 0.0004).",
        resumes_from="mdn_rnn_64ld",
    ),
    ZooModel(
        "mdn_rnn_64ld_episodes",
        "DOOM_TAKE_COVER",
        SEQUENTIAL,
        "mdn_rnn.mdn_rnn_with_heads",
        "--rollouts_dataset=RawRolloutVae64ld --train_steps=3000 --batch_size=32 "
        "--sequence_length=500 --learning_rate=1e-3 --sample_observations "
        "--slice_start=episode_start --save_every_n_steps=500",
        "MDN-RNN (LSTM 512, 5 Gaussians per latent dimension, reward and unweighted "
        "episode-end heads) trained on whole episodes (slices of 500 from each episode's start)",
        notes="Trained on the encodings of raw_rollout_vae_64ld (3,200 rollouts) and stopped at "
        "step 1000 of 3000: the shipped checkpoint is step 1000, and rerunning the command "
        "resumes toward 3000 (mdn_rnn_64ld_hold continued it instead). The measures of its "
        "checkpoints: experiments/doom_take_cover/small_scale/README.md.",
    ),
    ZooModel(
        "mdn_rnn_64ld_hold",
        "DOOM_TAKE_COVER",
        SEQUENTIAL,
        "mdn_rnn.mdn_rnn_with_heads",
        "--rollouts_dataset=RawRolloutVae64ld "
        '--rollouts_pattern="$RL755_DATA_DIR/doom_take_cover/encoded_rollouts/'
        'raw_rollout_vae_64ld*/encoded-{split}-*" --train_steps=750 --batch_size=32 '
        "--sequence_length=500 --learning_rate=1e-3 --sample_observations "
        "--slice_start=episode_start --save_every_n_steps=250 "
        "--initial_weights=rl755/zoo/shipped/doom_take_cover/mdn_rnn_64ld_episodes",
        "mdn_rnn_64ld_episodes trained 750 more steps of 32 x 500, the last 500 also on "
        "rollouts of a controller and of random actions held 20-200 steps",
        notes="Started from the shipped mdn_rnn_64ld_episodes' weights (step 1000) with a new "
        "Adam state. Steps 1-250 on the 3,200 random rollouts alone (--rollouts_pattern unset), "
        "251-500 also on raw_rollout_vae_64ld_iter1 (400 rollouts of dream_controller_episodes "
        "with 30% random actions, collect seed 756), 501-750 also on raw_rollout_vae_64ld_hold "
        "(800 rollouts of --policy=RepeatRandomPolicy --policy_kwargs=min_repeat=20,"
        "max_repeat=200, collect seed 757); the flags are the last phase's. Validation loss "
        "0.9366; dream/real steps survived at tau 1.15: random 0.81, NOOP 0.92, MOVE_LEFT and "
        "MOVE_RIGHT 1.22.",
    ),
    ZooModel(
        "dream_controller_episodes",
        "DOOM_TAKE_COVER",
        CONTROLLER,
        None,
        "--encoder=raw_rollout_vae_64ld --sequential_model=mdn_rnn_64ld_episodes "
        "--controller=LinearController --cell_state --mode=dream --temperature=1.15 "
        "--done_threshold=0 --cma_population_size=16 --cma_trials_per_member=8 "
        "--cma_generations=40 --rollout_max_steps=2100 --dream_initial_states=64 "
        "--eval_every=0 --parallelism=0 --seed=755",
        "the first DoomTakeCover agent to beat random: LinearController on [z, h, c] "
        "trained only inside mdn_rnn_64ld_episodes at temperature 1.15; ships in the repository",
        notes="Reproduce its score with no training: python scripts/models/evaluate_controller.py "
        "--environment=DOOM_TAKE_COVER --saved_controller=dream_controller_episodes "
        "--num_episodes=100 "
        "--seed=1000 (its shipped encoder and MDN-RNN come with it): 324.1 +- 63.0 steps "
        "survived (random: 213.2 +- 94.4). Shipped as dream_controller until dream_controller (on "
        "mdn_rnn_64ld_hold) passed 750. Trained on "
        "mdn_rnn_64ld_episodes at step 1000 of 3000 with Bernoulli episode ends "
        "(--done_threshold=0); experiments/doom_take_cover/small_scale/README.md.",
    ),
    ZooModel(
        "dream_controller",
        "DOOM_TAKE_COVER",
        CONTROLLER,
        None,
        "--encoder=raw_rollout_vae_64ld --sequential_model=mdn_rnn_64ld_hold "
        "--controller=LinearController --cell_state --mode=dream --temperature=1.15 "
        "--done_threshold=0 --cma_population_size=16 --cma_trials_per_member=8 "
        "--cma_generations=40 --rollout_max_steps=2100 --dream_initial_states=64 "
        "--eval_every=5 --eval_episodes=64 --eval_in=dream --select_episodes=256 --select_top=4 "
        "--parallelism=0 --seed=755",
        "the DoomTakeCover agent: LinearController on [z, h, c] trained and chosen only "
        "inside the MDN-RNN at temperature 1.15, as in the paper; ships in the repository",
        notes="Reproduce its score with no training: python scripts/models/evaluate_controller.py "
        "--environment=DOOM_TAKE_COVER --saved_controller=dream_controller --num_episodes=100 "
        "--seed=1000 (its shipped encoder and MDN-RNN come with it): 824.5 +- 459.6 steps "
        "survived (random: 213.2 +- 94.4; the task's goal: 750). Trained on "
        "mdn_rnn_64ld_hold, whose data shows staying at both walls; every evaluation and the "
        "final choice (the 4 best-evaluated candidates on 256 new dreams) played dreams, no "
        "real episode (experiments/doom_take_cover/small_scale/README.md).",
    ),
    # ---- BREAKOUT ------------------------------------------------------------------------------
    ZooModel(
        "raw_rollout_vae_32ld",
        "BREAKOUT",
        ENCODER,
        "vae.Vae",
        "--train_steps=3000 --batch_size=100 --representation_size=32 "
        "--save_every_n_steps=500 --obs_sampled_per_rollout=100 --learning_rate=1e-3",
        "ConvVAE on 64x64 frames, Z = 32",
        notes="Trained on the RepeatRandomPolicy raw rollouts "
        "(`<data_dir>/breakout/raw_rollouts/rollouts-train*.tfrecord-*`).",
    ),
    ZooModel(
        "mdn_rnn_32ld",
        "BREAKOUT",
        SEQUENTIAL,
        "mdn_rnn.mdn_rnn_with_heads",
        "--rollouts_dataset=RawRolloutVae32ld --train_steps=2000 --batch_size=32 "
        "--sequence_length=100 --learning_rate=1e-3",
        "MDN-RNN (LSTM 256, 5 Gaussians per latent dimension) with reward and episode-end " "heads",
    ),
)
