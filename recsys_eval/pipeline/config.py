"""Experiment configs: TOML files validated against a strict schema before anything runs.

Every table rejects unknown keys, so that a typo is an error naming the file, the key path and the
allowed keys (with the closest one), never a silent default. One top-level ``seed`` feeds every
random choice of the run (split, sampling, recommenders, bootstrap), each through its own derived
stream, so that adding a protocol does not change another protocol's samples.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from recsys_eval.core.uris import is_uri
from recsys_eval.errors import ConfigError, closest


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DatasetConfig(_Strict):
    """Where the interactions come from: a MovieLens name, or a file of your own."""

    name: str | None = None
    path: str | None = None
    columns: dict[str, str] | None = None
    timestamp_format: str | None = None
    separator: str | None = None
    data_home: str | None = None
    #: The dataset's name in a study over several datasets (default: its name, or its file's stem).
    label: str | None = None
    #: A CSV or Parquet file of item features (calibration, ILD): an ``item`` column of raw item ids
    #: and ``item_feature_column``, multi-valued (a list, or names separated by ``|``).
    item_features: str | None = None
    item_feature_column: str = "genres"

    @model_validator(mode="after")
    def _one_source(self) -> DatasetConfig:
        if (self.name is None) == (self.path is None):
            raise ValueError("give exactly one of 'name' (a MovieLens dataset) or 'path' (a file)")
        if self.columns is not None and self.path is None:
            raise ValueError("'columns' applies to 'path' only")
        return self

    @property
    def display(self) -> str:
        return self.label or self.name or Path(self.path).stem


class PrepareConfig(_Strict):
    """Preparation (each step reports what it removed). ``on = "data"`` (the default, as most
    papers do) applies the steps to the whole dataset before splitting; ``on = "train"`` applies
    them to each fold's train side after splitting, so that nothing learned from the data (a
    k-core, minimum counts) sees the test side; test interactions of users or items the steps
    removed from train are then dropped and counted."""

    on: Literal["data", "train"] = "data"
    threshold: float | None = None
    binarize: bool = False
    min_user_interactions: int = Field(0, ge=0)
    min_item_interactions: int = Field(0, ge=0)
    k_core: int = Field(0, ge=0)


class SplitConfig(_Strict):
    """The splitter, by name, with its parameters (checked by the splitter)."""

    method: str
    params: dict[str, Any] = Field(default_factory=dict)


class ProtocolConfig(_Strict):
    """A target-item protocol: a name such as ``AI+1R+NN100``, or a bias-neutralising design."""

    name: str
    design: Literal["standard", "uniform_test", "percentiles"] = "standard"
    label: str | None = None
    per_item: int | None = Field(None, ge=1)
    bins: int | None = Field(None, ge=2)
    fresh_negatives: bool = False
    sampling: Literal["uniform", "popularity"] = "uniform"
    #: A file of fixed negatives (NCF ``test.negative`` layout, or a user,item CSV/Parquet table),
    #: relative to the config file, used in place of sampling (docs/CONVENTIONS.md#fixed-negatives).
    negatives: str | None = None

    @model_validator(mode="after")
    def _fixed_negatives(self) -> ProtocolConfig:
        if self.negatives is None:
            return self
        from recsys_eval.targets import Protocol
        from recsys_eval.targets.build import check_fixed

        if self.design != "standard":
            raise ValueError(f"'negatives' applies to design 'standard' only, not {self.design!r}")
        try:
            check_fixed(Protocol.parse(self.name), self.fresh_negatives, self.sampling, True)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return self

    @model_validator(mode="after")
    def _design_params(self) -> ProtocolConfig:
        if self.design == "uniform_test" and self.per_item is None:
            raise ValueError("design 'uniform_test' needs 'per_item' (relevant test ratings per item)")
        if self.design == "percentiles" and self.bins is None:
            raise ValueError("design 'percentiles' needs 'bins' (number of popularity bins)")
        if self.design != "uniform_test" and self.per_item is not None:
            raise ValueError("'per_item' applies to design 'uniform_test' only")
        if self.design != "percentiles" and self.bins is not None:
            raise ValueError("'bins' applies to design 'percentiles' only")
        return self

    @property
    def definition(self) -> dict[str, Any]:
        """What the protocol is, whatever it is called: its samples' seed derives from this, so a
        cosmetic ``label`` never changes them (docs/CONVENTIONS.md#seeds-and-reproducibility)."""
        from recsys_eval.targets import Protocol

        return {
            "protocol": Protocol.parse(self.name).name, "design": self.design, "per_item": self.per_item,
            "bins": self.bins, "fresh_negatives": self.fresh_negatives, "sampling": self.sampling,
            **({"negatives": self.negatives} if self.negatives else {}),
        }

    @property
    def display(self) -> str:
        """The protocol's name in results: the label, else the name with its design."""
        if self.label:
            return self.label
        if self.design == "uniform_test":
            return f"{self.name}+uniform{self.per_item}"
        if self.design == "percentiles":
            return f"{self.name}+pct{self.bins}"
        return self.name


class RecommenderConfig(_Strict):
    """A recommender by registry name or ``module:Class``, or an external run file."""

    name: str
    label: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    path: str | None = None
    #: The run file's format (recsys_eval.data.runs.FORMATS: e.g. elliot, recbole, lenskit); default:
    #: from the extension, else detected from the columns or the first line.
    format: str | None = None
    #: Hyperparameters to tune (recsys_eval.pipeline.search): a list of values, ``{low, high}``,
    #: ``{low, high, log = true}`` or ``{choices = [...]}`` per name; checked against the registry.
    search: dict[str, Any] | None = None

    @property
    def definition(self) -> dict[str, Any]:
        """What the recommender is, whatever it is called: its seed derives from this."""
        return {"name": self.name, "params": self.params, "path": self.path}

    @property
    def display(self) -> str:
        return self.label or self.name

    def one_per_file(self) -> list[RecommenderConfig]:
        """A folder of run files (Elliot's ``recs/``) as one external run per file, labelled by the
        file's stem (after ``label/`` when a label is given); anything else as it is."""
        if self.path is None or not Path(self.path).is_dir():
            return [self]
        from recsys_eval.data.run_formats import read_folder

        prefix = f"{self.label}/" if self.label else ""
        return [self.model_copy(update={"path": str(path), "label": prefix + stem})
                for stem, path in read_folder(self.path).items()]


class MetricsConfig(_Strict):
    names: list[str] = Field(
        default_factory=lambda: ["precision", "recall", "ndcg", "ap", "rr", "auc"]
    )
    k: list[int] = Field(default_factory=lambda: [10])
    relevance_threshold: float | None = None
    gain: Literal["graded", "binary", "exp"] = "graded"
    undefined: Literal["skip", "zero"] = "skip"
    ties: Literal["first", "average"] = "first"
    #: The numbers metrics' formulas take (``rbp_persistence``, RBP's p), written as keys of
    #: ``[metrics]`` itself: any parameter a metric's spec declares (recsys_eval.measure.metrics.PARAMS).
    params: dict[str, float] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _gather_params(cls, data: Any) -> Any:
        """``[metrics] rbp_persistence = 0.9`` into ``params``: a metric added with a parameter
        needs no key here."""
        from recsys_eval.measure.metrics import PARAMS

        if not isinstance(data, dict) or not PARAMS.keys() & data.keys():
            return data
        given = {key: value for key, value in data.items() if key in PARAMS}
        rest = {key: value for key, value in data.items() if key not in PARAMS}
        return {**rest, "params": {**rest.get("params", {}), **given}}

    @field_validator("params")
    @classmethod
    def _known_params(cls, params: dict[str, float]) -> dict[str, float]:
        from recsys_eval.measure.metrics import metric_params

        try:
            checked = metric_params(params)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return {name: checked[name] for name in params}

    @field_validator("k")
    @classmethod
    def _positive_k(cls, ks: list[int]) -> list[int]:
        bad = [k for k in ks if k <= 0]
        if bad or not ks:
            raise ValueError(f"cutoffs must be positive whole numbers (k > 0), got {ks}")
        return sorted(set(ks))


class CompareConfig(_Strict):
    baseline: str | None = None
    tests: list[str] = Field(default_factory=lambda: ["t", "wilcoxon"])
    correction: str = "holm"
    alpha: float = Field(0.05, gt=0, lt=1)
    interval: Literal["t", "bootstrap"] = "t"
    resamples: int = Field(1000, ge=10)
    #: A study over [[datasets]]: the metric@k and protocol label systems are ranked by on each
    #: dataset (default: the tuning metric, else ndcg@10; the first protocol), and the post-hoc
    #: test after Friedman's (Nemenyi over all pairs, or Holm against ``baseline``).
    datasets_metric: str | None = None
    datasets_protocol: str | None = None
    posthoc: Literal["nemenyi", "holm"] = "nemenyi"


class OutputConfig(_Strict):
    folder: str = "results"
    report: bool = True
    save_splits: bool = True


class RunConfig(_Strict):
    """Execution settings that do not change results."""

    threads: int | None = Field(None, ge=1)
    chunk_size: int = Field(2048, ge=1)
    #: The run's memory budget ("4GB", "1500MB", "8GiB"): a fold is evaluated in ranges of users
    #: sized to stay under it; results do not depend on it.
    memory: str = "4GB"
    #: Users per evaluation chunk, fixed (default: sized from ``memory``).
    users_per_chunk: int | None = Field(None, ge=1)
    #: Write every sampled protocol's negatives to the results folder, in the NCF layout and as a
    #: user,item table (docs/CONVENTIONS.md#fixed-negatives).
    save_negatives: bool = False

    @field_validator("memory")
    @classmethod
    def _memory(cls, memory: str) -> str:
        from recsys_eval.core.memory import parse_size

        try:
            parse_size(memory)
        except Exception as exc:  # ConfigError: shown as this key's error
            raise ValueError(str(exc)) from None
        return memory
    depth: int = Field(100, ge=1)  # items listed per full ranking (at least the largest cutoff)


class EngineConfig(_Strict):
    """Where the folds are ranked and measured: ``local`` (this process) or ``spark`` (per user
    partition on a Spark ``master``, with the local engine's per-unit values; recsys_eval.engine)."""

    name: Literal["local", "spark"] = "local"
    master: str = "local[2]"
    partitions: int | None = Field(None, ge=1)  # user partitions (default: 4 x Spark's parallelism)


class LearningCurveConfig(_Strict):
    """Evaluate every system again on nested subsamples of the first fold's train side."""

    fractions: list[float]
    per_user: bool = False
    protocols: list[str] | None = None  # protocol labels to evaluate (default: all standard ones)

    @field_validator("fractions")
    @classmethod
    def _fractions(cls, fractions: list[float]) -> list[float]:
        if not fractions or any(not 0 < f <= 1 for f in fractions) or fractions != sorted(set(fractions)):
            raise ValueError(f"fractions must be increasing and in (0, 1], got {fractions}")
        return fractions


class TuningConfig(_Strict):
    """How the recommenders with a ``search`` are tuned on a validation split carved from each
    fold's train side (recsys_eval.tune)."""

    method: Literal["grid", "random", "tpe"] = "tpe"
    #: Budget: at most ``trials`` trials and no new trial after ``seconds`` (per fold and system).
    trials: int | None = None
    seconds: float | None = None
    metric: str = "ndcg@10"
    #: The protocol label whose value on the validation split is maximised (default: the first).
    protocol: str | None = None
    validation: SplitConfig = Field(
        default_factory=lambda: SplitConfig(method="holdout", params={"fraction": 0.2, "per_user": True}))
    #: The sampler's seed (default: the run's ``seed``); every trial's seed derives from it.
    seed: int | None = None
    #: Trials run at once in worker processes (implicit models on one thread each).
    workers: int = Field(1, ge=1)

    @model_validator(mode="after")
    def _budget(self) -> TuningConfig:
        if self.trials is not None and self.trials < 1:
            raise ValueError(f"trials = {self.trials} allows no trial; give at least 1")
        if self.seconds is not None and self.seconds <= 0:
            raise ValueError(f"seconds = {self.seconds:g} allows no trial; give a positive time")
        if self.method != "grid" and self.trials is None and self.seconds is None:
            raise ValueError(f"method {self.method!r} needs a budget: 'trials', 'seconds' or both")
        return self
class TrackConfig(_Strict):
    """Experiment trackers a finished run is logged to (recsys_eval.pipeline.track): ``mlflow`` is
    a tracking URI (``file:///path/mlruns``, ``http://host:5000``, ``sqlite:///mlflow.db``); the
    MLflow experiment is ``experiment``, by default the config's ``name``."""

    mlflow: str | None = None
    experiment: str | None = None


class ReportConfig(_Strict):
    """What the report's tables show: ``metrics`` as ``metric@k`` labels (default: every metric of
    ``[metrics]`` at the tuning cutoff, else the smallest-but-one cutoff) and whether the LaTeX
    tables carry intervals."""

    metrics: list[str] | None = None
    intervals: bool = False


class AnalysisConfig(_Strict):
    """Diagnostics of the analysis: ``slices`` of the test users (``"activity:4"``, ``"cold:5"``,
    ``"time:3"``, ``"attribute:gender"``, and ``"popularity:0.2"`` over the units of 1R protocols;
    recsys_eval.split.slices) that every metric is also
    reported per group of, and the ``user_attributes`` file the attribute slices read;
    ``distributions``: whether every mean also gets its per-user distribution (quantiles, share at
    zero, Gini, and the report's ECDF and Lorenz figure; docs/CONVENTIONS.md#distributions)."""

    slices: list[str] = Field(default_factory=list)
    distributions: bool = True
    user_attributes: str | None = None

    @field_validator("slices")
    @classmethod
    def _known_slices(cls, slices: list[str]) -> list[str]:
        from recsys_eval.split.slices import parse_slice

        for text in slices:
            try:
                parse_slice(text)
            except ConfigError as exc:
                raise ValueError(str(exc)) from None
        if len(set(slices)) != len(slices):
            raise ValueError(f"slices are repeated: {slices}")
        return slices

    @model_validator(mode="after")
    def _attributes_given(self) -> AnalysisConfig:
        needing = [s for s in self.slices if s.startswith("attribute:")]
        if needing and self.user_attributes is None:
            raise ValueError(f"slices {needing} need user_attributes, a CSV or Parquet file with a 'user' column")
        return self


class ExperimentConfig(_Strict):
    name: str
    description: str = ""
    seed: int = 0
    #: One dataset, or ``[[datasets]]``: a study run on each (recsys_eval.experiment.datasets_study).
    dataset: DatasetConfig | None = None
    datasets: list[DatasetConfig] | None = None
    prepare: PrepareConfig = Field(default_factory=PrepareConfig)
    split: SplitConfig
    protocols: list[ProtocolConfig]
    recommenders: list[RecommenderConfig]
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    compare: CompareConfig = Field(default_factory=CompareConfig)
    output: OutputConfig = Field(default_factory=OutputConfig)
    run: RunConfig = Field(default_factory=RunConfig)
    engine: EngineConfig = Field(default_factory=EngineConfig)
    learning_curve: LearningCurveConfig | None = None
    tuning: TuningConfig | None = None
    _source: str = PrivateAttr("config")  # the file it was read from, for error messages

    @property
    def source(self) -> str:
        """The config file this config was read from (``"config"`` when built from a dict)."""
        return self._source
    report: ReportConfig = Field(default_factory=ReportConfig)
    analysis: AnalysisConfig = Field(default_factory=AnalysisConfig)
    track: TrackConfig = Field(default_factory=TrackConfig)

    @field_validator("recommenders")
    @classmethod
    def _run_folders(cls, recommenders: list[RecommenderConfig]) -> list[RecommenderConfig]:
        return [one for rec in recommenders for one in rec.one_per_file()]

    @model_validator(mode="after")
    def _unique_labels(self) -> ExperimentConfig:
        if (self.dataset is None) == (self.datasets is None):
            raise ValueError("give exactly one of [dataset] or [[datasets]]")
        if self.datasets is not None:
            labels = [d.display for d in self.datasets]
            if len(set(labels)) != len(labels) or not labels:
                raise ValueError(f"[[datasets]] need distinct names or labels; got {labels}")
        for what, labels in (
            ("recommenders", [r.display for r in self.recommenders]),
            ("protocols", [p.display for p in self.protocols]),
        ):
            if not labels:
                raise ValueError(f"at least one entry in [[{what}]] is needed")
            seen = {x for x in labels if labels.count(x) > 1}
            if seen:
                raise ValueError(f"{what} need distinct names or labels; repeated: {sorted(seen)}")
        from recsys_eval.pipeline.search import check_study, check_tuning

        check_tuning(self)
        check_study(self)
        return self


def _model_at(loc: tuple) -> type[BaseModel] | None:
    """The schema model that owns the key at ``loc`` (for listing allowed keys)."""
    model: Any = ExperimentConfig
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part) if hasattr(model, "model_fields") else None
        if field is None:
            return None
        ann = field.annotation
        args = getattr(ann, "__args__", ())
        candidates = [ann, *args]
        model = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
        if model is None:
            return None
    return model


