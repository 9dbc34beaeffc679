"""Importing seffi (and every subpackage) must never import torch or a training framework."""

import subprocess
import sys


def test_import_seffi_does_not_import_torch():
    code = (
        "import sys, seffi, seffi.tasks, seffi.coverage, seffi.envs, seffi.callbacks\n"
        "import seffi.report, seffi.lanes, seffi.cli\n"
        "import seffi.models, seffi.models.config, seffi.models.latent_env, seffi.experiment.ladder\n"
        "heavy = ('torch', 'stable_baselines3', 'ray', 'trl', 'transformers')\n"
        "heavy = [m for m in heavy if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
