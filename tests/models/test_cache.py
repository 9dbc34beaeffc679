"""The model cache: folders carry sha256 digests; a damaged folder is retrained or refused, never used."""

from __future__ import annotations

import json
import shutil
import warnings

import numpy as np
import pytest

from tests.helpers import require

# ruff: noqa: E402
require("torch", "lm")
require("transformers", "lm")

from seffi.errors import SeffiError
from seffi.models.cache import MANIFEST_FILE, load_ladder_models, manifest_problem, train_ladder_models
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