def _format_error(source: str, exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        path = ".".join(str(p) if not isinstance(p, int) else f"[{p}]" for p in loc).replace(".[", "[")
        if err["type"] == "extra_forbidden":
            model = _model_at(loc)
            allowed = list(model.model_fields) if model else []
            if model is MetricsConfig:
                from recsys_eval.measure.metrics import PARAMS

                allowed = [name for name in allowed if name != "params"] + list(PARAMS)
            lines.append(f"unknown key {path!r}: {closest(str(loc[-1]), allowed)}")
        elif err["type"] == "missing":
            lines.append(f"missing key {path!r}")
        else:
            where = f"{path}: " if path else ""
            err["msg"] = err["msg"].removeprefix("Value error, ")
            got = err.get("input")
            shown = f" (got {got!r})" if not isinstance(got, dict | list) else ""
            lines.append(f"{where}{err['msg']}{shown}")
    return f"{source}: invalid config\n  " + "\n  ".join(lines)


def parse_config(data: dict[str, Any], source: str = "config") -> ExperimentConfig:
    """Validate a config given as a dict (e.g. parsed TOML)."""
    try:
        config = ExperimentConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_error(source, exc)) from None
    config._source = source
    return config


def apply_overrides(data: dict[str, Any], overrides: list[str], source: str = "config") -> dict[str, Any]:
    """Apply ``key.path=value`` overrides (``--set``) to a parsed config, in place, and return it.

    The value is read as a TOML value (``5``, ``true``, ``[5, 10]``, ``"x"``); text that is not
    valid TOML is taken as a string, so ``--set recommenders.0.name=als`` needs no quotes. A number
    in the path indexes an array of tables (``recommenders.0``).
    """
    for override in overrides:
        path, eq, text = override.partition("=")
        keys = [k.strip() for k in path.split(".")]
        if not eq or not all(keys):
            raise ConfigError(f"--set {override!r}: expected key.path=value, e.g. metrics.k=[5,10]")
        try:
            value = tomllib.loads(f"v = {text}")["v"]
        except tomllib.TOMLDecodeError:
            value = text
        node: Any = data
        for depth, key in enumerate(keys[:-1]):
            where = ".".join(keys[: depth + 1])
            if isinstance(node, list):
                if not key.isdigit() or int(key) >= len(node):
                    raise ConfigError(f"--set {path}: {where!r} is not an index of the {len(node)} entries")
                node = node[int(key)]
            else:
                node = node.setdefault(key, {})
            if not isinstance(node, dict | list):
                raise ConfigError(f"--set {path}: {where!r} is a value, not a table, in {source}")
        if isinstance(node, list):
            raise ConfigError(f"--set {path}: {path!r} names an array entry, not a key, in {source}")
        node[keys[-1]] = value
    return data


