"""Fitting a fold's recommenders: every model of a :class:`~recsys_eval.pipeline.plan.FoldPlan`
on each train side its target sets need, one-thread fits (BPR) in the background while the other
systems are evaluated."""

from __future__ import annotations

import os
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from recsys_eval.core import Interactions, Split
from recsys_eval.pipeline.plan import FoldPlan, ModelJob
from recsys_eval.pipeline.progress import Progress
from recsys_eval.pipeline.timings import Timings
from recsys_eval.recommend.external import ExternalRun
from recsys_eval.recommend.fold_in import fit_for_split


@dataclass
class FittedModels:
    """The fold's models, ``{(system, id(train)): model}``, and the fits still running in the
    background (``{system: [(id(train), future of (model, seconds))]}``)."""

    models: dict[tuple[str, int], object]
    background: dict[str, list[tuple[int, Future]]]

    def wait_for(self, system: str, fold: str, timings: Timings, train: int | None = None) -> None:
        """The background fits of ``system`` on the train side ``train`` (its ``id``; None: on every
        side), once they are done (a fit's error is raised here). A caller that measures one side
        after the other waits for each side's fit only when it comes to it: the first side is
        measured while the second is still fitting."""
        pending = self.background.pop(system, [])
        later = [fit for fit in pending if train not in (None, fit[0])]
        if later:
            self.background[system] = later
        for key, future in (fit for fit in pending if fit not in later):
            start = time.perf_counter()
            model, seconds = future.result()
            timings.add(fold, system, "wait for background fit", start)
            self.models[system, key] = model
            timings.add(fold, system, "fit in background", time.perf_counter() - seconds)

    def all(self, fold: str, timings: Timings) -> dict[tuple[str, int], object]:
        """Every model, once the background fits are done."""
        for system in list(self.background):
            self.wait_for(system, fold, timings)
        return self.models


@dataclass
class _Fit:
    job: ModelJob
    key: int
    train: Interactions
    model: object
    split: Split

    def fitted(self) -> object:
        """The model fitted on ``train`` as ``split`` wants (its test users folded in when it
        holds them out of fitting)."""
        return fit_for_split(self.model, self.train, self.split)

    def alone(self) -> tuple[object, float]:
        start = time.perf_counter()
        return self.fitted(), time.perf_counter() - start


def fit_models(plan: FoldPlan, trains: dict[int, Interactions], progress: Progress, timings: Timings) -> FittedModels:
    """Every recommender of the plan fitted on each of ``trains`` (keyed by ``id``).

    Fits that run on one thread by design (BPR) would leave a core idle: when other systems are
    there to evaluate meanwhile, they run in the background, and their systems are evaluated last
    (:meth:`FittedModels.wait_for`); otherwise they go side by side. Either way they run one per
    core at most: in the background, one fit at a time (on all cores but one) left the main thread
    waiting for the second BPR fit of each ML-1M fold (its uniform-test train) with one core
    idle. Each has its own seed and state, so its factors are those of a fit alone.

    The background fits start once the other fits are done: those run on every core (implicit's
    OpenMP threads, which spin at each barrier while a thread of theirs waits for a core), and a
    background fit beside them would leave one of their threads without a core at every barrier.
    The background fits overlap the ranking and measuring instead."""
    fold, threads = plan.fold, plan.options.threads
    to_fit = [_Fit(job, key, train, job.make(plan.data, threads), plan.split)
              for job in plan.models for key, train in trains.items()]
    single = [f for f in to_fit if getattr(f.model, "single_threaded_fit", False)]
    cores = os.cpu_count() or 1
    in_background = len(single) < len(to_fit) and cores >= 2
    fitted = FittedModels({}, {})
    with progress.step(f"[{fold}] fit", total=len(to_fit)) as advance:
        done: dict[int, object] = {}
        if single and in_background:
            done = {id(f): None for f in single}  # fitted below, after the others
        elif len(single) >= 2:
            with ThreadPoolExecutor(max_workers=min(len(single), cores)) as pool:
                for f, (model, seconds) in zip(single, pool.map(_Fit.alone, single), strict=True):
                    done[id(f)] = model
                    timings.add(fold, f.job.system, "fit side by side", time.perf_counter() - seconds)
                    advance()
        for f in to_fit:
            if id(f) in done:
                if done[id(f)] is not None:
                    fitted.models[f.job.system, f.key] = done[id(f)]
                continue
            start = time.perf_counter()
            model = f.fitted()
            timings.add(fold, f.job.system, "fit", start)
            if isinstance(model, ExternalRun):
                model.check_overlap(np.unique(plan.split.test.users))
                for note in model.notes:
                    progress.log(f"{f.job.system}: {note}")
                if model.unknown["rows"]:
                    progress.log(f"[yellow]{f.job.system}: {model.unknown_message()}[/]")
            fitted.models[f.job.system, f.key] = model
            advance()
        if single and in_background:
            pool = ThreadPoolExecutor(max_workers=min(len(single), cores), thread_name_prefix="recsys-fit")
            for f in single:
                fitted.background.setdefault(f.job.system, []).append((f.key, pool.submit(f.alone)))
                advance()
            pool.shutdown(wait=False)  # the workers finish their fits; nothing else is queued
    return fitted
