"""The model cache: folders carry sha256 digests and the library stack that trained them; a damaged
folder or one from another stack is retrained or refused, never used; the key hashes the stack."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import require

# ruff: noqa: E402
require("torch", "lm")
require("transformers", "lm")

from seffi import _cache as stack_module
from seffi._seeding import stable_id
from seffi.errors import SeffiError
from seffi.models import cache as cache_module
from seffi.models import config as config_module
from seffi.models.cache import (
    MANIFEST_FILE,
    cached_base_folder,
    load_ladder_models,
    manifest_problem,
    stack_difference,
    train_ladder_models,
    training_stack,
)
from seffi.models.config import LMConfig
from tests.models import tiny
from tests.models.tiny import tiny_cfg


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory):
    return tiny.tiny_models(tmp_path_factory)


@pytest.fixture
def cache(trained, tmp_path):
    """A private copy of the session's cache, free to damage."""
    root = tmp_path / "cache"
    shutil.copytree(trained.base_dir.parent, root)
    return root


def _flip_every_8th_float_of_the_middle_third(path):
    data = bytearray(path.read_bytes())
    header = 8 + int.from_bytes(data[:8], "little")
    body = len(data) - header
    for i in range(header + body // 3, header + 2 * body // 3 - 3, 32):
        data[i + 3] ^= 0x80  # the sign bit of a little-endian float32
    path.write_bytes(bytes(data))


def test_trained_folders_carry_a_manifest_that_checks_out(trained):
    for folder in (trained.base_dir, trained.mixture_dir):
        manifest = json.loads((folder / MANIFEST_FILE).read_text())
        assert {"model.safetensors", "config.json", "seffi_meta.json"} <= set(manifest["files"])
        assert manifest_problem(folder) is None


@pytest.mark.parametrize("damage", ["sign_bits", "n_layer", "truncated", "missing"])
def test_a_damaged_cached_model_is_retrained_with_one_warning_naming_the_folder(trained, cache, damage):
    mix = cache / trained.mixture_dir.name
    digests = json.loads((mix / MANIFEST_FILE).read_text())["files"]
    weights = mix / "model.safetensors"
    if damage == "sign_bits":
        _flip_every_8th_float_of_the_middle_third(weights)
    elif damage == "n_layer":
        config = json.loads((mix / "config.json").read_text())
        config["n_layer"] += 1
        (mix / "config.json").write_text(json.dumps(config))
    elif damage == "truncated":
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    else:
        weights.unlink()
    with pytest.warns(UserWarning, match=f"model cache {mix} is damaged") as record:
        models = train_ladder_models(tiny_cfg(), cache)
    assert len([w for w in record if "damaged" in str(w.message)]) == 1
    assert models.cached == {"base": True, "mixture": False}
    assert manifest_problem(mix) is None
    # Retrained from the same config on the same machine: the same weights as the original (the meta
    # differs only in its wall times).
    again = json.loads((mix / MANIFEST_FILE).read_text())["files"]
    assert again["model.safetensors"] == digests["model.safetensors"]
    assert again["config.json"] == digests["config.json"]


def test_no_retrain_refuses_a_damaged_cache_in_one_line(trained, cache):
    base = cache / trained.base_dir.name
    _flip_every_8th_float_of_the_middle_third(base / "model.safetensors")
    with pytest.raises(SeffiError, match="does not match its sha256 digest") as info:
        train_ladder_models(tiny_cfg(), cache, retrain=False)
    assert "\n" not in str(info.value) and str(base) in str(info.value)


def test_retrain_replaces_an_intact_cache_and_a_clean_cache_loads_silently(trained, cache):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert train_ladder_models(tiny_cfg(), cache).cached == {"base": True, "mixture": True}
    models = train_ladder_models(tiny_cfg(), cache, retrain=True)
    assert models.cached == {"base": False, "mixture": False}
    assert np.allclose(models.prior, trained.prior)


def test_a_damaged_model_dir_is_one_error_line_not_a_traceback(trained, tmp_path):
    folder = tmp_path / "models"
    shutil.copytree(trained.base_dir, folder / "base")
    shutil.copytree(trained.mixture_dir, folder / "mixture")
    assert load_ladder_models(folder).n_codes == trained.n_codes
    weights = folder / "mixture" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(SeffiError, match=r"is damaged \(model.safetensors changed size\)"):
        load_ladder_models(folder)
    (folder / "mixture" / MANIFEST_FILE).unlink()  # a folder assembled by hand: no manifest to check
    with pytest.raises(SeffiError, match="cannot load the model in") as info:
        load_ladder_models(folder)
    assert "\n" not in str(info.value)


def _set_manifest_stack(folder, **changes):
    """Rewrite the stack a manifest records (``stack=None``: none); the file digests stay valid."""
    path = folder / MANIFEST_FILE
    manifest = json.loads(path.read_text())
    if changes.pop("stack", "keep") is None:
        del manifest["stack"]
    manifest.get("stack", {}).update(changes)
    path.write_text(json.dumps(manifest))


def _stack_free_base_fields(self):
    """The base LM's key fields as hashed before the library stack joined the key."""
    return {"format": config_module.MODEL_FORMAT, **self.model_dump(mode="json", exclude={"mixture"})}


def test_the_stack_names_the_installed_versions_and_cpu_capability():
    import tokenizers
    import torch
    import transformers

    stack = training_stack()
    capability = torch.backends.cpu.get_cpu_capability()
    assert stack == {**stack_module.numerics_stack(), "cpu_capability": capability}
    assert stack["torch"] == torch.__version__  # with the build label, e.g. 2.13.0+cpu
    assert stack["transformers"] == transformers.__version__
    assert stack["tokenizers"] == tokenizers.__version__
    assert stack["numpy"] == np.__version__
    assert stack["python"] == f"{sys.version_info.major}.{sys.version_info.minor}"
    assert "safetensors" not in stack  # storage only: it moves bytes exactly


@pytest.mark.parametrize("component", ["torch", "transformers", "tokenizers", "numpy", "python", "machine"])
def test_each_numerics_version_changes_both_cache_keys(monkeypatch, component):
    cfg = tiny_cfg()
    before = (cfg.base_key(), cfg.mixture_key())
    assert (cfg.base_key(), cfg.mixture_key()) == before  # stable across calls
    assert (tiny_cfg().base_key(), tiny_cfg().mixture_key()) == before  # and across equal configs
    real = stack_module.numerics_stack()
    other = {**real, component: real[component] + "-other"}
    monkeypatch.setattr(stack_module, "numerics_stack", lambda: other)
    after = (cfg.base_key(), cfg.mixture_key())
    assert after[0] != before[0] and after[1] != before[1]
    assert after[0].startswith("edit_script-base-") and after[1].startswith("edit_script-mixture-")


def test_the_training_thread_count_changes_the_cache_keys(monkeypatch):
    monkeypatch.delenv("SEFFI_TORCH_THREADS", raising=False)
    one = tiny_cfg().base_key()
    monkeypatch.setenv("SEFFI_TORCH_THREADS", "1")
    assert tiny_cfg().base_key() == one  # the default is one thread
    monkeypatch.setenv("SEFFI_TORCH_THREADS", "2")
    assert tiny_cfg().base_key() != one


def test_importing_the_cache_and_computing_keys_does_not_import_torch():
    code = (
        "import sys\n"
        "import seffi.models.cache\n"
        "from seffi._cache import numerics_stack\n"
        "from seffi.models.config import LMConfig\n"
        f"cfg = LMConfig(**{tiny.TINY!r})\n"
        "numerics_stack()\n"
        "print(cfg.base_key(), cfg.mixture_key())\n"
        "print([m for m in ('torch', 'transformers', 'tokenizers', 'safetensors') if m in sys.modules])\n"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root)
    keys, imported = out.stdout.strip().splitlines()
    assert imported == "[]"
    cfg = tiny_cfg()
    assert keys == f"{cfg.base_key()} {cfg.mixture_key()}"  # the same key in another process


def test_every_cached_folder_records_the_stack_that_trained_it(trained):
    from seffi.models.lm import META_FILE

    assert cache_module.META_FILE == META_FILE
    for folder in (trained.base_dir, trained.mixture_dir):
        manifest = json.loads((folder / MANIFEST_FILE).read_text())
        assert manifest["stack"] == training_stack()
        assert stack_difference(folder) is None


def test_a_cached_folder_from_another_stack_is_retrained_with_one_warning_each(trained, cache):
    base, mix = cache / trained.base_dir.name, cache / trained.mixture_dir.name
    weights = {
        d: json.loads((d / MANIFEST_FILE).read_text())["files"]["model.safetensors"] for d in (base, mix)
    }
    here = training_stack()["torch"]
    for folder in (base, mix):
        _set_manifest_stack(folder, torch="2.12.0+cu126")
        assert manifest_problem(folder) is None  # intact files: only the stack tells it apart
    with pytest.warns(UserWarning, match="another library stack") as record:
        models = train_ladder_models(tiny_cfg(), cache)
    messages = [str(w.message) for w in record if "another library stack" in str(w.message)]
    assert len(messages) == 2
    for folder, message in zip((base, mix), messages, strict=True):
        assert f"model cache {folder} was trained on another library stack" in message
        assert f"torch 2.12.0+cu126 there, {here} here" in message and "retraining it" in message
    assert models.cached == {"base": False, "mixture": False}
    for folder in (base, mix):
        manifest = json.loads((folder / MANIFEST_FILE).read_text())
        assert manifest["stack"] == training_stack() and stack_difference(folder) is None
        # Retrained on this stack from the same config: the bits the folder held before its stack was changed.
        assert manifest["files"]["model.safetensors"] == weights[folder]


@pytest.mark.parametrize(
    "change, shown",
    [
        ({"cpu_capability": "AVX512_BF16"}, "cpu_capability AVX512_BF16 there, {cpu_capability} here"),
        ({"stack": None}, f"its {MANIFEST_FILE} names no library stack"),
    ],
)
def test_no_retrain_refuses_a_folder_from_another_stack_in_one_line(trained, cache, change, shown):
    base = cache / trained.base_dir.name
    _set_manifest_stack(base, **change)
    with pytest.raises(SeffiError) as info:
        train_ladder_models(tiny_cfg(), cache, retrain=False)
    message = str(info.value)
    assert "\n" not in message and f"model cache {base} was trained on another library stack" in message
    assert shown.format(**training_stack()) in message and "retrain it, or remove the folder" in message
    with pytest.raises(SeffiError, match="another library stack"):
        cached_base_folder(tiny_cfg(), cache, retrain=False)


def test_another_stack_trains_its_own_folders_and_leaves_this_stacks_alone(trained, cache, monkeypatch):
    manifests = {d.name: (d / MANIFEST_FILE).read_text() for d in cache.iterdir()}
    real = stack_module.numerics_stack()
    monkeypatch.setattr(stack_module, "numerics_stack", lambda: {**real, "torch": "9.9.9+rocm"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # this stack's folders are not this other stack's: no warning, no use
        other = train_ladder_models(tiny_cfg(), cache)
    assert other.cached == {"base": False, "mixture": False}
    assert other.base_dir.name != trained.base_dir.name and other.mixture_dir.name != trained.mixture_dir.name
    assert json.loads((other.base_dir / MANIFEST_FILE).read_text())["stack"]["torch"] == "9.9.9+rocm"
    kept = {d.name: (d / MANIFEST_FILE).read_text() for d in cache.iterdir() if d.name in manifests}
    assert kept == manifests
    monkeypatch.undo()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        back = train_ladder_models(tiny_cfg(), cache)
    assert back.cached == {"base": True, "mixture": True} and back.base_dir.name == trained.base_dir.name


def test_folders_keyed_without_the_stack_are_not_found(trained, tmp_path, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(LMConfig, "base_fields", _stack_free_base_fields)
        old = {"base": tiny_cfg().base_key(), "mixture": tiny_cfg().mixture_key()}
    old_base_fields = _stack_free_base_fields(tiny_cfg())
    assert old["base"] == f"edit_script-base-{stable_id(old_base_fields, length=16)}"
    assert old["base"] != tiny_cfg().base_key() and old["mixture"] != tiny_cfg().mixture_key()
    root = tmp_path / "old-cache"
    for kind, src in (("base", trained.base_dir), ("mixture", trained.mixture_dir)):
        shutil.copytree(src, root / old[kind])
        _set_manifest_stack(root / old[kind], stack=None)  # a manifest written before it recorded a stack
    folder = cached_base_folder(tiny_cfg(), root)
    assert folder.name == trained.base_dir.name and folder.name != old["base"]
    assert stack_difference(folder) is None and (root / old["base"]).is_dir()  # trained beside it
    monkeypatch.setattr(cache_module, "train_base", lambda *a, **k: pytest.fail("an intact folder retrained"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cached_base_folder(tiny_cfg(), root) == folder
