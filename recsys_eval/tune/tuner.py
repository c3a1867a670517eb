"""Tuning on one fold: for each recommender with a search, trials on a validation split carved from
the fold's TRAIN side only (recsys_eval.split.validation), then the best hyperparameters, which
the runner refits on the fold's whole train side and evaluates on test as any other system.

The fold's test side never reaches this module: only ``split.train`` is split again, and the
validation split's test side is the validation set (docs/CONVENTIONS.md#seeds-and-reproducibility for the seeds).
"""

from __future__ import annotations

import time
from pathlib import Path
from recsys_eval.core import Interactions, Split
from recsys_eval.core.rng import derive_seed
from recsys_eval.pipeline.config import ExperimentConfig, RecommenderConfig
from recsys_eval.pipeline.progress import Progress
from recsys_eval.tune.log import TrialLog, best_trial
from recsys_eval.tune.objective import Trials
from recsys_eval.tune.samplers import propose, trial_budget
from recsys_eval.pipeline.search import parse_search


def tuning_seed(config: ExperimentConfig, fold: str, rec: RecommenderConfig) -> int:
    """The sampler's seed of one (fold, recommender): from the tuning seed and what the search is
    (the recommender's definition and space, the method, metric, protocol and validation split)."""
    t = config.tuning
    base = config.seed if t.seed is None else t.seed
    what = {"method": t.method, "metric": t.metric, "protocol": t.protocol, "workers": t.workers,
            "validation": t.validation.model_dump(), "search": rec.search}
    return derive_seed(base, "tuning", fold, rec.definition, what)


def validation_of(config: ExperimentConfig, split: Split) -> Split:
    """The validation split of a fold, carved from what its models are fitted on (its train side,
    less a user-disjoint split's test users: tuning never sees them); the first inner fold when the
    validation splitter makes several."""
    from recsys_eval.split.validation import validation_split

    v = config.tuning.validation
    params = {"seed": derive_seed(config.seed, "validation", split.name, v.model_dump()), **v.params}
    train = split.fit_side()
    made = validation_split(Split(train, train.with_frame(train.frame.clear()), name=split.name),
                            v.method, **params)
    return made[0] if isinstance(made, list) else made


def tune_fold(config: ExperimentConfig, data: Interactions, split: Split, log_path: Path,
              progress: Progress | None = None) -> dict[str, RecommenderConfig]:
    """Tune every recommender with a search on ``split``'s train side; return each one's entry with
    its best hyperparameters merged into ``params`` (by display name). Trials already in the log
    at ``log_path`` (a resumed run) are not run again. ``progress`` shows a step per system,
    advanced per trial, and its best trial when it ends."""
    progress = progress or Progress.silent()
    searched = [r for r in config.recommenders if r.search is not None]
    if not searched or config.tuning is None:
        return {}
    t = config.tuning
    trial_log = TrialLog(log_path)
    validation = validation_of(config, split)
    tuned = {}
    with Trials(config, data, validation) as trials:
        for rec in searched:
            space = parse_search(rec, f"recommender {rec.display!r} search")
            seed = tuning_seed(config, split.name, rec)
            finished = trial_log.finished(split.name, rec.display)
            budget = trial_budget(space, t.method, t.trials)
            spent = sum(r["fit_seconds"] + r["eval_seconds"] for r in finished.values())
            start, n = time.perf_counter(), 0
            total = None if budget == float("inf") else int(budget)
            with progress.step(f"[{split.name}] tune {rec.display}", total=total) as advance:
                while n < budget and (n == 0 or t.seconds is None or spent + time.perf_counter() - start < t.seconds):
                    batch = [i for i in range(n, int(min(n + t.workers, budget))) if i not in finished]
                    history = [finished[i] for i in sorted(finished) if i < n]
                    params = [propose(space, t.method, seed, i, history) for i in batch]
                    for i, p, (value, fit_s, eval_s) in zip(batch, params, trials.run(rec, params), strict=True):
                        trial_log.add(split.name, rec.display, i, p, value, fit_s, eval_s)
                        finished[i] = {"trial": i, "params": p, "value": value, "fit_seconds": fit_s,
                                       "eval_seconds": eval_s}
                    advance(int(min(n + t.workers, budget)) - n)
                    n = int(min(n + t.workers, budget))
            best = best_trial(finished)
            progress.log(f"[{split.name}] {rec.display}: {len(finished)} trials, best {t.metric} = {best['value']:.4f} "
                         f"(trial {best['trial']}) with {best['params']}", markup=False)
            tuned[rec.display] = rec.model_copy(update={"params": {**rec.params, **best["params"]}})
    return tuned


def chosen(tuned: dict[str, RecommenderConfig], rec: RecommenderConfig) -> RecommenderConfig:
    """The entry to fit on a fold: the tuned one when ``rec`` was tuned, else ``rec`` itself."""
    return tuned.get(rec.display, rec)
