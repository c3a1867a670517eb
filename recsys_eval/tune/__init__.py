"""Tuning: hyperparameters chosen on a validation split carved from each fold's train side, every
trial recorded in ``tuning.parquet``; the chosen ones are refitted on the whole train side and
evaluated on test by the runner."""

from recsys_eval.tune.log import TrialLog, best_trial
from recsys_eval.pipeline.search import SearchSpace, parse_search
from recsys_eval.tune.tuner import chosen, tune_fold, validation_of

__all__ = ["SearchSpace", "TrialLog", "best_trial", "chosen", "parse_search", "tune_fold", "validation_of"]
