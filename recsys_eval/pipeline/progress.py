"""Progress display for long steps: a rich progress bar per step, silent under ``quiet``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as RichProgress


class Progress:
    """One bar per step (``load``, ``fit ALS``, ``rank AI+AR+AN`` ...) and log lines in between."""

    def __init__(self, console: Console, *, quiet: bool = False) -> None:
        self.console = console
        self.quiet = quiet
        self._bars = RichProgress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            disable=quiet,
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
    def step(self, description: str, total: int = 1) -> Iterator[callable]:
        """A bar for one step; the yielded function advances it."""
        task = self._bars.add_task(description, total=total)
        yield lambda n=1: self._bars.advance(task, n)
        self._bars.update(task, completed=total)

    def log(self, message: str) -> None:
        if not self.quiet:
            self.console.print(message, highlight=False)
