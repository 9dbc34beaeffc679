"""CPU time to refuse hostile or malformed config input, side by side with its budget.

Prints, in one run, one row per input, each refused the way a user meets it:

* **loads_yaml(billion laughs)** — ``seffi.report.safe_load.loads_yaml`` on the 1.4 kB YAML of
  ``tests/report/test_safe_load.py`` that a plain ``yaml.safe_load`` expands to 9^9 strings (budget
  1 s); the row also shows the peak memory traced during the call (a separate run under
  ``tracemalloc``, cap 5 MB);
* **seffi run --config FILE --print-config** — ``seffi.cli.main`` on each bad config file of
  ``tests/experiment/test_bad_input.py`` (aliases, non-UTF-8 bytes, 50,000 levels of nesting in
  JSON and YAML, a duplicate key, a file over 1 MiB, bools and strings for numbers; budget 2 s each).

Each figure is the best of ``--repeats`` CPU times (``time.process_time``: a loaded machine slows
wall time, not CPU time) with the wall time of the same run beside it; every run is checked to exit 2
(or raise, for ``loads_yaml``) with the expected one-line message, so the times are of real refusals.
The inputs are imported from the two test modules, so the script needs the repository's ``tests``
folder and pytest.

    python benchmarks/bad_input.py                 # a few seconds
    python benchmarks/bad_input.py --repeats 10
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: CPU seconds allowed to refuse the billion-laughs YAML and one bad config file through the CLI.
YAML_BUDGET = 1.0
CONFIG_BUDGET = 2.0
#: Bytes of memory the billion-laughs refusal may trace.
YAML_MEMORY_CAP = 5e6


def best_of(fn: Callable[[], str], repeats: int) -> tuple[float, float, str]:
    """Best CPU seconds, best wall seconds and the last message of ``repeats`` calls of ``fn``."""
    cpu = wall = math.inf
    message = ""
    for _ in range(repeats):
        c, w = time.process_time(), time.perf_counter()
        message = fn()
        cpu, wall = min(cpu, time.process_time() - c), min(wall, time.perf_counter() - w)
    return cpu, wall, message


def refuse_yaml(text: str) -> str:
    """The one-line message ``loads_yaml`` refuses ``text`` with."""
    from seffi.errors import SeffiError
    from seffi.report.safe_load import loads_yaml

    try:
        loads_yaml(text, source="config file c.yaml")
    except SeffiError as exc:
        return str(exc)
    sys.exit("loads_yaml accepted the billion-laughs YAML")


def refuse_config(path: Path) -> str:
    """The stderr of ``seffi run --config path --print-config``, checked to exit 2."""
    from seffi.cli import main

    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(["run", "--config", str(path), "--print-config"])
    if code != 2:
        sys.exit(f"{path.name}: exit {code}, not 2: {err.getvalue()}")
    return err.getvalue().strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs per input, the best one kept")
    args = parser.parse_args()
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests.experiment.test_bad_input import CONFIG_CASES
    from tests.report.test_safe_load import LAUGHS

    print(f"best of {args.repeats} runs; CPU and wall seconds of the same run")
    print("| input | CPU s | wall s | budget s | CPU / budget | one-line message as expected |")
    print("|---|---|---|---|---|---|")
    cpu, wall, message = best_of(lambda: refuse_yaml(LAUGHS), args.repeats)
    tracemalloc.start()
    try:
        refuse_yaml(LAUGHS)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    ok = "\n" not in message and "aliases (*a) are not allowed" in message
    print(
        f"| loads_yaml(billion laughs), {peak / 1e6:.2f} MB traced (cap {YAML_MEMORY_CAP / 1e6:.0f} MB) | "
        f"{cpu:.4f} | {wall:.4f} | {YAML_BUDGET:.0f} | {cpu / YAML_BUDGET:.2g} | {'yes' if ok else 'NO'} |"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for name, content, needle in CONFIG_CASES:
            path = Path(tmp) / name
            path.write_bytes(content if isinstance(content, bytes) else content.encode())
            cpu, wall, message = best_of(lambda p=path: refuse_config(p), args.repeats)
            ok = len(message.splitlines()) == 1 and needle in message and "not valid YAML" not in message
            print(
                f"| seffi run --config {name} --print-config | {cpu:.4f} | {wall:.4f} | "
                f"{CONFIG_BUDGET:.0f} | {cpu / CONFIG_BUDGET:.2g} | {'yes' if ok else 'NO'} |"
            )


if __name__ == "__main__":
    main()
