"""Generated mutants set apart by hand: equivalent ones, which change nothing a user can see,
and import-time ones, which mutmut cannot switch on.

`scripts/dev/mutate.py --sample` counts these apart, not in the score. Each entry names the
mutant (mutmut's name, stable while its function is unchanged) and the kind of reason; KINDS
says what each kind means. A function that changes renumbers its mutants: an entry that no
longer matches a mutant is simply not counted.
"""

KINDS = {
    "overwritten-before-read": "an initial value that every valid use replaces before reading it",
    "unreached-default": "a fallback for input that valid use never gives",
    # Not equivalent: mutmut forks each mutant's test run from a process that has imported the
    # package, so code run while importing (module-level tables such as RECIPES) ran unmutated.
    # Listed only after the same change, made in the source, was seen failing the tests.
    "import-time": "runs while the module is imported, before mutmut switches a mutant on",
    "same-value": "the changed expression evaluates to the same value for every input",
    "same-for-the-program": "a spelling the program it is passed to reads the same way",
    "clock-tie": "a comparison of clock readings that differs only when they are exactly equal",
    "flushed-next": "an unflushed print whose text the next print flushes before anything runs",
    "speed-only": "changes how fast, not what is returned: benchmarks/ measure it, tests do not",
}

EQUIVALENT = {
    # _array_diff: b.astype(None) for b.astype(np.float64) on integer arrays; numpy reads a
    # dtype of None as float64.
    "rl755.pipeline.compare.x__array_diff__mutmut_63": "same-value",
    # FaultyEnv.__init__: _steps = 1 for 0; reset(), which gymnasium requires before the first
    # step, sets it to 0 again.
    "rl755.testing.faulty_env.xǁFaultyEnvǁ__init____mutmut_4": "overwritten-before-read",
    # CarRacing._road_array: max(..., default=1) over the road's polygons, and every reset
    # builds a road (gymnasium retries until a track exists), so the default is never used.
    "rl755.environments.car_racing.xǁCarRacingǁ_road_array__mutmut_7": "unreached-default",
    "rl755.environments.car_racing.xǁCarRacingǁ_road_array__mutmut_8": "unreached-default",
    # mem_to_mb: (unit or "M").upper() with "m" for "M": upper-cased either way.
    "rl755.slurm.cluster.x_mem_to_mb__mutmut_22": "same-value",
    # query_slurm: sacct's --format field names in lower case; sacct ignores their case.
    "rl755.slurm.job_state.x_query_slurm__mutmut_39": "same-for-the-program",
    # RayWorkerPool.run: a job's deadline `<= now` as `< now`; both are time.monotonic()
    # floats, and the next wake-up (at most POLL_S later) sees the deadline passed either way.
    "rl755.common.ray_pool.xǁRayWorkerPoolǁrun__mutmut_130": "clock-tie",
    # latent_projection: svd(full_matrices=True) changes only u's shape; s and vt's rows,
    # which the projection uses, are the same.
    "rl755.visualize.x_latent_projection__mutmut_18": "same-value",
    # latent_projection: the points at zorder 3 for 2, still above the line at zorder 1: the
    # same picture.
    "rl755.visualize.x_latent_projection__mutmut_76": "same-value",
    # decode: z passed on in its own float dtype, not cast to float32 first; the decoder's
    # Keras layers cast floating inputs to their own dtype, so the frames are the same.
    "rl755.visualize.x_decode__mutmut_5": "same-value",
    # _step_latents: tf.constant([seed, t]) without tf.int32: a list of Python (or NumPy)
    # integers becomes an int32 tensor anyway.
    "rl755.visualize.x__step_latents__mutmut_49": "same-value",
    # run_recipe: a skipped step's "done already" line without flush=True; the next step's
    # header or the summary, printed with flush=True before anything else runs, flushes it.
    "rl755.pipeline.recipe_runner.x_run_recipe__mutmut_60": "flushed-next",
    # CarRacing._render: the score's text with a transparent background instead of black; it
    # is drawn on the indicator panel's black, and the frames stay CarRacing-v3's pixel for
    # pixel (tests/test_car_racing_render.py passes with the change).
    "rl755.environments.car_racing.xǁCarRacingǁ_render__mutmut_93": "same-value",
    # get_autoregressive_slices: the slicing map without its parallel calls. Under op
    # determinism the options are empty anyway (one call at a time); without it, parallel
    # calls draw the slices' random starts in no fixed order, so no run can tell which map it
    # had but by its speed (benchmarks/sequential_training.py times the input with training).
    "rl755.data.common.rollout_datasets.xǁEncodedRolloutDatasetBuilderǁget_autoregressive_slices__mutmut_193": "speed-only",
    # hazard_curve: np.bincount(which, minlength=bins) with bins = which.max() + 1, which the
    # count reaches without minlength.
    "rl755.evaluation.calibration.x_hazard_curve__mutmut_40": "same-value",
    # compare: np.load(..., allow_pickle=False) without the argument, or with None: False is
    # np.load's default and None is as false.
    "rl755.pipeline.compare.x__file_arrays__mutmut_18": "same-value",
    "rl755.pipeline.compare.x__npz_arrays__mutmut_2": "same-value",
}
