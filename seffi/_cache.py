"""seffi's on-disk cache: its root folder and the library stack a cached numeric result depends on.

The trained models of `seffi.models` and the TRL adapter's reference-iid samples
(`seffi.callbacks.trl.GRPOCoverage`) live under `default_cache_dir`, each keyed by what
produced it, `numerics_stack` included.
"""

from __future__ import annotations

import os
import platform
import sys
from functools import lru_cache
from importlib import metadata
from pathlib import Path


def default_cache_dir() -> Path:
    """``$SEFFI_CACHE`` if set, else ``~/.cache/seffi/models``."""
    env = os.environ.get("SEFFI_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "seffi" / "models"


#: Distributions whose installed version is part of every model's cache key (see `numerics_stack`).
NUMERICS_PACKAGES = ("torch", "transformers", "tokenizers", "numpy")


@lru_cache(maxsize=1)
def _installed_versions() -> tuple[tuple[str, str], ...]:
    # Package metadata, not ``import torch``: a key costs milliseconds, and this module stays torch-free.
    out = []
    for name in NUMERICS_PACKAGES:
        try:
            out.append((name, metadata.version(name)))
        except metadata.PackageNotFoundError:
            out.append((name, "absent"))
    return tuple(out)


def numerics_stack() -> dict[str, str]:
    """The parts of this machine's software stack that change the numbers training computes.

    Same config + same seed gives bit-identical weights only on the same stack; every cached model's
    key hashes this dict, so a different stack trains its own model in its own folder. Read from
    package metadata and the standard library, without importing torch.

    Included:
        torch: the kernels, RNG streams and AdamW of every training step; the full version with its
            local build label (``2.13.0+cpu`` and ``2.13.0+cu126`` link different BLAS/oneDNN builds).
        transformers: weight initialisation and the GPT-2/Llama forward passes (attention
            implementation, masking, dtype handling) and the tokenizer wrapper.
        tokenizers: the word-level tokenizer that turns training rows into token ids.
        numpy: the data draw (``task.training_rows``), the mixture's row subset and EM bookkeeping;
            NEP 19 lets ``Generator`` methods change their streams between feature releases.
        python: major.minor — stdlib ``random``/``math`` results and the ABI that picks the wheels
            above; bug-fix releases do not change them.
        machine: the CPU architecture (``x86_64``, ``arm64``): a different kernel set and float
            contraction.
        torch_threads: ``SEFFI_TORCH_THREADS`` (default 1), the intra-op threads training runs on
            (`seffi.models.lm.torch_setup`): the reductions' split, hence their rounding,
            follows the thread count.

    Excluded:
        safetensors: storage only; it writes and reads the tensors' bytes exactly.
        torch's CPU capability (AVX2, AVX512, ...): ATen picks its vector kernels by it, but reading
            it needs ``import torch``; `seffi.models.cache.training_stack` records it in each
            folder's manifest and the cache checks it before loading, where torch is imported anyway.
        seffi itself: changes of what training computes bump `MODEL_FORMAT`.

    Returns:
        ``{component: version}``; a package that is not installed reads ``"absent"``.
    """
    stack = dict(_installed_versions())
    stack["python"] = f"{sys.version_info.major}.{sys.version_info.minor}"
    stack["machine"] = platform.machine().lower()
    stack["torch_threads"] = os.environ.get("SEFFI_TORCH_THREADS", "1").strip()
    return stack
