"""Data stage: MovieLens and your own files into Interactions, and their preparation.

- :func:`data_home` resolves where datasets live; :func:`list_datasets`, :func:`fetch_dataset`,
  :func:`dataset_path` and :func:`load_dataset` work from the descriptors in ``datasets/``.
- :func:`load_file` reads your own CSV or Parquet interactions.
- :func:`apply_threshold`, :func:`min_counts` and :func:`k_core` prepare data and report what they
  removed; :func:`describe` gives the figures ``recsys-eval datasets info`` prints.
"""

from recsys_eval._lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "recsys_eval.data.descriptors": ["Descriptor", "get_descriptor", "list_datasets"],
    "recsys_eval.data.files": ["load_file"],
    "recsys_eval.data.home": ["data_home"],
    "recsys_eval.data.movielens": ["load_dataset"],
    "recsys_eval.data.prepare": ["Removed", "apply_threshold", "k_core", "min_counts"],
    "recsys_eval.data.sources": ["dataset_path", "fetch_dataset", "presence"],
    "recsys_eval.data.summary": ["describe"],
})
