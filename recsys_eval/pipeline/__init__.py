"""One fold of a run and how it runs, between the measuring stages (``measure``, ``compare``,
``report``) and those that drive runs (``tune``, ``engine``, ``experiment``):

- ``config``, ``search``: the experiment config model and its search spaces, validated once;
- ``options``, ``seeds``, ``plan``: :class:`~recsys_eval.pipeline.plan.RunOptions` (what every fold
  shares) and :class:`~recsys_eval.pipeline.plan.FoldPlan` (one fold's target sets and models);
- ``inputs``, ``targets``, ``jobs``, ``fit``: the data and folds, the target sets, and the jobs a
  fold runs (make, fit, rank, measure, side outputs);
- ``local``: :class:`~recsys_eval.pipeline.local.LocalFold` executes a plan in this process (the
  Spark engine executes the same plan, recsys_eval.engine.fold);
- ``summary``, ``sink``, ``manifest``: summaries a partition at a time, and
  :class:`~recsys_eval.pipeline.sink.RunSink`, the one writer of a results folder;
- ``evaluate``: ``recsys-eval evaluate``, a run of one fold through the same sink.

Only ``options``, ``plan``, ``inputs`` and ``manifest`` read a config, and nothing here imports
``tune``, ``engine``, ``experiment`` or ``cli``.
"""
