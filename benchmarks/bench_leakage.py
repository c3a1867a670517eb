"""Benchmark: the leakage audit (recsys_eval.split.leakage) of an ML-25M-size input.

The seeded synthetic ratings of benchmarks/synthetic.py (by default ML-25M's 162,541 users, 59,047
items, 25,000,095 interactions, timestamps), split by a per-user random 80/20 holdout (the leaking
case, every share non-zero) and by a global time split at the 0.8 quantile; each audit is timed
alone, the best of ``--repeat``. Target (issue 31): under 10 s per split at ML-25M size.

    uv run python benchmarks/bench_leakage.py [--users 5000]
"""

from __future__ import annotations

import argparse
import time

from synthetic import ML25M, synthetic_interactions

from recsys_eval.split import holdout, leakage_audit, time_split


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=ML25M["users"])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    scale = args.users / ML25M["users"]
    data = synthetic_interactions(args.users, max(1000, int(ML25M["items"] * min(1.0, scale * 4))),
                                  int(ML25M["interactions"] * scale), seed=0)
    print(f"{data!r}")
    for name, split in (("per-user holdout 0.2", holdout(data, 0.2, per_user=True, seed=0)),
                        ("global time split 0.8", time_split(data, 0.8))):
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            audit = leakage_audit([split])
            times.append(time.perf_counter() - start)
        shares = audit.folds.select("share_after_test_start", "share_after_user_test", "share_future_items",
                                    "share_users_leaking").row(0)
        print(f"{name}: {min(times):.2f} s (best of {args.repeat}); shares {', '.join(f'{s:.4f}' for s in shares)}")


if __name__ == "__main__":
    main()
