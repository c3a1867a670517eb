"""Progress display for long steps: a rich progress bar per step on a terminal, one plain line per
step with its elapsed time otherwise (a job's log, a pipe), silent under ``quiet``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as RichProgress


class Progress:
    """One bar per step (``load``, ``fit ALS``, ``rank AI+AR+AN`` ...) and log lines in between.

    ``plain`` (default: the console is not a terminal) prints ``<step>: done in 12.3 s`` when a step
    ends instead of drawing bars, which a log file would hold only as their last frame."""

    def __init__(self, console: Console, *, quiet: bool = False, plain: bool | None = None) -> None:
        self.console = console
        self.quiet = quiet
        self.plain = not console.is_terminal if plain is None else plain
        self._bars = RichProgress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            disable=quiet or self.plain,
            transient=False,
        )

    @classmethod
    def silent(cls) -> Progress:
        """A progress that shows nothing (for callers without a console)."""
        return cls(Console(quiet=True), quiet=True)

    def __enter__(self) -> Progress:
        self._bars.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._bars.__exit__(*exc)

    @contextmanager
    def step(self, description: str, total: float | None = 1) -> Iterator[callable]:
        """A bar for one step (``total`` None when its length is unknown); the yielded function
        advances it. Plain: a line with the step's elapsed time when it ends."""
        start = time.perf_counter()
        if self.plain:
            yield lambda n=1: None
            self.log(f"{description}: done in {time.perf_counter() - start:.1f} s", markup=False)
            return
        task = self._bars.add_task(escape(description), total=total)
        yield lambda n=1: self._bars.advance(task, n)
        self._bars.update(task, completed=self._bars.tasks[task].completed if total is None else total,
                          total=self._bars.tasks[task].completed if total is None else total)

    def log(self, message: str, *, markup: bool = True) -> None:
        """A line between the bars; ``markup`` False prints ``[u1]`` as it is, not as a style."""
        if not self.quiet:
            self.console.print(message, highlight=False, markup=markup, soft_wrap=True)
