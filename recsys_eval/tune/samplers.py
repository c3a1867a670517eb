"""Proposals of hyperparameters, reproducible trial by trial.

- grid: every point of the grid in a fixed order (the config's axis order, the last axis fastest).
- random and tpe: optuna's ``RandomSampler`` and ``TPESampler`` (Bergstra et al. 2011). Trial n is
  proposed by a sampler seeded with ``derive_seed(seed, n)`` that sees the finished trials of the
  batches before n's (trials run ``workers`` at a time). Trial n's hyperparameters are therefore a
  function of the seed, n and those trials' values alone: the same seed gives the same trials, and
  a resumed run proposes exactly what the interrupted one would have, whatever finished first.
"""

from __future__ import annotations

from typing import Any

from recsys_eval.core.rng import derive_seed
from recsys_eval.pipeline.search import SearchSpace


def propose(space: SearchSpace, method: str, seed: int, trial: int, history: list[dict[str, Any]]) -> dict[str, Any]:
    """Hyperparameters of trial number ``trial`` given the finished ``history`` (rows of the trial
    log with ``params`` and ``value``) that it may learn from."""
    if method == "grid":
        return space.grid()[trial]
    import optuna
    from optuna.trial import TrialState, create_trial

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    trial_seed = derive_seed(seed, trial)
    sampler = (optuna.samplers.RandomSampler(seed=trial_seed) if method == "random"
               else optuna.samplers.TPESampler(seed=trial_seed))
    study = optuna.create_study(direction="maximize", sampler=sampler)
    distributions = space.distributions()
    for row in history:
        defined = row["value"] == row["value"]  # a NaN value is a failed trial to optuna
        study.add_trial(create_trial(
            params=row["params"], distributions=distributions,
            value=row["value"] if defined else None, state=TrialState.COMPLETE if defined else TrialState.FAIL,
        ))
    return dict(study.ask(distributions).params)


def trial_budget(space: SearchSpace, method: str, trials: int | None) -> float:
    """How many trials may run: ``trials``, and at most the grid's size for a grid search
    (infinite when only a time budget is given)."""
    if method == "grid":
        return min(len(space.grid()), trials or len(space.grid()))
    return trials if trials is not None else float("inf")
