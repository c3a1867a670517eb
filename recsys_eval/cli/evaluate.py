"""``recsys-eval evaluate``: score a run produced by any system, with no config."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import typer

from recsys_eval.cli import app
from recsys_eval.errors import ConfigError

DEFAULT_METRICS = "precision,recall,f1,ap,ndcg,rr,hit,auc"
FORMAT_HELP = ("csv, tsv, parquet, trec, ranx, elliot, recbole, lenskit, replay or msrecommenders "
               "(default: from the extension, or detected)")


@app.command()
def evaluate(
    test: Path = typer.Option(..., "--test", help="Judgments: user, item[, rating] (CSV, Parquet, TREC qrels, ...)."),
    run: Path = typer.Option(..., "--run", help="Run: user, item and score or rank (CSV, Parquet, TREC, ...)."),
    out: Path = typer.Option(..., "--out", help="Results folder to write (per_unit/, summary, manifest)."),
    train: Path | None = typer.Option(None, "--train", help="user, item (read like --test)."),
    threshold: float | None = typer.Option(None, "--threshold", help="Relevant: rating >= T."),
    metrics: str = typer.Option(DEFAULT_METRICS, "--metrics", help="Comma-separated metric names."),
    k: str = typer.Option("1,5,10", "--k", help="Comma-separated cutoffs."),
    gain: str = typer.Option("graded", "--gain", help="nDCG gain: graded, binary or exp (nDCG only)."),
    undefined: str | None = typer.Option(
        None, "--undefined", help="Undefined values: skip or zero (default: zero for TREC/ranx TEST, else skip)."),
    ties: str = typer.Option("first", "--ties", help="Tied scores: first (item order) or average."),
    param: list[str] = typer.Option(None, "--param", help="A metric parameter, e.g. rbp_persistence=0.9 (repeatable)."),
    genres: Path | None = typer.Option(None, "--genres", help="CSV or Parquet: item, genres (for ild, calibration)."),
    format: str | None = typer.Option(None, "--format", help=f"Format of --run: {FORMAT_HELP}."),
    columns: str | None = typer.Option(
        None, "--columns", help="Fields of a header-less --run file in order, e.g. user,item,score."),
    test_format: str | None = typer.Option(
        None, "--test-format", help="Format of --test and --train (default: --format, or the extension)."),
    test_columns: str | None = typer.Option(
        None, "--test-columns", help="Fields of header-less --test/--train files, e.g. user,item,rating."),
    force: bool = typer.Option(False, "--force", help="Replace an existing output folder."),
    engine: str = typer.Option("local", "--engine", help="local, or spark (needs recsys-eval[spark], Java 17+)."),
    master: str = typer.Option("local[2]", "--master", help="Spark master: local[N], spark://host:port, yarn."),
    partitions: int | None = typer.Option(None, "--partitions", help="Spark: user partitions (default 4 x cores)."),
) -> None:
    """Score a run against test interactions; write a results folder (per-unit values, summary,
    manifest) that `recsys-eval report` and `compare` open like a run's."""
    _keep_freed_pages()
    from recsys_eval._lazy import import_meanwhile  # heavy imports here, so that `recsys-eval --help` starts fast
    from recsys_eval.data.runs import averaging_default, load_run
    from recsys_eval.errors import check_choice
    from recsys_eval.measure.metrics import (
        ALL_METRICS,
        GAINS,
        TIES,
        UNDEFINED_POLICIES,
        check_cutoffs,
        check_metrics,
    )
    from recsys_eval.pipeline.options import MeasureOptions

    # what measures and writes is imported on a thread while the options are checked and the files read
    import_meanwhile("recsys_eval.data.kernels:warm_up", "recsys_eval.measure.api", "recsys_eval.compare.intervals",
                     "recsys_eval.pipeline.evaluate", "rich.console")
    # parse
    names = check_metrics([m.strip() for m in metrics.split(",") if m.strip()], ALL_METRICS)
    cutoffs = check_cutoffs(_parse_ints(k, "--k"))
    check_choice("gain", gain, GAINS)
    default_policy, averaging_note = averaging_default(test, test_format or format)
    if undefined is None:
        undefined = default_policy
    check_choice("undefined-value policy", undefined, UNDEFINED_POLICIES)
    check_choice("ties policy", ties, TIES)
    params = _parse_params(param or [])
    if out.exists() and not force:
        raise ConfigError(f"output folder {str(out)!r} exists; choose another or pass --force to replace it")
    _check_beyond_inputs(names, train=train is not None, genres=genres is not None)

    check_choice("engine", engine, ("local", "spark"))
    if engine == "spark":
        _evaluate_spark(test, run, out, train, threshold, names, cutoffs, gain, ties, undefined, force,
                        master, partitions, (format, columns, test_format, test_columns, genres), params)
        return

    # read, measure, write
    data = load_run(
        test, run, train, threshold=threshold, run_format=format, run_columns=_parse_names(columns, "--columns"),
        test_format=test_format or format, test_columns=_parse_names(test_columns, "--test-columns"),
    )
    from rich.console import Console

    from recsys_eval.pipeline.evaluate import evaluate_run

    console = Console()
    options = MeasureOptions.of(names, cutoffs, gain=gain, ties=ties, undefined=undefined, threshold=threshold,
                                params=params)
    given_policy = averaging_note if undefined == default_policy else None
    with warnings.catch_warnings(record=True) as caught:  # measure's, e.g. an AUC the run's depth truncates
        warnings.simplefilter("always")
        folder, summary = evaluate_run(data, options, system=run.stem, out=out, force=force, source=str(test),
                                       genres=_genres(genres, data.item_ids) if genres is not None else None)
    measured = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    for other in (w for w in caught if not issubclass(w.category, UserWarning)):
        warnings.showwarning(other.message, other.category, other.filename, other.lineno)
    for note in [*data.notes, *measured, *([given_policy] if given_policy else [])]:
        console.print(f"[yellow]note:[/] {note}", highlight=False)
    _print_summary(console, summary, folder)


