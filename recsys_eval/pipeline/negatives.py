"""``[run] save_negatives``: every sampled protocol's negatives of a fold, written for others to
reuse (docs/CONVENTIONS.md#fixed-negatives)."""

from __future__ import annotations

import numpy as np

from recsys_eval.core import Split
from recsys_eval.pipeline.plan import RunOptions
from recsys_eval.pipeline.sink import RunSink
from recsys_eval.targets import Protocol, negatives_of


def sampled_labels(options: RunOptions) -> list[str]:
    """The protocol entries whose non-relevant items are a sample (NN with AI or TI candidates)."""
    return [p.display for p in options.protocols
            if Protocol.parse(p.name).nonrelevant == "NN" and Protocol.parse(p.name).candidates != "UT"]


def save_fold_negatives(options: RunOptions, split: Split, sink: RunSink) -> list[str]:
    """Write the negatives of every sampled protocol of ``split`` (those its run measured: the
    target sets are rebuilt from the same seeds, a chunk of users at a time); return the labels
    written. Each NCF line is a relevant test pair of a user with units."""
    wanted = set(sampled_labels(options))
    written = []
    for protocol in options.protocols:
        if protocol.display not in wanted:
            continue
        for target_set in options.target_sets(protocol, split):
            chunk = max(1, options.users_per_chunk or 16_384)
            pairs = [negatives_of(part.targets) for part in target_set.chunks(chunk)]
            users = np.concatenate([u for u, _ in pairs]) if pairs else np.zeros(0, np.int64)
            items = np.concatenate([i for _, i in pairs]) if pairs else np.zeros(0, np.int64)
            judged = target_set.plan.judged
            relevant = judged.gain > 0
            row_user = np.repeat(np.arange(judged.n_users), np.diff(judged.indptr))
            held = relevant & np.isin(row_user, target_set.plan.users)
            sink.save_negatives(split.name, target_set.label, users, items, (row_user[held], judged.items[held]),
                                split.train)
            written.append(target_set.label)
    return written
