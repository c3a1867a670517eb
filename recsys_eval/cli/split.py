"""``recsys-eval split``: split a dataset or a file and save the split(s) to a folder."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from recsys_eval.cli import app
from recsys_eval.errors import ConfigError, closest

if TYPE_CHECKING:
    from recsys_eval.core.interactions import Interactions


@app.command("split")
def split_command(
    source: str = typer.Argument(..., help="A dataset name (see `datasets list`) or a CSV/Parquet file."),
    out: Path = typer.Argument(..., help="Folder to write (k folds go to one subfolder each)."),
    method: str = typer.Option("holdout", "--method", "-m", help="Splitter: holdout, kfold, time, "
                               "user_time, all_but_n, given_n, leave_last_n, official, user_disjoint, "
                               "cold_items, rolling_time (`recsys-eval list splitters`)."),
    param: list[str] = typer.Option([], "--param", "-p", help="A splitter parameter as key=value "
                                    "(TOML value: 0.2, 5, true, \"latest\", 1998-01-01); repeatable."),
    seed: int = typer.Option(0, "--seed", help="Seed of the split's random choices."),
    force: bool = typer.Option(False, "--force", help="Replace the folder if it exists."),
    columns: str = typer.Option(None, "--columns", help="For a file: role=column pairs, e.g. "
                                "user=userId,item=movieId,rating=rating,timestamp=timestamp."),
    separator: str = typer.Option(None, "--separator", help="For a text file: the field separator."),
    data_home: Path = typer.Option(None, "--data-home", help="Data home folder (default: "
                                   "$RECSYS_EVAL_DATA, else the per-user cache)."),
) -> None:
    """Split a dataset or a file with a splitter and write the split(s) as Parquet plus JSON."""
    from recsys_eval.core.kernel_cache import announce_compilation
    from recsys_eval.split import check_split, make_split, save_splits

    announce_compilation(typer.echo)

    if out.exists() and not force:
        raise ConfigError(f"{out} exists; choose another folder or pass --force to replace it")
    params = dict(parse_param(p) for p in param)
    if "seed" in params:
        raise ConfigError("give the seed with --seed, not as a --param")
    check_split(method, params)
    params["seed"] = seed
    if method == "official" and "folder" not in params:
        params.setdefault("data_home", data_home)
    data = _load(source, columns, separator, data_home)
    made = make_split(data, method, **params)
    splits = made if isinstance(made, list) else [made]
    save_splits(splits, out, overwrite=force, subfolders=isinstance(made, list))
    for split in splits:
        typer.echo(_describe(split))
    typer.echo(f"wrote {out}")


def parse_param(text: str) -> tuple[str, Any]:
    """``key=value`` with the value read as TOML (number, boolean, date, list, quoted string),
    else taken as a plain string."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"--param {text!r}: expected key=value, e.g. fraction=0.2")
    try:
        return key, tomllib.loads(f"v = {value.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        return key, value.strip()


def _describe(split) -> str:
    info = split.info
    notes = [
        f"{info[key]:,} {label}"
        for key, label in (
            ("users_kept_in_train", "users kept wholly in train"),
            ("fold_in_interactions", "fold-in rows of test users, in train but never fitted on"),
            ("test_dropped_unknown_users", "test rows dropped (user not in train)"),
            ("test_dropped_unknown_items", "test rows dropped (item not in train)"),
        )
        if info.get(key)
    ]
    extra = f" ({'; '.join(notes)})" if notes else ""
    return f"{split.name}: train {len(split.train):,} rows, test {len(split.test):,} rows{extra}"


def _load(source: str, columns: str | None, separator: str | None, data_home: Path | None) -> Interactions:
    from recsys_eval.data import list_datasets, load_dataset, load_file

    path = Path(source)
    if path.is_file():
        return load_file(path, _columns(columns), separator=separator)
    names = [d.name for d in list_datasets()]
    if source.lower() in names:
        if columns or separator:
            raise ConfigError("--columns and --separator apply to a file, not to a named dataset")
        return load_dataset(source, data_home)
    raise ConfigError(f"{source!r} is neither a file nor a known dataset: {closest(source, names)}")


def _columns(text: str | None) -> dict[str, str] | None:
    if text is None:
        return None
    mapping = {}
    for pair in text.split(","):
        role, sep, name = pair.partition("=")
        if not sep or not role.strip() or not name.strip():
            raise ConfigError(f"--columns {text!r}: expected role=column pairs separated by commas")
        mapping[role.strip()] = name.strip()
    return mapping