def _keep_freed_pages() -> None:
    """Let polars' allocator (jemalloc) keep the pages it frees instead of returning them to the
    kernel a few at a time (~3,800 madvise calls on the ML-25M-size files, each page faulted in
    again when reused): 0.2 s of kernel time of a 4.7 s-CPU ``evaluate``, for 1% more peak memory.
    Only here, a short process whose memory the kernel frees at exit; read when polars is first
    imported, so before it; a user's setting is kept."""
    os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:-1,muzzy_decay_ms:-1")


def _evaluate_spark(test, run, out, train, threshold, names, cutoffs, gain, ties, undefined, force, master,
                    partitions, local_only, params) -> None:
    """``evaluate --engine spark``: the files read and measured on Spark (recsys_eval.engine.runs)."""
    from rich.console import Console

    from recsys_eval.engine.formats import SPARK_FORMATS
    from recsys_eval.core.uris import uri
    from recsys_eval.engine.runs import evaluate_spark
    from recsys_eval.core.spark import spark_session

    run_format, columns, test_format, test_columns, genres = local_only
    options = ("--columns", "--test-columns")
    given = [option for option, value in zip(options, (columns, test_columns), strict=True) if value is not None]
    if given:
        raise ConfigError(f"{', '.join(given)}: the Spark engine reads files whose fields its format names "
                          f"({', '.join(SPARK_FORMATS)}); use the local engine for these options")
    result = evaluate_spark(
        spark_session(master), uri(test), uri(run), uri(out), train=None if train is None else uri(train),
        threshold=threshold, metrics=names, k=cutoffs, gain=gain, ties=ties, undefined=undefined,
        partitions=partitions, force=force, params=params, run_format=run_format,
        test_format=test_format or run_format, genres=None if genres is None else uri(genres),
    )
    console = Console()
    for note in result.notes:
        console.print(f"[yellow]note:[/] {note}", highlight=False)
    _print_summary(console, result.summary, out)


def _parse_params(texts: list[str]) -> dict[str, float]:
    """``--param name=value`` options as numbers by name (checked against the metrics' specs)."""
    from recsys_eval.measure.metrics import metric_params

    params = {}
    for text in texts:
        name, eq, value = text.partition("=")
        try:
            params[name.strip()] = float(value)
        except ValueError:
            raise ConfigError(f"--param {text!r}: expected name=number, e.g. rbp_persistence=0.9") from None
        if not eq:
            raise ConfigError(f"--param {text!r}: expected name=number, e.g. rbp_persistence=0.9")
    metric_params(params)  # an unknown name or a value out of range raises, naming it
    return params


def _parse_ints(text: str, option: str) -> list[int]:
    values = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            values.append(int(part))
        except ValueError:
            raise ConfigError(f"{option}: {part!r} is not an integer; expected e.g. 1,5,10") from None
    return values


def _check_beyond_inputs(names: list[str], **given: bool) -> None:
    """A beyond-accuracy metric whose input file is not given raises, naming the option."""
    from recsys_eval.measure.metrics import BEYOND_METRICS

    if not set(names) & set(BEYOND_METRICS):  # measure.beyond imports numba: not for the others
        return
    from recsys_eval.measure.beyond import BEYOND_INPUTS

    options = {"train": "--train (item popularity and profiles among train users)",
               "genres": "--genres (a file with item and genres columns)"}
    for name in names:
        for need in BEYOND_INPUTS.get(name, ()):
            if need in given and not given[need]:
                raise ConfigError(f"metric {name!r} needs {options[need]}")


def _parse_names(text: str | None, option: str) -> list[str] | None:
    if text is None:
        return None
    names = [part.strip() for part in text.split(",")]
    if not all(names):
        raise ConfigError(f"{option}: {text!r} has an empty name; expected e.g. user,item,score")
    return names


def _genres(path: Path, item_ids):
    from recsys_eval.data.runs import read_frame
    from recsys_eval.measure.beyond import item_genres

    name = f"GENRES {str(path)!r}"
    return item_genres(read_frame(path, name=f"GENRES {path}"), item_ids, name)


def _print_summary(console, summary, out: Path) -> None:
    import polars as pl
    from rich.table import Table

    from recsys_eval.measure.metrics import AUXILIARY_METRICS

    table = Table(title=f"summary ({summary['undefined'][0]} undefined values)" if summary.height else "summary")
    for column in ("system", "fold", "metric", "mean", "micro mean", "users", "left out"):
        table.add_column(column, justify="right" if column not in ("system", "fold", "metric") else "left")
    for row in summary.filter(~pl.col("metric").is_in(AUXILIARY_METRICS)).iter_rows(named=True):
        table.add_row(
            row["system"], row["fold"], row["name"], _fmt(row["mean"]), _fmt(row["micro_mean"]),
            "" if row["users_counted"] is None else f"{row['users_counted']:,}",
            "" if row["users_left_out"] is None else f"{row['users_left_out']:,}",
        )
    console.print(table)
    console.print(f"results: {out} (per_unit/, summary.csv; `recsys-eval report {out}` for the report)",
                  highlight=False)


def _fmt(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"
