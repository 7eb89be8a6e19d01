"""Comparing world models: one benchmark for any `SequentialModel` on held-out encoded rollouts.

    from rl755.evaluation import benchmark, rollouts

    data = rollouts.load_rollouts(builder, split="validation", max_rollouts=100)
    result = benchmark.evaluate_world_model(model, data, encoder=encoder, horizons=(1, 5, 15, 50))
    print(benchmark.format_table([result], benchmark.baselines(data, ...)))

Modules, one job each:
    rollouts.py      held-out encoded rollouts in memory (padded, with the training masks)
    predictions.py   what a model predicts from one hidden state (point z, mixture log-prob,
                     reward, episode-end probability), through the SequentialModel interface
    next_step.py     teacher-forced next-step quality: latent MSE for all, NLL for mixtures
    open_loop.py     free-running error after k steps from a real context, latent and decoded
    calibration.py   episode-end calibration (Brier, reliability, hazard) and reward error
    gap.py           the dream-versus-real gap of fixed policies as one number per model
    benchmark.py     all of the above for one model, and the side-by-side table
    figures.py       the pictures: real vs dreamed frames, error vs horizon, calibration
    cost.py          CPU cost: training sequences per CPU-second, acting cost per step
    run.py           what scripts/models/evaluate_world_model.py runs (name resolution, files)
"""
