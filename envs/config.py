"""Validated env settings (the keyword arguments of ``gymnasium.make``), never coerced.

Unknown keys, bad values or wrong types (a bool, str or float for an ``int``) raise one `SeffiError`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal, TypeVar

import numpy as np
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from seffi.errors import SeffiError

#: A user reward: called with the final-step ``info`` dict of one episode, returns the episode reward.
RewardFn = Callable[[dict[str, Any]], float]


def _exactly(what: str, types: tuple[type, ...], cast: type) -> BeforeValidator:
    """Accept only ``types`` (then ``cast``): pydantic's lax mode would turn ``"8"`` or ``True`` into 8."""

    def check(value: Any) -> Any:
        if value is None and cast is int:  # optional fields: the field's own type checks ``None``
            return value
        if not isinstance(value, types) or (cast is not bool and isinstance(value, bool | np.bool_)):
            raise ValueError(f"must be {what}, not {type(value).__name__} {value!r}")
        return cast(value)

    return BeforeValidator(check)


_INT = _exactly("an integer", (int, np.integer), int)
Integer = Annotated[int, _INT]
OptionalInteger = Annotated[int | None, _INT]
Number = Annotated[float, _exactly("a number", (int, float, np.integer, np.floating), float)]
Boolean = Annotated[bool, _exactly("True or False", (bool, np.bool_), bool)]


class EnvConfig(BaseModel):
    """Settings shared by the token-level and the router env.

    Attributes:
        task: Registered task name (set by the env id; see ``seffi.tasks.list_tasks()``).
        task_config: Overrides of the task's config (``None``: the task's defaults).
        n_inputs: Size of the fixed input pool, ``task.make_inputs(n_inputs, seed=input_seed)``.
        input_seed: Seed of the input pool (independent of the episode seed given to ``reset``).
        budget: Samples per input in one *run*; ``info["sample_index"]`` counts 1..budget.
        reward: ``"valid"`` (1 for a valid trace, else 0), ``"novel"`` (``valid`` plus
            ``novelty_bonus`` per strategy a valid trace adds to this input's run), or a callable
            ``f(info) -> float`` of the final-step info.
        novelty_bonus: Bonus per newly found strategy in ``"novel"`` mode.
        schedule: How ``reset()`` picks the input: ``"round_robin"`` (cycles the pool, skipping
            inputs whose budget is used) or ``"random"`` (uniform over inputs with budget left).
        history: Add the per-input history of this run to the observation.
        render_mode: ``None``, ``"ansi"`` (text) or ``"rgb_array"`` (uint8 coverage grid (H, W, 3)).
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
        max_length: Output tokens per episode (incl. ``<eos>``); ``None``: the pool's longest trace
            plus ``max(4, longest // 4)``.
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
        + err["msg"].removeprefix("Value error, ")  # pydantic's prefix to our validators' messages
        + (f" (got {err['input']!r})" if err["type"] == "literal_error" else "")
        for err in exc.errors()
    )


def parse_config(cls: type[C], kwargs: Mapping[str, Any]) -> C:
    """Validate env kwargs into ``cls``; any problem becomes one readable `SeffiError`."""
    try:
        return cls(**kwargs)
    except ValidationError as exc:
        raise SeffiError(f"invalid {cls.__name__}: {problems(exc)}") from None
