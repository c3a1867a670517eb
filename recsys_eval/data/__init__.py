"""Data stage: MovieLens and your own files into Interactions, and their preparation.

- :func:`data_home` resolves where datasets live; :func:`list_datasets`, :func:`fetch_dataset`,
  :func:`dataset_path` and :func:`load_dataset` work from the descriptors in ``datasets/``.
- :func:`load_file` reads your own CSV or Parquet interactions.
- :func:`apply_threshold`, :func:`min_counts` and :func:`k_core` prepare data and report what they
  removed; :func:`summarize` gives the figures ``recsys-eval datasets info`` prints.
"""

from recsys_eval.data.descriptors import Descriptor, get_descriptor, list_datasets
from recsys_eval.data.files import load_file
from recsys_eval.data.home import data_home
from recsys_eval.data.movielens import load_dataset
from recsys_eval.data.prepare import Removed, apply_threshold, k_core, min_counts
from recsys_eval.data.sources import dataset_path, fetch_dataset, presence
from recsys_eval.data.summary import summarize

__all__ = [
    "Descriptor",
    "Removed",
    "apply_threshold",
    "data_home",
    "dataset_path",
    "fetch_dataset",
    "get_descriptor",
    "k_core",
    "list_datasets",
    "load_dataset",
    "load_file",
    "min_counts",
    "presence",
    "summarize",
]
