"""The configuration of ``seffi run``: a pydantic model with the defaults embedded.

Sources, later ones win: the embedded defaults, a JSON or YAML file (``--config file``), then
command-line overrides (``--budget 32 --seed 1 --tasks sort_swaps,coin_sum``). Unknown keys anywhere
are an error (``extra="forbid"``), so a typo never silently falls back to a default.

Examples:
    >>> cfg = RunConfig(budget=8, tasks="hanoi")
    >>> cfg.tasks, cfg.budget
    (('hanoi',), 8)
"""

from __future__ import annotations

from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from seffi.errors import SeffiError
from seffi.report.safe_load import loads_json, loads_yaml, read_text
from seffi.report.wandb_run import wandb_mode_from_env
from seffi.tasks import list_tasks, task_class

#: The default experiment: three tasks with four, four and three strategies and different ambiguity.
DEFAULT_TASKS: tuple[str, ...] = ("sort_swaps", "edit_script", "graph_traversal")

WandbMode = Literal["online", "offline", "disabled"]


class LearnerConfig(BaseModel):
    """Settings of the learned exploration router (see `seffi.experiment.learner`).

    Attributes:
        lr: Policy-gradient step size.
        gamma: Discount of future novelty in the REINFORCE return (0 = immediate reward).
        baseline_decay: EMA factor of the per-sample-index baseline.
        rounds: Training rounds; each round spends the budget K ``train_runs`` times on every input of
            the pool, then makes one policy-gradient update.
        train_runs: Runs per input per round (rows of the training vector env per input).
        input_features: Give the router the input's pool position (it can learn each input's latents).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    # strict: a bool is never a number and a string never a number or a bool (``rounds: true`` is an
    # error, not 1); a strict float still takes an int.
    lr: float = Field(1.0, gt=0.0, le=100.0, strict=True)
    gamma: float = Field(0.0, ge=0.0, le=1.0, strict=True)
    baseline_decay: float = Field(0.9, ge=0.0, lt=1.0, strict=True)
    rounds: int = Field(100, ge=0, le=100_000, strict=True)
    train_runs: int = Field(4, ge=1, le=1024, strict=True)
    input_features: bool = Field(True, strict=True)


class RunConfig(BaseModel):
    """Everything ``seffi run`` needs; the defaults are the documented default experiment.

    Attributes:
        seed: Root seed; every random draw of the run is spawned from it.
        tasks: Task names (a list, or one comma-separated string).
        n_inputs: Size of the fixed pool of inputs per task.
        budget: K, the samples each policy spends on each input.
        eval_runs: Runs per input when measuring each policy (more runs, tighter curves).
        n_latents: Latent codes of the router env (None: the env's default, 2 per strategy).
        prior_skew: Zipf exponent of the router prior, i.e. of the iid base model over latents.
        noise: Probability that the router env's generator ignores the latent.
        skew: Zipf exponent of the task's own base sampler (used by the generator's noise branch).
        task_options: Extra per-task config, ``{task: {field: value}}`` (validated by the task).
        learner: Settings of the learned router.
        bootstrap: Bootstrap replicates for every CI (resampling inputs; paired across policies).
        ci: Confidence level of the CIs.
        wandb: W&B mode; offline by default (files under ``./wandb``, upload with ``wandb sync``).
        wandb_project: W&B project name.
        log_every: Rounds between two logs of the streaming coverage monitor during training.
        out: Run folder (None: ``runs/<timestamp>``).
        progress: Show the live progress display.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    # Numbers and bools are strict (see LearnerConfig): ``budget: true`` is an error, not 1.
    seed: int = Field(0, ge=0, le=2**63 - 1, strict=True)
    tasks: tuple[str, ...] = DEFAULT_TASKS
    n_inputs: int = Field(16, ge=1, le=10_000, strict=True)
    budget: int = Field(8, ge=1, le=4096, strict=True)
    eval_runs: int = Field(4, ge=1, le=1024, strict=True)
    n_latents: int | None = Field(None, ge=2, le=1024, strict=True)
    prior_skew: float = Field(1.0, ge=0.0, le=10.0, strict=True)
    noise: float = Field(0.1, ge=0.0, le=1.0, strict=True)
    skew: float = Field(1.0, ge=0.0, le=10.0, strict=True)
    task_options: dict[str, dict[str, Any]] = Field(default_factory=dict)
    learner: LearnerConfig = LearnerConfig()
    bootstrap: int = Field(1000, ge=10, le=100_000, strict=True)
    ci: float = Field(0.95, gt=0.5, lt=1.0, strict=True)
    wandb: WandbMode = "offline"
    wandb_project: str = Field("seffi", min_length=1)
    log_every: int = Field(10, ge=1, le=100_000, strict=True)
    out: Path | None = None
    progress: bool = Field(True, strict=True)

    @field_validator("tasks", mode="before")
    @classmethod
    def _split_tasks(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [t.strip() for t in value.split(",")]
        return value

    @field_validator("tasks")
    @classmethod
    def _known_tasks(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value or any(not t for t in value):
            raise ValueError("give at least one task name, e.g. --tasks sort_swaps,coin_sum")
        if len(set(value)) != len(value):
            raise ValueError(f"duplicate task names in {list(value)}")
        unknown = [t for t in value if t not in list_tasks()]
        if unknown:
            raise ValueError(f"unknown task(s) {', '.join(unknown)}; known tasks: {', '.join(list_tasks())}")
        return value

    @model_validator(mode="after")
    def _options_for_chosen_tasks(self) -> RunConfig:
        stray = sorted(set(self.task_options) - set(self.tasks))
        if stray:
            raise ValueError(f"task_options names task(s) not in tasks: {', '.join(stray)}")
        # Build every task's config now, so a bad value for the last task is found before the first
        # one trains (and `--print-config` finds it too).
        for name in self.tasks:
            check_task_options(name, {"skew": self.skew, **self.task_options.get(name, {})})
        return self

    def public_dict(self) -> dict[str, Any]:
        """The config as JSON-ready data, minus what does not change results (out, progress, W&B)."""
        ignored = {"out", "progress", "wandb", "wandb_project", "log_every"}
        return self.model_dump(mode="json", exclude=ignored)


#: Caps on a config file: a config is a few hundred bytes, never megabytes or deep trees.
MAX_CONFIG_BYTES = 2**20
MAX_CONFIG_DEPTH = 16


def _allowed_types(annotation: Any) -> set[Any]:
    """The plain types (and ``Literal``) an annotation admits, through ``Optional``, unions, ``Annotated``."""
    origin = get_origin(annotation)
    if origin is Literal:
        return {Literal}
    if origin in (Union, UnionType, Annotated):
        args = get_args(annotation)[:1] if origin is Annotated else get_args(annotation)
        return set().union(*(_allowed_types(a) for a in args))
    return {origin or annotation}


def check_task_options(task: str, options: dict[str, Any]) -> None:
    """Validate one task's config overrides as the task will see them.

    Stricter than the task's own (lax) model: a bool is never accepted for a number and a string
    never for a number or a bool, as everywhere else in the config.

    Raises:
        ValueError: One line naming ``task_options.<task>.<field>`` (pydantic reports it with the path).
    """
    from pydantic import ValidationError

    config_cls = task_class(task).config_cls
    for field, value in options.items():
        info = config_cls.model_fields.get(field)
        if info is None:
            continue  # the model below reports unknown fields with their name
        allowed = _allowed_types(info.annotation)
        if Any in allowed or Literal in allowed:
            continue
        numeric = bool(allowed & {int, float})
        if (isinstance(value, bool) and bool not in allowed and numeric) or (
            isinstance(value, str) and str not in allowed and (numeric or bool in allowed)
        ):
            kind = "a number" if numeric else "a bool"
            raise ValueError(f"task_options.{task}.{field}: {value!r} is not {kind}")
    try:
        config_cls(**options)
    except ValidationError as exc:
        problems = "; ".join(
            ".".join(["task_options", task, *map(str, e["loc"])])
            + ": "
            + e["msg"].removeprefix("Value error, ")
            for e in exc.errors()
        )
        raise ValueError(problems) from None


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a JSON (``.json``) or YAML (``.yaml``/``.yml``) config file into a dict.

    YAML is read without aliases (a 1.4 KB "billion laughs" would expand to gigabytes) and refuses
    duplicate keys; both formats are capped at `MAX_CONFIG_BYTES` and `MAX_CONFIG_DEPTH`.

    Raises:
        SeffiError: The file is missing, unreadable, too large, not UTF-8, not valid JSON/YAML, too
            deep, or not a mapping (one line naming the file).
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".json", ".yaml", ".yml"):
        raise SeffiError(f"config file {path} must end in .json, .yaml or .yml")
    text = read_text(path, what="config file", max_bytes=MAX_CONFIG_BYTES)
    source = f"config file {path}"
    if suffix == ".json":
        data = loads_json(text, source=source, max_depth=MAX_CONFIG_DEPTH)
    else:
        data = loads_yaml(text, source=source, max_depth=MAX_CONFIG_DEPTH)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SeffiError(f"config file {path} must hold a mapping of settings, got {type(data).__name__}")
    return data


def build_config(file: str | Path | None = None, overrides: dict[str, Any] | None = None) -> RunConfig:
    """Defaults, then ``file``, then ``overrides`` (None values are ignored: "not given on the CLI").

    Nested learner settings may be overridden with dotted keys, e.g. ``{"learner.rounds": 5}``.
    The W&B mode comes from ``overrides`` (``--wandb``), else the file, else ``WANDB_MODE``, else offline.
    """
    data: dict[str, Any] = load_config_file(file) if file is not None else {}
    if (overrides or {}).get("wandb") is None and "wandb" not in data:
        env_mode = wandb_mode_from_env()
        if env_mode is not None:
            data["wandb"] = env_mode
    for key, value in (overrides or {}).items():
        if value is None:
            continue
        head, _, tail = key.partition(".")
        if tail:
            sub = data.setdefault(head, {})
            if not isinstance(sub, dict):
                raise SeffiError(f"{head} must be a mapping to override {key}")
            sub[tail] = value
        else:
            data[key] = value
    return RunConfig.model_validate(data)
