"""Train-or-load the ladder's two models (base LM, latent mixture), cached by a hash of their config.

Folders live under `seffi._cache.default_cache_dir` (``$SEFFI_CACHE`` or ``~/.cache/seffi/models``), one per
model, named ``<task>-base-<hash>`` / ``<task>-mixture-<hash>`` (`LMConfig.base_key`). Each holds
``save_pretrained`` output (``model.safetensors``, ``config.json``, tokenizer files — loadable with
``AutoModelForCausalLM`` / ``AutoTokenizer``) and ``seffi_meta.json`` (config, data statistics, losses,
EM history, latent prior, wall times). A folder is written under a temporary name and renamed when
complete, so an interrupted run never leaves a half-written model behind, and it carries
``seffi_manifest.json``: the sha256 digest of every file, checked before a cached model is used, and
the library stack that trained it (`training_stack`). A folder whose files changed or went
missing is retrained with one warning (``retrain=False`` refuses it instead; ``retrain=True`` retrains
whatever the cache holds).

Same weights means bit-identical on one stack only. Training is a pure function of the config and
seed on a given stack — torch (with its build), transformers, tokenizers, numpy, Python major.minor,
CPU architecture, thread count (`seffi._cache.numerics_stack`) and torch's CPU
capability — and a clean-cache retrain there reproduces the cached weights byte for byte; another
stack trains another model from the same config. So the key hashes the stack: a machine with other
versions trains its own folder instead of loading one trained elsewhere, and folders keyed before the
stack was part of the key are never found. A folder whose manifest names another stack (copied from
another machine, renamed, or trained on another CPU capability, which the key leaves out) is handled
like a damaged one: retrained with one warning, refused with ``retrain=False``.

Importing this module does not import torch; training and loading do.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from seffi import _cache
from seffi._cache import default_cache_dir
from seffi._io import write_atomic
from seffi._seeding import spawn
from seffi.errors import SeffiError
from seffi.tasks import get_task
from seffi.tasks.base import Task

from .config import LMConfig

if TYPE_CHECKING:
    from .lm import TaskLM

#: Each model folder's metadata (the same name as `seffi.models.lm.META_FILE`, which imports torch).
META_FILE = "seffi_meta.json"

#: Progress callback: (phase, done, total) — e.g. ("SFT", step, steps).
ProgressHook = Callable[[str, int, int], None]


@dataclass
class LadderModels:
    """A task's base LM and latent mixture, with where they live.

    Attributes:
        cfg: Their config.
        task: The task instance.
        base: The base LM (the rung-2 iid sampler).
        mixture: The latent mixture (action = code).
        base_dir: Folder of the base LM.
        mixture_dir: Folder of the mixture.
        cached: Which of the two were loaded rather than trained: ``{"base": bool, "mixture": bool}``.
    """

    cfg: LMConfig
    task: Task[Any, Any]
    base: TaskLM
    mixture: TaskLM
    base_dir: Path
    mixture_dir: Path
    cached: dict[str, bool]

    @property
    def n_codes(self) -> int:
        """L."""
        return int(self.mixture.meta["n_codes"])

    @property
    def prior(self) -> np.ndarray:
        """Global latent prior: share of training rows assigned to each code, shape (L,)."""
        return np.asarray(self.mixture.meta["prior"], dtype=np.float64)

    @property
    def per_input_prior(self) -> bool:
        """Whether the mixture learned ``p(z | x)`` (``MixtureConfig.prior="input"``)."""
        return self.mixture.meta.get("prior_kind", "global") == "input"

    def input_prior(self, prompts: Sequence[str]) -> np.ndarray:
        """The latent prior of each prompt: float array, shape (len(prompts), L).

        ``p(z | x)`` from the mixture for a per-input prior, else the global prior on every row.
        """
        if self.per_input_prior:
            return self.mixture.code_distribution(prompts, self.n_codes)
        return np.tile(self.prior, (len(prompts), 1))


def build_task(cfg: LMConfig) -> Task[Any, Any]:
    """The task of ``cfg`` with its overrides."""
    return get_task(cfg.task, **(cfg.task_config or {}))


def training_rows(cfg: LMConfig, task: Task[Any, Any] | None = None) -> list[Any]:
    """``task.training_rows(n_train_inputs, rows_per_input, seed=data_seed)`` as a list."""
    task = task or build_task(cfg)
    return list(task.training_rows(cfg.n_train_inputs, cfg.rows_per_input, seed=cfg.data_seed))


def training_input_ids(cfg: LMConfig, task: Task[Any, Any] | None = None) -> frozenset[str]:
    """Ids of the training inputs (the same draw ``task.training_rows`` makes)."""
    task = task or build_task(cfg)
    input_seed, _ = spawn(cfg.data_seed, 2)
    return frozenset(x.id for x in task.make_inputs(cfg.n_train_inputs, input_seed))


def mixture_row_index(cfg: LMConfig, n_rows: int) -> np.ndarray:
    """Indices of the training rows the mixture learns from (all, or a seeded subset of ``max_rows``)."""
    limit = cfg.mixture.max_rows
    if limit is None or limit >= n_rows:
        return np.arange(n_rows)
    return np.sort(np.random.default_rng(cfg.mixture.seed).choice(n_rows, size=limit, replace=False))


def mixture_rows(cfg: LMConfig, rows: list[Any]) -> list[Any]:
    """The training rows of the mixture (see `mixture_row_index`)."""
    return [rows[i] for i in mixture_row_index(cfg, len(rows)).tolist()]


#: The digests of a model folder's files, written after training and checked before every use.
MANIFEST_FILE = "seffi_manifest.json"
MANIFEST_FORMAT = "seffi.models.manifest/1"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _model_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST_FILE)


def training_stack() -> dict[str, str]:
    """The stack models train on here: `numerics_stack` and torch's CPU capability.

    The capability (``torch.backends.cpu.get_cpu_capability()``: ``"AVX2"``, ``"AVX512"``, ...) selects
    ATen's vector kernels, so it changes the rounding of training; reading it imports torch, so it is
    recorded in the manifest and checked before a cached folder is loaded rather than hashed into the key.
    """
    import torch

    return {**_cache.numerics_stack(), "cpu_capability": str(torch.backends.cpu.get_cpu_capability())}


def write_manifest(folder: str | Path) -> None:
    """Write each file's sha256 digest and size, and `training_stack`, to ``folder``'s manifest."""
    folder = Path(folder)
    files = {
        p.relative_to(folder).as_posix(): {"sha256": _sha256(p), "bytes": p.stat().st_size}
        for p in _model_files(folder)
    }
    manifest = {"format": MANIFEST_FORMAT, "files": files, "stack": training_stack()}
    write_atomic(folder / MANIFEST_FILE, json.dumps(manifest, indent=1, sort_keys=True) + "\n")


def stack_difference(folder: str | Path) -> str | None:
    """How the stack in ``folder``'s manifest differs from `training_stack`; None when they agree.

    Returns:
        A one-line description (``"torch 2.12.0+cpu there, 2.13.0+cpu here"``), or None.
    """
    try:
        recorded = json.loads((Path(folder) / MANIFEST_FILE).read_text(encoding="utf-8")).get("stack")
    except (OSError, ValueError, AttributeError):
        recorded = None
    if not isinstance(recorded, dict):
        return f"its {MANIFEST_FILE} names no library stack"
    here = training_stack()
    diffs = [
        f"{name} {recorded.get(name, 'unrecorded')} there, {here.get(name, 'unknown')} here"
        for name in sorted(set(here) | set(recorded))
        if str(recorded.get(name)) != str(here.get(name))
    ]
    return "; ".join(diffs) or None


def manifest_problem(folder: str | Path) -> str | None:
    """Why ``folder`` cannot be trusted (no manifest, a file missing or changed); None when it checks out."""
    folder = Path(folder)
    try:
        manifest = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
        files = manifest["files"] if manifest.get("format") == MANIFEST_FORMAT else None
    except FileNotFoundError:
        return f"no {MANIFEST_FILE}"
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        files = None
    if not isinstance(files, dict) or not files:
        return f"{MANIFEST_FILE} is not a manifest"
    for name, entry in sorted(files.items()):
        path = folder / name
        if not path.is_file():
            return f"{name} is missing"
        if not isinstance(entry, dict) or path.stat().st_size != entry.get("bytes"):
            return f"{name} changed size"
        if _sha256(path) != entry.get("sha256"):
            return f"{name} does not match its sha256 digest"
    return None


def _check_cached(folder: Path, retrain: bool | None) -> None:
    """Remove a cached folder that must be retrained: any, with ``retrain``; a damaged one, by default."""
    if not folder.exists():
        return
    if retrain:
        shutil.rmtree(folder, ignore_errors=True)
        return
    problem = manifest_problem(folder)
    if problem is not None:
        why = f"is damaged ({problem})"
    else:
        other = stack_difference(folder)
        if other is None:
            return
        why = f"was trained on another library stack ({other}), so its weights are not what this one trains"
    if retrain is False:
        raise SeffiError(f"model cache {folder} {why}; retrain it, or remove the folder")
    warnings.warn(f"model cache {folder} {why}; retraining it", UserWarning, stacklevel=3)
    shutil.rmtree(folder, ignore_errors=True)


def _write_atomically(folder: Path, write: Callable[[Path], None]) -> None:
    tmp = folder.with_name(f".{folder.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    write(tmp)
    write_manifest(tmp)
    if folder.exists():  # another process finished first: same config, same bits; keep theirs
        shutil.rmtree(tmp, ignore_errors=True)
        return
    tmp.rename(folder)


def _complete(folder: Path) -> bool:
    return (folder / META_FILE).is_file() and (folder / "config.json").is_file()


def train_base(
    cfg: LMConfig, task: Task[Any, Any], rows: list[Any], hook: ProgressHook | None = None
) -> TaskLM:
    """SFT of a fresh model on ``rows`` (see `LMConfig`)."""
    from .lm import Layout, TaskLM, examples_from_rows, torch_setup

    torch_setup()
    started = time.perf_counter()

    layout = Layout(task.vocabulary())
    ex = examples_from_rows(layout, rows)
    lm = TaskLM.create(cfg, task, ex)
    sft_hook = None if hook is None else (lambda s, t, _loss: hook("SFT", s, t))
    losses = lm.train(ex, **cfg.sft_settings(), hook=sft_hook)
    window = max(1, len(losses) // 20)
    lm.meta.update(
        {
            "kind": "base",
            "config": cfg.model_dump(mode="json"),
            "n_params": lm.n_params(),
            "n_rows": len(rows),
            "loss_first": float(np.mean(losses[:window])),
            "loss_last": float(np.mean(losses[-window:])),
            "loss_curve": [float(np.mean(losses[i : i + window])) for i in range(0, len(losses), window)],
            "train_seconds": time.perf_counter() - started,
        }
    )
    return lm


def train_ladder_models(
    cfg: LMConfig,
    cache_dir: str | Path | None = None,
    *,
    hook: ProgressHook | None = None,
    retrain: bool | None = None,
) -> LadderModels:
    """Load the base LM and the mixture of ``cfg`` from the cache, training whichever is missing.

    Args:
        cfg: Data, model and EM settings.
        cache_dir: Cache root (default `default_cache_dir`).
        hook: Progress callback (phase, done, total) for SFT steps and EM phases.
        retrain: ``None`` (default): use cached folders whose manifest checks out, retrain damaged
            ones and ones whose manifest names another library stack with one warning each. ``True``:
            retrain and replace every cached folder. ``False``: never retrain such a folder, raise
            instead.

    Raises:
        SeffiError: A cached folder is damaged or from another stack and ``retrain`` is False.
    """
    from .lm import TaskLM
    from .mixture import train_mixture

    task = build_task(cfg)
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    base_dir, mix_dir = root / cfg.base_key(), root / cfg.mixture_key()
    for d in (base_dir, mix_dir):
        _check_cached(d, retrain)
    cached = {"base": _complete(base_dir), "mixture": _complete(mix_dir)}
    rows: list[Any] | None = None
    if cached["base"]:
        base = TaskLM.load(base_dir, task)
    else:
        rows = training_rows(cfg, task)
        base = train_base(cfg, task, rows, hook)
        _write_atomically(base_dir, base.save)
    if cached["mixture"]:
        mixture = TaskLM.load(mix_dir, task)
    else:
        rows = rows if rows is not None else training_rows(cfg, task)
        n_codes = cfg.mixture.n_codes or 2 * len(task.strategies())
        started = time.perf_counter()
        em_rows = mixture_rows(cfg, rows)
        result = train_mixture(base, em_rows, n_codes, cfg.mixture, hook)
        mixture = result.model
        mixture.meta.update(
            {
                "kind": "mixture",
                "config": cfg.model_dump(mode="json"),
                "base_key": cfg.base_key(),
                "n_params": mixture.n_params(),
                "train_seconds": time.perf_counter() - started,
            }
        )

        def write(folder: Path) -> None:
            mixture.save(folder)
            np.save(folder / "assignments.npy", result.assignments)
            np.save(folder / "assignment_rows.npy", mixture_row_index(cfg, len(rows)))

        _write_atomically(mix_dir, write)
    if base.meta.get("kind") != "base" or mixture.meta.get("kind") != "mixture":
        raise SeffiError(f"cache folders {base_dir} / {mix_dir} do not hold a base LM and a mixture")
    return LadderModels(cfg, task, base, mixture, base_dir, mix_dir, cached)


def cached_base_folder(
    cfg: LMConfig,
    cache_dir: str | Path | None = None,
    *,
    hook: ProgressHook | None = None,
    retrain: bool | None = None,
) -> Path:
    """The cache folder of ``cfg``'s base LM alone (what GRPO starts from), trained when missing.

    The folder, checks and ``retrain`` semantics of `train_ladder_models`, without the mixture: a
    damaged folder or one from another library stack is retrained with one warning (refused with
    ``retrain=False``), and a new one is written atomically with its manifest.

    Args:
        cfg: Data, model and SFT settings.
        cache_dir: Cache root (default `default_cache_dir`).
        hook: Progress callback (phase, done, total) for SFT steps.
        retrain: As in `train_ladder_models`.

    Returns:
        The folder (``save_pretrained`` layout).

    Raises:
        SeffiError: The cached folder is damaged or from another stack and ``retrain`` is False.
    """
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    folder = root / cfg.base_key()
    _check_cached(folder, retrain)
    if not _complete(folder):
        task = build_task(cfg)
        _write_atomically(folder, train_base(cfg, task, training_rows(cfg, task), hook).save)
    return folder


def load_ladder_models(folder: str | Path, task_name: str | None = None) -> LadderModels:
    """Load the two models from ``base/`` + ``mixture/`` in ``folder``, or from a cached mixture folder.

    A cached mixture folder's meta names its base LM's folder (a sibling in the same cache). The folders
    are the caller's choice, so a manifest naming another library stack does not stop them loading.
    """
    from .lm import TaskLM

    folder = Path(folder)
    if (folder / "base").is_dir() and (folder / "mixture").is_dir():
        base_dir, mix_dir = folder / "base", folder / "mixture"
    elif (folder / META_FILE).is_file():
        meta = json.loads((folder / META_FILE).read_text())
        if meta.get("kind") != "mixture":
            raise SeffiError(f"{folder} is a {meta.get('kind')} model folder; pass a mixture folder")
        base_dir, mix_dir = folder.parent / meta["base_key"], folder
    else:
        raise SeffiError(f"{folder} holds neither base/ and mixture/ nor a seffi mixture model")
    for d in (base_dir, mix_dir):
        problem = manifest_problem(d)
        if problem is not None and (d / MANIFEST_FILE).exists():  # a folder without one is the user's own
            raise SeffiError(f"model folder {d} is damaged ({problem})")
    try:
        meta = json.loads((mix_dir / META_FILE).read_text())
        cfg = LMConfig(**meta["config"])
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise SeffiError(f"cannot read the mixture's {META_FILE} in {mix_dir}: {exc}") from None
    if task_name is not None and task_name != cfg.task:
        raise SeffiError(f"{folder} holds models of task {cfg.task!r}, not {task_name!r}")
    task = build_task(cfg)
    return LadderModels(
        cfg,
        task,
        TaskLM.load(base_dir, task),
        TaskLM.load(mix_dir, task),
        base_dir,
        mix_dir,
        {"base": True, "mixture": True},
    )
