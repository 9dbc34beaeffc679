"""The integration-test guard: a missing extra skips its whole module."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run_pytest_on(tmp_path: Path, body: str, *, require_extras: bool) -> subprocess.CompletedProcess:
    test_file = tmp_path / "test_needs_extra.py"
    test_file.write_text(textwrap.dedent(body))
    # A core test beside it, as in the real suite: the run as a whole must pass.
    (tmp_path / "test_core_only.py").write_text("def test_core():\n    assert 1 + 1 == 2\n")
    env = {k: v for k, v in os.environ.items() if k != "SEFFI_REQUIRE_EXTRAS"}
    env["PYTHONPATH"] = str(ROOT)
    if require_extras:
        env["SEFFI_REQUIRE_EXTRAS"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


MODULE_LEVEL = """
    from tests.helpers import require

    missing = require("seffi_no_such_module_for_tests", "sb3")

    def test_uses_it():
        assert missing is not None
"""


def test_missing_extra_skips_the_module_with_a_reason(tmp_path):
    """A module-level require() skips the module on a core-only install, never a collection error."""
    result = _run_pytest_on(tmp_path, MODULE_LEVEL, require_extras=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed, 1 skipped" in result.stdout
    assert "error" not in result.stdout.lower()
    assert "needs the 'sb3' extra" in result.stdout


def test_missing_extra_fails_when_ci_requires_extras(tmp_path):
    """CI's all-extras stage must fail, not skip, when an extra is missing."""
    result = _run_pytest_on(tmp_path, MODULE_LEVEL, require_extras=True)
    assert result.returncode != 0
    assert "needs the 'sb3' extra" in result.stdout


def test_tests_of_modules_that_need_an_extra_carry_the_integration_marker(request):
    """A module calling `require` at import is recorded (a call inside a test body is not), and each
    collected test of a recorded module is marked ``integration``, so ``-m "not integration"`` leaves
    out every test module that needs an extra."""
    import types

    from tests.helpers import NEEDS_EXTRA, require

    module = types.ModuleType("tests.needs_json")
    exec("from tests.helpers import require\nrequire('json', 'core')\n", module.__dict__)
    require("json", "core")
    assert "tests.needs_json" in NEEDS_EXTRA and __name__ not in NEEDS_EXTRA
    NEEDS_EXTRA.discard("tests.needs_json")
    collected = [i for i in request.session.items if getattr(i.module, "__name__", None) in NEEDS_EXTRA]
    assert all(item.get_closest_marker("integration") for item in collected)
