"""Split stage: train/test splits over one shared index (docs/CONVENTIONS.md#preparation-and-splitting).

Every splitter takes a seed, is deterministic, breaks ties in time by a seeded random order and
returns :class:`~recsys_eval.core.Split` objects whose ``info`` says what it did and what it
dropped or kept. :func:`make_split` runs one by the name configs use.
"""

from recsys_eval.split.disjoint import cold_items, user_disjoint
from recsys_eval.split.holdout import holdout
from recsys_eval.split.io import load_split, load_splits, save_split, save_splits
from recsys_eval.split.kfold import kfold
from recsys_eval.split.leakage import LeakageAudit, leakage_audit
from recsys_eval.split.learning_curve import learning_curve
from recsys_eval.split.make import SPLITTERS, check_split, make_split, split_parameters
from recsys_eval.split.official import OFFICIAL_FOLDS, official_folds
from recsys_eval.split.per_user import all_but_n, given_n, leave_last_n
from recsys_eval.split.rolling import rolling_time
from recsys_eval.split.temporal import time_split, user_time_split
from recsys_eval.split.validation import validation_split

__all__ = [
    "LeakageAudit",
    "OFFICIAL_FOLDS",
    "SPLITTERS",
    "all_but_n",
    "check_split",
    "cold_items",
    "given_n",
    "holdout",
    "kfold",
    "leakage_audit",
    "learning_curve",
    "leave_last_n",
    "load_split",
    "load_splits",
    "make_split",
    "official_folds",
    "rolling_time",
    "save_split",
    "save_splits",
    "split_parameters",
    "time_split",
    "user_disjoint",
    "user_time_split",
    "validation_split",
]
