"""The benchmarks' synthetic inputs: the package's seeded MovieLens-size generator."""

from recsys_eval.data.synthetic import ML25M, synthetic_interactions

__all__ = ["ML25M", "synthetic_interactions"]
