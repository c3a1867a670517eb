"""Target-item protocols of Bellogín, Castells & Cantador (docs/CONVENTIONS.md#protocols).

``Protocol`` names a point of the design space (``AI+1R+NN100``); ``build_targets`` makes the
Targets of a Split under it (``iter_targets`` chunk by chunk); ``uniform_test`` and
``popularity_bins`` are the popularity-bias neutralising designs; ``protocol_summary`` describes
built Targets with the closed-form expectations of a random recommender; ``save_targets`` and
``load_targets`` exchange them as Parquet; ``read_negatives`` and ``write_negatives`` a sampled
protocol's negatives in NCF's layout or as a table.
"""

from recsys_eval._lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "recsys_eval.targets.build": ["build_targets", "iter_targets", "plan_targets"],
    "recsys_eval.targets.designs": ["item_popularity_bins", "popularity_bin_plans", "popularity_bins", "uniform_test"],
    "recsys_eval.targets.io": ["load_targets", "save_targets"],
    "recsys_eval.targets.negatives": ["Negatives", "negatives_of", "read_negatives", "write_negatives"],
    "recsys_eval.targets.protocol": ["Protocol"],
    "recsys_eval.targets.relevance": ["Qrels", "qrels"],
    "recsys_eval.targets.summary": ["expected_random", "protocol_summary"],
})