def load_config(path: str | Path, overrides: list[str] | None = None) -> ExperimentConfig:
    """Read and validate a TOML experiment config, after the ``key.path=value`` ``overrides``
    (:func:`apply_overrides`); names inside it are checked by :func:`check_names`."""
    path = Path(path)
    text = read_config_text(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    config = parse_config(apply_overrides(data, overrides or [], str(path)), str(path))
    return resolve_paths(config, path.parent)


def resolve_paths(config: ExperimentConfig, folder: Path) -> ExperimentConfig:
    """``config`` with its relative paths (a dataset's ``path`` and ``data_home``, an external
    run's ``path``) read from ``folder``, the config file's own folder, as plugin modules are: a
    config runs the same from any working directory, and the resolved config a run saves
    (:func:`resolved_text`) names the same files from its results folder. ``output.folder`` alone
    stays relative to the working directory, where results are looked for."""

    def beside(value: str | None) -> str | None:  # a URI (a dataset Spark reads) is no path
        if value is None or is_uri(value):
            return value
        return str((folder / Path(value).expanduser()).resolve())

    def dataset(d: DatasetConfig) -> DatasetConfig:
        return d.model_copy(update={"path": beside(d.path), "data_home": beside(d.data_home)})

    resolved = config.model_copy(update={
        "dataset": config.dataset and dataset(config.dataset),
        "datasets": config.datasets and [dataset(d) for d in config.datasets],
        "recommenders": [r.model_copy(update={"path": beside(r.path)}) for r in config.recommenders],
    })
    resolved._source = config.source
    return resolved


def resolved_text(config: ExperimentConfig) -> str:
    """The config as run, as TOML: every key with its value after ``--set`` and the command-line
    options, defaults written out, paths absolute (:func:`resolve_paths`). Read back by
    :func:`load_config`, it is the same config, so a saved ``config.toml`` reruns its experiment."""
    from recsys_eval.core.toml_text import dumps

    return ("# The config as run: every key after --set and the command-line options, defaults included.\n"
            "# The file as written is config.original.toml; the options, overrides.txt (when any).\n"
            + dumps(config.model_dump(mode="json", exclude_none=True)))


def identity_hash(config: ExperimentConfig) -> str:
    """The hash ``--resume`` matches a work folder by: the resolved config without ``[run]``,
    ``[engine]`` and ``[output]``, which change how and where a run works, not its results."""
    from recsys_eval.core.results import config_hash
    from recsys_eval.core.toml_text import dumps

    return config_hash(dumps(config.model_dump(mode="json", exclude_none=True,
                                               exclude={"run", "engine", "output"})))


def read_config_text(path: Path) -> str:
    """The text of a config file, or a ConfigError naming the file (and, for a file that is not
    UTF-8, the byte offset and line of the first byte that is not)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config ({exc.strerror})") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ConfigError(
            f"{path}: not UTF-8 text: byte 0x{raw[exc.start]:02x} at offset {exc.start} (line {line}) "
            "is not valid UTF-8; save the config as UTF-8 (TOML files must be)"
        ) from None

