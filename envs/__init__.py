"""Gymnasium environments for every seffi task (imported as ``seffi.envs``).

Importing this package registers, for each task in ``seffi.tasks.list_tasks()``:

* ``seffi/<Name>-v0`` — token-level env (:class:`~seffi.envs.token.TokenEnv`), and
* ``seffi/<Name>Router-v0`` — router env (:class:`~seffi.envs.router.RouterEnv`),

each with a native vector env (``gymnasium.make_vec(id, num_envs, vectorization_mode="vector_entry_point")``).
``Name`` is the CamelCase task name (``sort_swaps`` -> ``SortSwaps``); :func:`env_id` builds it.
Keyword arguments of ``gymnasium.make`` are validated by :class:`TokenEnvConfig` /
:class:`RouterEnvConfig`.

The step that ends an episode carries ``info`` keys ``input_id``, ``y_text``, ``strategy_matches``
(sorted tuple), ``valid``, ``parse_ok``, ``num_strategies``, ``sample_index`` (k, 1-based, per input and
run), ``budget_exhausted``, ``run_index``, ``num_new_strategies`` (and ``z`` for router envs); other
steps' ``info`` is empty.

Rendering (:mod:`seffi.envs.render`): ``render_mode="ansi"`` gives a text view (the current input's
prompt, the output so far, the last sample and its strategy matches), ``render_mode="rgb_array"`` a
small uint8 coverage grid, shape (H, W, 3) (inputs x strategies, coloured as strategies are found in
the run) — so SB3's ``make_vec_env``, which asks for ``"rgb_array"``, and video wrappers work. Native
vector envs return one frame per env, as ``SyncVectorEnv`` does.

Example:
    >>> import gymnasium as gym
    >>> import seffi.envs
    >>> seffi.envs.env_id("sort_swaps", "router")
    'seffi/SortSwapsRouter-v0'
    >>> env = gym.make(seffi.envs.env_id("hanoi", "router"), n_inputs=4, budget=8, reward="novel")
    >>> _ = env.reset(seed=0)
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
from .wrappers import NoveltyBonus, VectorNoveltyBonus

EnvKind = Literal["token", "router"]

_ENTRY_POINTS: dict[str, tuple[str, str]] = {
    "token": ("seffi.envs.token:TokenEnv", "seffi.envs.token:TokenVectorEnv"),
    "router": ("seffi.envs.router:RouterEnv", "seffi.envs.router:RouterVectorEnv"),
}


def env_id(task_name: str, kind: EnvKind = "token") -> str:
    """The Gymnasium id of a task's env: ``seffi/<Name>-v0`` or ``seffi/<Name>Router-v0``.

    Args:
        task_name: A task name (``"hanoi"``, ``"sort_swaps"``).
        kind: ``"token"`` or ``"router"``.
    """
    if kind not in _ENTRY_POINTS:
        raise SeffiError(f"kind must be 'token' or 'router', got {kind!r}")
    camel = "".join(part[:1].upper() + part[1:] for part in task_name.split("_"))
    return f"seffi/{camel}{'Router' if kind == 'router' else ''}-v0"


def register_envs() -> list[str]:
    """Register the envs of every task in ``list_tasks()`` that is not registered yet.

    Runs at import; call it again after registering a task of your own.

    Returns:
        The ids registered by this call.
    """
    added = []
    for name in list_tasks():
        for kind, (entry, vector_entry) in _ENTRY_POINTS.items():
            eid = env_id(name, kind)  # type: ignore[arg-type]
            if eid in gym.registry:
                continue
            gym.register(id=eid, entry_point=entry, vector_entry_point=vector_entry, kwargs={"task": name})
            added.append(eid)
    return added


def registered_ids() -> list[str]:
    """All seffi env ids currently registered, sorted."""
    return sorted(i for i in gym.registry if i.startswith("seffi/"))


register_envs()

__all__ = [
    "FINAL_INFO_KEYS",
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
    "register_envs",
    "registered_ids",
]
