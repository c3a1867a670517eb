"""``python -m recsys_eval.cli``: the same as the ``recsys-eval`` console script."""

from recsys_eval.cli import main

main()
