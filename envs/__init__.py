"""Gymnasium environments for every seffi task (imported as ``seffi.envs``).

Importing this package registers, for each task in ``seffi.tasks.list_tasks()``:

* ``seffi/<Name>-v0`` — token-level env ([`TokenEnv`][seffi.envs.TokenEnv]),
* ``seffi/<Name>Router-v0`` — router env ([`RouterEnv`][seffi.envs.RouterEnv]), and
* ``seffi/<Name>LatentLM-v0`` — the latent-LM env on learned generators (`seffi.models.latent_env`,
  the ``lm`` extra; its module is imported only when such an env is built),

each with a native vector env (``gymnasium.make_vec(id, num_envs, vectorization_mode="vector_entry_point")``).
``Name`` is the CamelCase task name (``sort_swaps`` -> ``SortSwaps``); [`env_id`][seffi.envs.env_id] builds
it. Keyword arguments of ``gymnasium.make`` are validated by [`TokenEnvConfig`][seffi.envs.TokenEnvConfig] /
[`RouterEnvConfig`][seffi.envs.RouterEnvConfig].

The step that ends an episode carries ``info`` keys ``input_id``, ``y_text``, ``strategy_matches``
(sorted tuple), ``valid``, ``parse_ok``, ``num_strategies``, ``sample_index`` (k, 1-based, per input and
run), ``budget_exhausted``, ``run_index``, ``num_new_strategies`` (and ``z`` for router envs); other
steps' ``info`` is empty.

The native vector envs take Gymnasium's ``autoreset_mode=`` (``NEXT_STEP``, the default, ``SAME_STEP``
or ``DISABLED``; see `seffi.envs.vector`), and every env renders as text (``render_mode="ansi"``) or as
an RGB coverage grid (``"rgb_array"``). Which mode suits which loop: ``docs/integrations.md``.

Examples:
    >>> import gymnasium as gym, seffi.envs
    >>> seffi.envs.env_id("sort_swaps", "router")
    'seffi/SortSwapsRouter-v0'
    >>> env = gym.make(seffi.envs.env_id("hanoi", "router"), n_inputs=4, budget=8, reward="novel")
"""

from __future__ import annotations

from typing import Literal

import gymnasium as gym

from seffi.errors import SeffiError
from seffi.tasks import list_tasks

from .config import EnvConfig, RouterEnvConfig, TokenEnvConfig
from .core import FINAL_INFO_KEYS
from .router import RouterEnv, RouterVectorEnv
from .token import TokenEnv, TokenVectorEnv
from .vector import AutoresetMode, parse_autoreset_mode
from .wrappers import NoveltyBonus, VectorNoveltyBonus

EnvKind = Literal["token", "router", "latent_lm"]

#: Per env kind: its name suffix and module. Entry points are strings, so registering imports none of
#: them; the latent-LM envs (the ladder's rung 2) run on learned generators and live in `seffi.models`.
_KINDS: dict[str, tuple[str, str]] = {
    "token": ("", "seffi.envs.token"),
    "router": ("Router", "seffi.envs.router"),
    "latent_lm": ("LatentLM", "seffi.models.latent_env"),
}


def env_id(task_name: str, kind: EnvKind = "token") -> str:
    """The Gymnasium id of a task's env: ``seffi/<Name>-v0``, ``seffi/<Name>Router-v0`` or ``...LatentLM-v0``.

    Args:
        task_name: A task name (``"hanoi"``, ``"sort_swaps"``).
        kind: ``"token"``, ``"router"`` or ``"latent_lm"``.
    """
    if kind not in _KINDS:
        raise SeffiError(f"kind must be one of {sorted(_KINDS)}, got {kind!r}")
    camel = "".join(part[:1].upper() + part[1:] for part in task_name.split("_"))
    return f"seffi/{camel}{_KINDS[kind][0]}-v0"


def register_envs() -> list[str]:
    """Register the envs of every task in ``list_tasks()`` that is not registered yet.

    Runs at import; call it again after registering a task of your own.

    Returns:
        The ids registered by this call.
    """
    added = []
    for name in list_tasks():
        for kind, (suffix, module) in _KINDS.items():
            eid = env_id(name, kind)  # type: ignore[arg-type]
            if eid not in gym.registry:
                entry = f"{module}:{suffix or 'Token'}"
                gym.register(
                    eid, f"{entry}Env", vector_entry_point=f"{entry}VectorEnv", kwargs={"task": name}
                )
                added.append(eid)
    return added


def registered_ids() -> list[str]:
    """All seffi env ids currently registered, sorted."""
    return sorted(i for i in gym.registry if i.startswith("seffi/"))


register_envs()

__all__ = [
    "FINAL_INFO_KEYS",
    "AutoresetMode",
    "EnvConfig",
    "NoveltyBonus",
    "RouterEnv",
    "RouterEnvConfig",
    "RouterVectorEnv",
    "TokenEnv",
    "TokenEnvConfig",
    "TokenVectorEnv",
    "VectorNoveltyBonus",
    "env_id",
    "parse_autoreset_mode",
    "register_envs",
    "registered_ids",
]
