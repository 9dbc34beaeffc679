"""Gymnasium environments for every seffi task (imported as ``seffi.envs``).

Importing it registers, per task, ``seffi/<Name>-v0`` ([`TokenEnv`][seffi.envs.TokenEnv]),
``seffi/<Name>Router-v0`` ([`RouterEnv`][seffi.envs.RouterEnv]) and ``seffi/<Name>LatentLM-v0``
(`seffi.models.latent_env`, imported only when built), each with a native vector env
(``vectorization_mode="vector_entry_point"``). Settings: [`TokenEnvConfig`][seffi.envs.TokenEnvConfig],
[`RouterEnvConfig`][seffi.envs.RouterEnvConfig]. The step that ends an episode carries the ``info``
keys `FINAL_INFO_KEYS` (and ``z`` for router envs); other steps' ``info`` is empty.

Examples:
    >>> import gymnasium as gym, seffi.envs
    >>> env = gym.make(seffi.envs.env_id("hanoi", "router"), n_inputs=4, budget=8, reward="novel")
"""

from __future__ import annotations

from typing import Literal

import gymnasium as gym

from seffi.errors import SeffiError
from seffi.tasks import list_tasks

from .base import AutoresetMode, parse_autoreset_mode
from .config import EnvConfig, RouterEnvConfig, TokenEnvConfig
from .core import FINAL_INFO_KEYS
from .router import RouterEnv, RouterVectorEnv
from .token import TokenEnv, TokenVectorEnv

EnvKind = Literal["token", "router", "latent_lm"]

#: The registration table: per env kind, its id suffix and module (string entry points import nothing).
_KINDS: dict[str, tuple[str, str]] = {
    "token": ("", "seffi.envs.token"),
    "router": ("Router", "seffi.envs.router"),
    "latent_lm": ("LatentLM", "seffi.models.latent_env"),
}


def env_id(task_name: str, kind: EnvKind = "token") -> str:
    """The id of a task's env of ``kind``: ``seffi/<CamelName>-v0``, ``...Router-v0``, ``...LatentLM-v0``."""
    if kind not in _KINDS:
        raise SeffiError(f"kind must be one of {sorted(_KINDS)}, got {kind!r}")
    camel = "".join(part[:1].upper() + part[1:] for part in task_name.split("_"))
    return f"seffi/{camel}{_KINDS[kind][0]}-v0"


def register_envs() -> list[str]:
    """Register the envs of every task not registered yet (runs at import); the ids registered."""
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


register_envs()

__all__ = [
    "FINAL_INFO_KEYS",
    "AutoresetMode",
    "EnvConfig",
    "RouterEnv",
    "RouterEnvConfig",
    "RouterVectorEnv",
    "TokenEnv",
    "TokenEnvConfig",
    "TokenVectorEnv",
    "env_id",
    "parse_autoreset_mode",
    "register_envs",
]
