"""The configuration of ``seffi run``: a pydantic model with the defaults embedded.

Sources, later ones win: the embedded defaults, a JSON or YAML file (``--config file``), then
command-line overrides (``--budget 32 --seed 1 --tasks sort_swaps,coin_sum``). Unknown keys anywhere
are an error (``extra="forbid"``), so a typo never silently falls back to a default.

Example:
    >>> cfg = RunConfig(budget=8, tasks="hanoi")
    >>> cfg.tasks, cfg.budget
    (('hanoi',), 8)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from seffi.errors import SeffiError

#: The default experiment: three tasks with four, four and three strategies and different ambiguity.
DEFAULT_TASKS: tuple[str, ...] = ("sort_swaps", "edit_script", "graph_traversal")

WandbMode = Literal["online", "offline", "disabled"]


class LearnerConfig(BaseModel):
    """Settings of the learned exploration router (see :mod:`seffi.experiment.learner`).

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

    lr: float = Field(1.0, gt=0.0, le=100.0)
    gamma: float = Field(0.0, ge=0.0, le=1.0)
    baseline_decay: float = Field(0.9, ge=0.0, lt=1.0)
    rounds: int = Field(100, ge=0, le=100_000)
    train_runs: int = Field(4, ge=1, le=1024)
    input_features: bool = True


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

    seed: int = Field(0, ge=0, le=2**63 - 1)
    tasks: tuple[str, ...] = DEFAULT_TASKS
    n_inputs: int = Field(16, ge=1, le=10_000)
    budget: int = Field(8, ge=1, le=4096)
    eval_runs: int = Field(4, ge=1, le=1024)
    n_latents: int | None = Field(None, ge=2, le=1024)
    prior_skew: float = Field(1.0, ge=0.0, le=10.0)
    noise: float = Field(0.1, ge=0.0, le=1.0)
    skew: float = Field(1.0, ge=0.0, le=10.0)
    task_options: dict[str, dict[str, Any]] = Field(default_factory=dict)
    learner: LearnerConfig = LearnerConfig()
    bootstrap: int = Field(1000, ge=10, le=100_000)
    ci: float = Field(0.95, gt=0.5, lt=1.0)
    wandb: WandbMode = "offline"
    wandb_project: str = Field("seffi", min_length=1)
    log_every: int = Field(10, ge=1, le=100_000)
    out: Path | None = None
    progress: bool = True

    @field_validator("tasks", mode="before")
    @classmethod
    def _split_tasks(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [t.strip() for t in value.split(",")]
        return value

    @field_validator("tasks")
    @classmethod
    def _known_tasks(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        from seffi.tasks import list_tasks

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
        return self

    def public_dict(self) -> dict[str, Any]:
        """The config as JSON-ready data, minus what does not change results (out, progress, W&B)."""
        ignored = {"out", "progress", "wandb", "wandb_project", "log_every"}
        return self.model_dump(mode="json", exclude=ignored)


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a JSON (``.json``) or YAML (``.yaml``/``.yml``) config file into a dict.

    Raises:
        SeffiError: The file is missing, unreadable, not valid JSON/YAML, or not a mapping.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SeffiError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    suffix = path.suffix.lower()
    try:
        if suffix == ".json":
            data = json.loads(text)
        elif suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        else:
            raise SeffiError(f"config file {path} must end in .json, .yaml or .yml")
    except (json.JSONDecodeError, ValueError) as exc:
        if isinstance(exc, SeffiError):
            raise
        raise SeffiError(f"config file {path} is not valid JSON: {exc}") from None
    except Exception as exc:  # yaml.YAMLError, without importing yaml at module level
        raise SeffiError(f"config file {path} is not valid YAML: {str(exc).splitlines()[0]}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SeffiError(f"config file {path} must hold a mapping of settings, got {type(data).__name__}")
    return data


def build_config(file: str | Path | None = None, overrides: dict[str, Any] | None = None) -> RunConfig:
    """Defaults, then ``file``, then ``overrides`` (None values are ignored: "not given on the CLI").

    Nested learner settings may be overridden with dotted keys, e.g. ``{"learner.rounds": 5}``.
    """
    data: dict[str, Any] = load_config_file(file) if file is not None else {}
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
