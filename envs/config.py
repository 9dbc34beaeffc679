"""Validated settings of the seffi environments (the keyword arguments of ``gymnasium.make``).

Every env id ``seffi/<Name>-v0`` / ``seffi/<Name>Router-v0`` accepts the fields below as keyword
arguments; unknown keys, out-of-range values and values of the wrong type raise one
`SeffiError` naming the field. Types are not coerced: an integer field takes an
``int`` (or numpy integer) but never a ``bool``, a string or a float, a number field never a ``bool`` or
a string, and ``history`` only a ``bool``.

Examples:
    >>> cfg = parse_config(TokenEnvConfig, {"task": "hanoi", "budget": 4})
    >>> cfg.budget, cfg.reward, cfg.schedule
    (4, 'valid', 'round_robin')
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal, TypeVar

import numpy as np
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from seffi.errors import SeffiError

#: A user reward: called with the final-step ``info`` dict of one episode, returns the episode reward.
RewardFn = Callable[[dict[str, Any]], float]


def _integer(value: Any) -> Any:
    """An ``int`` as itself, a numpy integer as ``int``; ``True``, ``"8"`` or ``8.0`` is refused."""
    # Pydantic's lax mode would turn "8" into 8: a typo'd sweep value would run another experiment.
    if value is None:  # optional fields: ``None`` is checked by the field's own type
        return value
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
        raise ValueError(f"must be an integer, not {type(value).__name__} {value!r}")
    return int(value)


def _number(value: Any) -> Any:
    """A real number (``int``, ``float`` or numpy scalar) as ``float``; ``bool`` and strings are refused."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.integer | np.floating):
        raise ValueError(f"must be a number, not {type(value).__name__} {value!r}")
    return float(value)


def _boolean(value: Any) -> Any:
    """``True`` / ``False`` (or a numpy bool) only: ``1`` or ``"yes"`` is not a setting of a flag."""
    if not isinstance(value, bool | np.bool_):
        raise ValueError(f"must be True or False, not {type(value).__name__} {value!r}")
    return bool(value)


Integer = Annotated[int, BeforeValidator(_integer)]
OptionalInteger = Annotated[int | None, BeforeValidator(_integer)]
Number = Annotated[float, BeforeValidator(_number)]
Boolean = Annotated[bool, BeforeValidator(_boolean)]


class EnvConfig(BaseModel):
    """Settings shared by the token-level and the router env.

    Attributes:
        task: Registered task name (set by the env id; see ``seffi.tasks.list_tasks()``).
        task_config: Overrides of the task's config (``None``: the task's defaults).
        n_inputs: Size of the fixed input pool, drawn with ``task.make_inputs(n_inputs, seed=input_seed)``.
        input_seed: Seed of the input pool (independent of the episode seed given to ``reset``).
        budget: Samples per input in one *run*; ``info["sample_index"]`` counts 1..budget.
        reward: ``"valid"`` (default: 1 for a valid trace, else 0), ``"novel"`` (``valid`` plus
            ``novelty_bonus`` per strategy a valid trace adds to this input's run), or a callable
            ``f(info) -> float`` applied to the final-step info.
        novelty_bonus: Bonus per newly found strategy in ``"novel"`` mode.
        schedule: How ``reset()`` without an ``input_id`` picks the input: ``"round_robin"`` (default,
            cycles the pool, skipping inputs whose budget is used) or ``"random"`` (uniform over inputs
            with budget left, drawn from the env's seeded generator).
        history: Add the per-input history of this run to the observation.
        render_mode: ``None`` (default), ``"ansi"`` (text: prompt, output, last sample, its matches) or
            ``"rgb_array"`` (uint8 coverage grid, shape (H, W, 3)); see `seffi.envs.render`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    task: str
    task_config: dict[str, Any] | None = None
    n_inputs: Integer = Field(8, ge=1, le=100_000)
    input_seed: Integer = Field(0, ge=0)
    budget: Integer = Field(16, ge=1, le=1_000_000)
    reward: Literal["valid", "novel"] | RewardFn = "valid"
    novelty_bonus: Number = Field(1.0, ge=0.0, allow_inf_nan=False)
    schedule: Literal["round_robin", "random"] = "round_robin"
    history: Boolean = False
    render_mode: Literal["ansi", "rgb_array"] | None = None


class TokenEnvConfig(EnvConfig):
    """Token-level env settings.

    Attributes:
        max_length: Output tokens per episode (incl. ``<eos>``); ``None`` derives it from the pool: the
            longest reference / invalid / off-strategy trace plus a margin of ``max(4, longest // 4)``.
        history: Add ``"found"`` (strategies found for this input in this run) to the observation.
    """

    max_length: OptionalInteger = Field(None, ge=2, le=100_000)


class RouterEnvConfig(EnvConfig):
    """Router env settings.

    Attributes:
        n_latents: Number of latent codes Z (``None``: ``max(4, 2 * number of strategies)``).
        noise: Probability that the generator ignores the latent and draws from the task's base sampler.
        prior_skew: Zipf exponent of the router prior over latents (0 = uniform), ranked per input.
        mapping_seed: Seed of the hidden latent -> strategy assignment (hashed with each input's id).
        history: Add latents tried, strategies found and budget used to the observation (default on).
    """

    history: Boolean = True
    n_latents: OptionalInteger = Field(None, ge=1, le=4096)
    noise: Number = Field(0.1, ge=0.0, le=1.0)
    prior_skew: Number = Field(1.0, ge=0.0, le=10.0)
    mapping_seed: Integer = Field(0, ge=0)


C = TypeVar("C", bound=EnvConfig)


def problems(exc: ValidationError) -> str:
    """The problems of a pydantic ``ValidationError`` as one line: ``field.path: message; ...``."""
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'config'}: "
        # Pydantic prefixes the messages of our own validators with "Value error, ".
        + err["msg"].removeprefix("Value error, ")
        # A choice among names is easier to fix when the message shows what was passed.
        + (f" (got {err['input']!r})" if err["type"] == "literal_error" else "")
        for err in exc.errors()
    )


def parse_config(cls: type[C], kwargs: Mapping[str, Any]) -> C:
    """Validate env kwargs into ``cls``; any problem becomes one readable `SeffiError`."""
    try:
        return cls(**kwargs)
    except ValidationError as exc:
        raise SeffiError(f"invalid {cls.__name__}: {problems(exc)}") from None
