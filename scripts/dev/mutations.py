"""The curated mutations of scripts/dev/mutate.py: one broken behaviour each.

Each entry: name, file, old (exact text, found once), new, tests (that must fail), what.
Keep `old` short but unique; tests/test_mutations.py checks that every entry still applies.
"""

CT = "tests/test_controller_training.py"
DO = "tests/test_dream_options.py"
POLICIES = "tests/test_policies.py"
CONTROLLERS = "tests/test_controllers.py"
ENCODER = "tests/test_encoder.py"
ROLLOUTS = "tests/test_rollouts.py"
DATASETS = "tests/test_rollout_datasets.py"
SEQ_MODELS = "tests/test_sequential_models.py"
SEQ_TRAIN = "tests/test_sequential_training.py"
ENCODE = "tests/test_encoder_encode.py"
SHARDS = "tests/test_bad_shards.py"
ENTRIES = "tests/test_environment_entries.py"
CI = "tests/test_ci.py"
LOGS = "tests/test_quiet_logs.py"
SHIPPED = "tests/test_shipped_models.py"
RECORDS = "tests/test_run_record.py"
SEQ_WARM = f"{SEQ_TRAIN}::test_initial_weights_start_a_new_run_from_another_runs_weights"

MUTATIONS = [
    # ---- the six blind spots of issue 16 ---------------------------------------------------------
    dict(
        name="saved_controller_worst_eval",
        file="rl755/controller/saved.py",
        old='best = max(ckpt["evals"], key=lambda e: e["mean"])',
        new='best = min(ckpt["evals"], key=lambda e: e["mean"])',
        tests=(f"{CT}::test_the_saved_controller_is_the_best_real_evaluation",),
        what="the saved controller is the worst real evaluation, not the best",
    ),
    dict(
        name="compare_random_other_seeds",
        file="rl755/controller/evaluate.py",
        old="rnd = random_policy_returns(make_env, seeds, max_steps)",
        new="rnd = random_policy_returns(make_env, seeds + 1, max_steps)",
        tests=(f"{CT}::test_compare_random_plays_the_controllers_seeds",),
        what="--compare_random plays other seeds than the controller",
    ),
    dict(
        name="dream_ignores_temperature",
        file="rl755/controller/dream_eval.py",
        old="h, temperature=self.temperature, seed=",
        new="h, temperature=1.0, seed=",
        tests=(f"{CONTROLLERS}::test_dream_temperature_sets_how_random_the_dream_is",),
        what="the dream samples at temperature 1 whatever --temperature says",
    ),
    dict(
        name="vae_keeps_indicator_bar",
        file="rl755/models/common/conv_vae.py",
        old="x = x[:, self.crop_rows[0] : self.crop_rows[1]]",
        new="x = x[:, :]",
        tests=(f"{ENCODER}::test_car_racing_vae_crops_the_indicator_bar_by_content",),
        what="CarRacing's VAE no longer crops the indicator bar (rows 84:96)",
    ),
    dict(
        name="encoder_resume_zeroes_adam_moments",
        file="rl755/models/common/train_encoder.py",
        old="checkpoints.load_weights_checked(encoder, latest.weights_path)",
        new=(
            "checkpoints.load_weights_checked(encoder, latest.weights_path)\n"
            "            for _v in optimizer.variables[2:]:\n"
            "                _v.assign(tf.zeros_like(_v))"
        ),
        tests=(f"{ENCODER}::test_resume_restores_weights_and_adam_state_exactly",),
        what="a resumed encoder run starts with zeroed Adam moments (step count kept)",
    ),
    dict(
        name="find_corrupted_delete_keeps_files",
        file="rl755/data_gen/corrupted.py",
        old="            os.remove(path)\n",
        new="            pass\n",
        tests=(f"{ROLLOUTS}::test_find_corrupted_delete_removes_only_the_corrupted_shards",),
        what="find_corrupted_tfrecords.py --delete deletes nothing",
    ),
    # ---- controller ------------------------------------------------------------------------------
    dict(
        name="training_fitness_selects_first",
        file="rl755/controller/cma_train.py",
        old='if fitness[best] > state["best_fitness"]:',
        new='if state["best_params"] is None:',
        tests=(f"{CT}::test_without_evaluations_the_best_training_member_is_saved",),
        what="the best member is the first generation's, not the best seen",
    ),
    dict(
        name="members_play_different_seeds",
        file="rl755/controller/cma_train.py",
        old="np.tile(seeds, cfg.population_size)",
        new="np.random.default_rng(gen).permutation(np.tile(seeds, cfg.population_size))",
        tests=(f"{CT}::test_without_evaluations_the_best_training_member_is_saved",),
        what="the members of a generation no longer share its trial seeds",
    ),
    dict(
        name="eval_seeds_change_per_generation",
        file="rl755/controller/cma_train.py",
        old="ev_seeds = eval_seeds(cfg.seed, cfg.eval_episodes)",
        new='ev_seeds = eval_seeds(cfg.seed + record["generation"], cfg.eval_episodes)',
        tests=(f"{CT}::test_the_saved_controller_is_the_best_real_evaluation",),
        what="the periodic real evaluation plays other seeds each time",
    ),
    dict(
        name="dream_gap_sign_flipped",
        file="rl755/controller/cma_train.py",
        old='scalars["eval/dream_to_real_gap"] = record["best"] - best_member["mean"]',
        new='scalars["eval/dream_to_real_gap"] = best_member["mean"] - record["best"]',
        tests=(f"{CT}::test_dream_to_real_gap_is_dream_fitness_minus_real_score",),
        what="TensorBoard's dream-to-real gap has the wrong sign",
    ),
    dict(
        name="cma_mean_candidate_is_the_best_member",
        file="rl755/controller/cma_train.py",
        old='"cma_mean": np.array(es.mean)}',
        new='"cma_mean": solutions[best]}',
        tests=(f"{CT}::test_the_saved_controller_is_the_best_real_evaluation",),
        what="the CMA-ES mean candidate of a real evaluation is not the CMA-ES mean",
    ),
    dict(
        name="brake_scaled_not_clipped",
        file="rl755/controller/networks.py",
        old='kwargs.setdefault("action_squash", environment.controller_squash)',
        new="pass",
        tests=(f"{CONTROLLERS}::test_actions_squashed_into_the_action_box",),
        what="controllers ignore the environment's per-dimension squash (CarRacing's brake)",
    ),
    dict(
        name="tensorboard_best_logs_mean",
        file="rl755/controller/cma_train.py",
        old='"fitness/best": record["best"],',
        new='"fitness/best": record["mean"],',
        tests=(f"{CT}::test_bookkeeping_matches_the_history",),
        what="TensorBoard's fitness/best shows the population mean",
    ),
    dict(
        name="cma_resume_drops_correlations",
        file="rl755/controller/cma_state.py",
        old="    refresh_decomposition(es)\n    return es",
        new="    es.sm.C = np.diag(np.diag(es.sm.C))\n    refresh_decomposition(es)\n    return es",
        tests=(f"{CT}::test_rerun_resumes_generation_count_and_cma_state_exactly",),
        what="a resumed CMA-ES run loses the off-diagonal covariance",
    ),
    dict(
        name="cma_checkpoint_keeps_eigenvectors",
        file="rl755/controller/cma_state.py",
        old="es.sm.B = es.B = es.sm._inverse_root_C = None",
        new="es.sm._inverse_root_C = None",
        tests=(f"{CT}::test_checkpoints_hold_what_a_resume_needs_and_no_more",),
        what="CMA-ES checkpoints store the N x N eigenvectors again",
    ),
    dict(
        name="no_diagonal_cma",
        file="rl755/controller/cma_state.py",
        old='return "full" if num_params <= FULL_COVARIANCE_MAX_PARAMS else "diagonal"',
        new='return "full"',
        tests=(f"{CT}::test_large_controllers_use_diagonal_cma",),
        what="large controllers get a full covariance matrix",
    ),
    # ---- data ------------------------------------------------------------------------------------
    dict(
        name="slices_not_contiguous",
        file="rl755/data/common/rollout_datasets.py",
        old="return {k: v[start : start + slice_size] for k, v in r.items()}",
        new="return {k: tf.reverse(v[start : start + slice_size], [0]) for k, v in r.items()}",
        tests=(f"{DATASETS}::test_random_rollout_slices",),
        what="random_rollout_slices_ds returns the steps of a slice out of order",
    ),
    dict(
        name="sampled_frames_with_replacement",
        file="rl755/data/common/rollout_datasets.py",
        old="idx = tf.random.shuffle(tf.range(n))[:k]",
        new="idx = tf.random.uniform([k], 0, n, dtype=tf.int32)",
        tests=(f"{DATASETS}::test_random_rollout_observations",),
        what="frames are sampled from a rollout with replacement",
    ),
    dict(
        name="targets_are_inputs",
        file="rl755/data/common/rollout_datasets.py",
        old="z_in, z_next = z[:steps], z[1 : steps + 1]",
        new="z_in, z_next = z[:steps], z[0:steps]",
        tests=(f"{DATASETS}::test_autoregressive_slices_alignment",),
        what="sequential targets are z_t instead of z_{t+1}",
    ),
    dict(
        name="encode_drops_std_devs",
        file="rl755/data_gen/encode.py",
        old="        obs_std_l=std,\n",
        new="        obs_std_l=None,\n",
        tests=(f"{ENCODE}::test_encode_then_read_matches_the_model",),
        what="stage 3 no longer stores the VAE's posterior std devs",
    ),
    dict(
        name="truncated_shard_not_checked",
        file="rl755/common/shard_checks.py",
        old="raise BadInput(corrupted_message(bad, pattern))",
        new="return",
        tests=(
            f"{SHARDS}::test_check_shards_names_every_bad_file_and_the_finder",
            f"{SHARDS}::test_train_obs_encoder_names_a_truncated_gzip_shard_before_training",
        ),
        what="truncated shards are no longer found before training",
    ),
    dict(
        name="gzip_trailer_not_checked",
        file="rl755/common/shard_checks.py",
        old="    if not inflater.eof:",
        new="    if False:",
        tests=(f"{SHARDS}::test_check_shard_finds_every_truncation_tensorflow_fails_on",),
        what="a GZIP shard without its end of stream passes the check",
    ),
    dict(
        name="data_loss_not_named",
        file="rl755/common/shard_checks.py",
        old="    except tf.errors.DataLossError as e:",
        new="    except tf.errors.OutOfRangeError as e:",
        tests=(
            f"{SHARDS}::test_a_damaged_record_met_while_encoding_is_named_and_leaves_only_the_record",
        ),
        what="TensorFlow's DataLossError reaches the user without the file's name",
    ),
    dict(
        name="failed_run_leaves_outputs",
        file="rl755/common/run_record.py",
        old="        if not any(is_progress(p) for p in new):",
        new="        if False:",
        tests=(
            f"{SHARDS}::test_a_damaged_record_met_during_training_is_named_and_leaves_only_the_record",
        ),
        what="a run that fails before its first checkpoint leaves TensorBoard files behind",
    ),
    # ---- models ----------------------------------------------------------------------------------
    dict(
        name="mdn_temperature_ignored",
        file="rl755/models/common/sequential_heads.py",
        old='logits=outputs["mdn_logits"] / tau',
        new='logits=outputs["mdn_logits"]',
        tests=(f"{SEQ_MODELS}::test_mdn_samples_match_mixture_moments",),
        what="the MDN's mixture weights ignore the temperature",
    ),
    dict(
        name="mdn_nll_without_log_softmax",
        file="rl755/models/common/sequential_heads.py",
        old='log_weights = tf.nn.log_softmax(outputs["mdn_logits"], axis=-1)',
        new='log_weights = outputs["mdn_logits"]',
        tests=(f"{SEQ_MODELS}::test_mdn_loss_is_tfps_mixture_log_prob",),
        what="the MDN training loss uses unnormalized mixture weights",
    ),
    dict(
        name="lstm_kernel_padding_drops_gradient",
        file="rl755/models/common/lstm_kernel.py",
        old="dh_prev = tf.matmul(dz, recurrent_t) + dh * (1.0 - m)",
        new="dh_prev = tf.matmul(dz, recurrent_t)",
        tests=(f"{SEQ_MODELS}::test_lstm_sequence_kernel_equals_keras_lstm_values_and_gradients",),
        what="the CPU LSTM kernel's gradient stops at a padded step",
    ),
    dict(
        name="lstm_training_not_compiled",
        file="rl755/models/common/lstm.py",
        old="        return self._use_sequence_kernel()\n",
        new="        return False\n",
        tests=(f"{SEQ_TRAIN}::test_xla_compiled_training_gives_the_same_losses",),
        what="LSTM models no longer train with XLA on CPUs",
    ),
    dict(
        name="reconstruction_rows_swapped",
        file="rl755/models/common/encoder_callbacks.py",
        old="rows = [pictures.frame_grid(frames_as_seen(encoder, frames)), pictures.frame_grid(recon)]",
        new="rows = [pictures.frame_grid(recon), pictures.frame_grid(frames_as_seen(encoder, frames))]",
        tests=(
            f"{ENCODER}::test_reconstruction_picture_is_what_the_model_sees_above_its_reconstruction",
        ),
        what="the reconstruction PNG shows reconstructions on top, frames below",
    ),
    dict(
        name="kl_tolerance_dropped",
        file="rl755/models/common/conv_vae.py",
        old="kl = tf.maximum(kl, self.kl_tolerance * self._representation_size)",
        new="kl = kl",
        tests=(f"{ENCODER}::test_car_racing_vae_matches_the_paper",),
        what="the VAE's KL term is no longer clipped at kl_tolerance * Z",
    ),
    dict(
        name="sequential_resume_fresh_optimizer",
        file="rl755/models/common/sequential_loop.py",
        old="checkpoints.restore_optimizer(",
        new="(lambda *a, **k: None)(",
        tests=(f"{SEQ_TRAIN}::test_resume_restores_optimizer_state_exactly",),
        what="a resumed sequential run starts with a fresh optimizer",
    ),
    dict(
        name="sequences_per_second_wrong",
        file="rl755/common/tensorboard.py",
        old="self.items_key: self._steps * self.batch_size / seconds,",
        new="self.items_key: self._steps / seconds,",
        tests=(f"{SEQ_TRAIN}::test_train_checkpoints_tensorboard_record_and_resume",),
        what="TensorBoard's sequences/s forgets the batch size",
    ),
    # ---- environments, CI, logs ------------------------------------------------------------------
    dict(
        name="unreproducible_reset_not_declared",
        file="rl755/testing/replay.py",
        old="    if env.spec.reproducible_reset:\n",
        new="    if True:\n",
        tests=(f"{ENTRIES}::test_an_unreproducible_reset_is_said_in_words",),
        what="an environment's reproducible_reset=False is not heeded",
    ),
    dict(
        name="ci_passes_without_slurm",
        file=".ci/run",
        old="  exit 1\nelse",
        new="  true\nelse",
        tests=(f"{CI}::test_ci_fails_when_slurm_does_not_start",),
        what="CI goes on (and can pass by skipping) when SLURM does not start",
    ),
    dict(
        name="slurm_tests_skip_in_ci",
        file="tests/slurm_helpers.py",
        old='return os.environ.get("CI", "").lower() == "true"',
        new="return False",
        tests=(f"{CI}::test_in_ci_a_slurm_test_without_slurm_fails",),
        what="in CI the SLURM tests skip instead of failing without SLURM",
    ),
    dict(
        name="tf_chatter_not_filtered",
        file="rl755/common/tf_setup.py",
        old="if not is_noise(line) and not any(a in line for a in also)",
        new="if True",
        tests=(
            f"{LOGS}::test_importing_rl755_then_tensorflow_prints_no_chatter_but_keeps_warnings",
        ),
        what="TensorFlow's start-up chatter reaches stderr again",
    ),
    # ---- shipped models (issue 12) ------------------------------------------------------------
    dict(
        name="shipped_copy_wins_over_trained",
        file="rl755/zoo/entry.py",
        old="use_shipped = not has_trained and shipped.is_shipped(self)",
        new="use_shipped = shipped.is_shipped(self)",
        tests=(f"{SHIPPED}::test_a_trained_copy_wins_and_a_missing_model_names_both_ways",),
        what="a zoo row loads the shipped copy although the user trained their own",
    ),
    dict(
        name="shipped_controller_reads_users_models",
        file="rl755/controller/resolve.py",
        old='source = "shipped" if',
        new="source = None if",
        tests=(f"{SHIPPED}::test_shipped_controller_plays_the_originals_returns",),
        what="a shipped controller plays with a user's retrained encoder of the same name",
    ),
    dict(
        name="shipped_weights_stay_float32",
        file="rl755/zoo/ship.py",
        old="                data = half\n",
        new="                pass\n",
        tests=(f"{SHIPPED}::test_each_kind_ships_and_loads_from_the_shipped_copy",),
        what="shipped weights are written float32 (twice the bytes)",
    ),
    dict(
        name="shipping_ignores_size_limit",
        file="rl755/zoo/ship.py",
        old="if others + size > shipped.SIZE_LIMIT_BYTES:",
        new="if False:",
        tests=(f"{SHIPPED}::test_shipping_refuses_bad_sources_and_leaves_nothing",),
        what="shipping goes over the repository's size limit",
    ),
    # ---- stop 20: starting CMA-ES at a controller, compute bookkeeping, the CPU in records --------
    dict(
        name="initial_params_ignored",
        file="rl755/controller/cma_train.py",
        old="return cma_state.new_state(n, cfg.sigma, cfg.population_size, cfg.seed, meta, x0=x0)",
        new="return cma_state.new_state(n, cfg.sigma, cfg.population_size, cfg.seed, meta)",
        tests=(f"{CT}::test_initial_params_start_cma_at_a_trained_controller",),
        what="--initial_params is read but CMA-ES starts at zero",
    ),
    dict(
        name="initial_params_skip_shape_check",
        file="rl755/controller/saved.py",
        old="            if theirs.get(key) != meta[key]:",
        new="            if False:",
        tests=(f"{CT}::test_initial_params_of_another_shape_fail_naming_the_file",),
        what="--initial_params from a controller of another shape is not refused by name",
    ),
    dict(
        name="compute_ignores_evaluations",
        file="rl755/controller/cma_state.py",
        old='steps = np.cumsum([h["steps"] + h.get("eval_steps", 0) for h in history])',
        new='steps = np.cumsum([h["steps"] for h in history])',
        tests=(f"{CT}::test_bookkeeping_matches_the_history",),
        what="the learning curve's environment steps leave out the real evaluations",
    ),
    dict(
        name="run_record_without_cpu",
        file="rl755/common/run_record.py",
        old='            "cpu": cpu_info(),\n',
        new="",
        tests=(f"{RECORDS}::test_completed_run_writes_flags_git_host_and_times",),
        what="run records no longer say which CPU (bit-exact repeats hold on one kind only)",
    ),
    dict(
        name="initial_weights_not_loaded",
        file="rl755/models/common/sequential_loop.py",
        old='info["initial_weights"] = _load_initial_weights(model, initial_weights, info, strategy)',
        new='info["initial_weights"] = os.path.abspath(initial_weights)',
        tests=(SEQ_WARM,),
        what="--initial_weights is recorded but the run starts from fresh weights",
    ),
    dict(
        name="initial_weights_of_another_model",
        file="rl755/models/common/sequential_loop.py",
        old='for key in ("model", "model_class", "representation_size", "action_size"):',
        new="for key in ():",
        tests=(f"{SEQ_TRAIN}::test_initial_weights_reach_the_stage_and_another_model_is_named",),
        what="--initial_weights of another catalogue model is not refused by name",
    ),
    dict(
        name="world_model_without_shipped_fallback",
        file="rl755/pipeline/world_model.py",
        old="rows = [zoo.get(env, n) for n in p.shipped]",
        new="rows = []",
        tests=(
            "tests/test_pipeline.py::"
            "test_find_world_model_takes_the_registry_then_the_run_then_the_shipped_models",
        ),
        what="with nothing trained, the world-model tour no longer opens the shipped models",
    ),
    dict(
        name="onednn_notice_not_absorbed",
        file="rl755/models/common/sequential_heads.py",
        old="        tf_setup.absorb_onednn_type_notice()  # sampling transposes int32 indices",
        new="        pass",
        tests=(f"{LOGS}::test_mixture_sampling_prints_no_onednn_type_notice",),
        what="every process that samples the MDN prints oneDNN's DT_INT32 notice again",
    ),
    dict(
        name="selection_ignored",
        file="rl755/controller/saved.py",
        old='if selection and selection["generation"] == ckpt["generation"]:',
        new="if False:",
        tests=(f"{CT}::test_the_selection_outranks_the_evaluations_only_at_its_generation",),
        what="--select_episodes replays the candidates but the saved controller ignores it",
    ),
    dict(
        name="stale_selection_kept",
        file="rl755/controller/saved.py",
        old='if selection and selection["generation"] == ckpt["generation"]:',
        new="if selection:",
        tests=(f"{CT}::test_the_selection_outranks_the_evaluations_only_at_its_generation",),
        what="a run resumed past its selection keeps choosing by the old selection",
    ),
    dict(
        name="selection_on_evaluation_seeds",
        file="rl755/controller/cma_train.py",
        old="seeds = selection_seeds(cfg.seed, cfg.select_episodes)",
        new="seeds = eval_seeds(cfg.seed, cfg.select_episodes)",
        tests=(f"{CT}::test_final_selection_replays_the_best_evaluated_candidates_on_new_seeds",),
        what="the selection replays the evaluation's own seeds (no fresh episodes)",
    ),
    dict(
        name="dream_evaluation_plays_real",
        file="rl755/controller/cma_train.py",
        old='    return play_dream if cfg.eval_in == "dream" else play_real',
        new="    return play_real",
        tests=(f"{DO}::test_dream_evaluations_and_selection_play_only_dreams",),
        what="--eval_in=dream evaluates and selects in real episodes",
    ),
    dict(
        name="dream_evaluation_seed_not_the_first",
        file="rl755/controller/cma_train.py",
        old="seed=int(seeds[0])) for p in params",
        new="seed=int(seeds[-1])) for p in params",
        tests=(f"{DO}::test_dream_evaluations_and_selection_play_only_dreams",),
        what="dream evaluations draw with another dream seed than the documented one",
    ),
    dict(
        name="dream_evaluation_candidates_share_a_batch",
        file="rl755/controller/cma_train.py",
        old="evs = [dream.evaluate(p[None], ids, seed=int(seeds[0])) for p in params]",
        new="evs = [dream.evaluate(params, ids, seed=int(seeds[0]))]",
        tests=(f"{DO}::test_dream_evaluations_and_selection_play_only_dreams",),
        what="dream candidates batched together, so each gets other draws",
    ),
    dict(
        name="policy_kwargs_ignored",
        file="rl755/data_gen/collect.py",
        old='return resolve_policy(env_enum, policy, **policy_kwargs), f"{policy}({args})"',
        new='return resolve_policy(env_enum, policy), f"{policy}({args})"',
        tests=(f"{POLICIES}::test_policy_kwargs_reach_the_constructor_and_the_run_tag",),
        what="--policy_kwargs never reach the policy's constructor",
    ),
    dict(
        name="policy_kwargs_not_in_run_tag",
        file="rl755/data_gen/collect.py",
        old='return resolve_policy(env_enum, policy, **policy_kwargs), f"{policy}({args})"',
        new="return resolve_policy(env_enum, policy, **policy_kwargs), policy",
        tests=(f"{POLICIES}::test_policy_kwargs_reach_the_constructor_and_the_run_tag",),
        what="rollouts of other --policy_kwargs get the same run tag (mixed in one dataset)",
    ),
]
