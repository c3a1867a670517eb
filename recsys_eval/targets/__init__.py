"""Target-item protocols of Bellogín, Castells & Cantador (docs/CONVENTIONS.md#protocols).

``Protocol`` names a point of the design space (``AI+1R+NN100``); ``build_targets`` makes the
Targets of a Split under it (``iter_targets`` chunk by chunk); ``uniform_test`` and
``popularity_bins`` are the popularity-bias neutralising designs; ``protocol_summary`` describes
built Targets with the closed-form expectations of a random recommender; ``save_targets`` and
``load_targets`` exchange them as Parquet.
"""

from recsys_eval.targets.build import build_targets, iter_targets
from recsys_eval.targets.designs import (
    item_popularity_bins,
    popularity_bins,
    uniform_test,
)
from recsys_eval.targets.io import load_targets, save_targets
from recsys_eval.targets.protocol import Protocol
from recsys_eval.targets.relevance import Qrels, qrels
from recsys_eval.targets.summary import expected_random, protocol_summary

__all__ = [
    "Protocol",
    "Qrels",
    "build_targets",
    "expected_random",
    "item_popularity_bins",
    "iter_targets",
    "load_targets",
    "popularity_bins",
    "protocol_summary",
    "qrels",
    "save_targets",
    "uniform_test",
]
