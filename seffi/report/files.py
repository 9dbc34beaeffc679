"""report.json on disk: deterministic serialisation, bounded loading, and rendering a run folder.

Drawing a report's figures is most of what a run does when it ends: a `PlotRenderer` starts a child
process early (it imports matplotlib while training runs, on another core), draws the final report's
plots there and hands over the files; anything that goes wrong there draws them in this process.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from pydantic import ValidationError

from seffi._io import write_atomic
from seffi.errors import SeffiError
from seffi.report import plots
from seffi.report.markdown import render_markdown
from seffi.report.plots import DPI, check_format, render_report_plots
from seffi.report.run_folder import refuse_links
from seffi.report.safe_load import load_json_file, os_errors
from seffi.report.schema import SCHEMA_VERSION, Report

#: Caps when reading a report.json (a large real run writes a few MB at a nesting depth below 12).
MAX_REPORT_BYTES = 512 * 2**20
MAX_REPORT_DEPTH = 64
REPORT_JSON = "report.json"
REPORT_MD = "report.md"


def dumps_report(report: Report) -> str:
    """Serialise deterministically: sorted keys, 2-space indent, shortest float repr, trailing newline."""
    try:
        text = json.dumps(
            report.model_dump(mode="json"), sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False
        )
    except ValueError as exc:  # NaN/inf hidden in config or meta
        raise SeffiError(f"report holds a non-finite number ({exc}); use null for missing values") from exc
    return text + "\n"


def write_report(
    out_dir: str | Path,
    report: Report,
    *,
    plots: bool = True,
    markdown: bool = True,
    report_json: bool = True,
    format: str = "png",
    dpi: int = DPI,
    renderer: PlotRenderer | None = None,
) -> dict[str, Path]:
    """Write report.json, the plots (``format``, ``dpi``) and report.md into ``out_dir`` (created if needed).

    ``report_json=False`` re-renders plots and report.md from a report already on disk and never
    touches its only copy; a ``renderer`` (`PlotRenderer`) draws the plots in a child process.

    Returns:
        ``{name: path}`` of every file written (a plot is named like ``"<slug>/coverage"``).

    Raises:
        SeffiError: ``out_dir`` cannot be created or written, or ``format`` is unknown.
    """
    out = Path(out_dir)
    if plots:
        check_format(format)  # before anything is written
    text = dumps_report(report) if report_json or renderer is not None else ""
    with os_errors(f"cannot write the report to {out}"):
        out.mkdir(parents=True, exist_ok=True)
        refuse_links(out)  # seffi report must not write its plots through a link to another folder
        if report_json:
            write_atomic(out / REPORT_JSON, text)
    files: dict[str, Path] = {REPORT_JSON: out / REPORT_JSON}
    plot_files: dict[str, Path] = {}
    if plots:
        # A full disk or an unwritable plots/ folder: what was written stays valid.
        with os_errors(f"cannot write the plots to {out}"):
            if renderer is not None:
                plot_files = renderer.plots(report, text, out)
            else:
                plot_files = render_report_plots(report, out, format=format, dpi=dpi)
        files.update(plot_files)
    if markdown:
        rel = {name: p.relative_to(out).as_posix() for name, p in plot_files.items()}
        with os_errors(f"cannot write {REPORT_MD} to {out}"):
            write_atomic(out / REPORT_MD, render_markdown(report, rel))
        files[REPORT_MD] = out / REPORT_MD
    return files


def load_report(path: str | Path) -> Report:
    """Load a report from a run folder (or a report.json path).

    Raises:
        SeffiError: the file is missing, is not JSON, or does not match the schema.
    """
    p = Path(path)
    file = p / REPORT_JSON if p.is_dir() else p
    if not file.is_file():
        raise SeffiError(f"no {REPORT_JSON} in {p} (is this a seffi run folder?)")
    # Bounded: a hand-edited or hostile report.json is one error line, never a RecursionError.
    data = load_json_file(file, what="report", max_bytes=MAX_REPORT_BYTES, max_depth=MAX_REPORT_DEPTH)
    if not isinstance(data, Mapping):
        raise SeffiError(f"{file} does not hold a JSON object")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise SeffiError(f"{file} has schema_version {version!r}; this seffi reads {SCHEMA_VERSION}")
    try:
        return Report.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first.get("loc", ())) or "the top level"
        msg = str(first.get("msg", "")).removeprefix("Value error, ")
        raise SeffiError(f"{file} does not match the report schema at {where}: {msg}") from None


class PlotRenderer:
    """A child process that draws one report's PNG plots (at screen resolution) while the caller goes on."""

    def __init__(self) -> None:
        self._submitted: str | None = None
        self._folder = tempfile.mkdtemp(prefix="seffi-plots-")
        # The child finds this seffi even when the caller put it on sys.path by hand.
        root = str(Path(__file__).resolve().parents[2])
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p),
        }
        main = "import sys; from seffi.report.files import _main; sys.exit(_main(sys.argv[1:]))"
        args = [sys.executable, "-c", main, self._folder, str(os.getpid())]
        try:
            self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
            )
        except OSError:  # no child process here: `plots` draws in this process
            self._proc = None
        atexit.register(self.close)  # a run that never reached `plots` leaves no process or folder

    def submit(self, report_json: str) -> None:
        """Start drawing ``report_json`` (as ``dumps_report`` writes it); only the first call does."""
        proc = self._proc
        if proc is None or self._submitted is not None or proc.stdin is None:
            return
        self._submitted = report_json
        try:  # through a file: a pipe holds 64 KiB, and the child may still be importing matplotlib
            write_atomic(Path(self._folder) / REPORT_JSON, report_json)
            proc.stdin.write(b"render\n")
            proc.stdin.flush()
        except OSError:  # a full disk, or the child is gone: `plots` draws in this process
            self.close()

    def plots(self, report: Report, report_json: str, out_dir: str | Path) -> dict[str, Path]:
        """The plots of ``report`` written under ``out_dir/plots/``, as ``render_report_plots`` returns them.

        Waits for the child when it drew this very report; otherwise, or when it failed, draws here.

        Raises:
            OSError: A plot file cannot be written (as ``render_report_plots``).
        """
        if self._submitted is None:
            self.submit(report_json)
        drawn = self._drawn() if self._submitted == report_json else None
        # Too many comparisons: their warning is this process's.
        if drawn is None or len(report.comparisons) > plots.PLOTTED_COMPARISONS:
            self.close()
            return render_report_plots(report, out_dir)
        out = Path(out_dir) / plots.PLOTS_DIR
        out.mkdir(parents=True, exist_ok=True)
        files = {}
        for name, file in drawn.items():
            target = files[name] = out / Path(file).name
            try:  # the child wrote (and synced) the file: a rename on one file system
                os.replace(file, target)
            except OSError:  # another file system
                write_atomic(target, Path(file).read_bytes())
        self.close()
        cover = files.get(f"{report.slugs()[0]}/coverage") if report.comparisons else None
        if cover is not None:  # a W&B chart image of the same comparison reuses the file
            plots.remember_coverage(plots.figure_safe(report.comparisons[0]), cover)
        return files

    def _drawn(self) -> dict[str, str] | None:
        """``{name: file in the private folder}`` the child drew, or None when it failed."""
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        out, err = proc.communicate()
        if err and proc.returncode == 0:  # matplotlib's warnings, say, reach the user as before
            sys.stderr.write(err.decode("utf-8", "replace"))
        if proc.returncode != 0:
            return None
        try:
            drawn = json.loads(out)
        except ValueError:
            return None
        return drawn if isinstance(drawn, dict) else None

    def close(self) -> None:
        """Stop the child (if it still runs) and delete its folder; idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.kill()
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                with contextlib.suppress(OSError):  # a pipe to a killed child may fail to flush
                    pipe.close()  # type: ignore[union-attr]
            proc.wait()
        shutil.rmtree(self._folder, ignore_errors=True)
        atexit.unregister(self.close)


def _warm_up() -> None:
    """While the parent trains: load matplotlib, its fonts and mathtext parser by drawing a small figure.

    Its axis labels are those of most plots, at their size: the report's figures find them parsed.
    """
    fig = plots._figure((2.0, 2.0))
    ax = fig.subplots()
    ax.plot([1, 2], [0, 1], label="policy")
    ax.set(xlabel=plots.BUDGET, ylabel=plots.SAMPLE_INDEX, title=plots.AUC_GAIN)
    plots.finish(fig, "warm-up", ax.get_legend_handles_labels())
    fig.canvas.draw()


def _main(argv: list[str]) -> int:
    """The child: on a line from stdin, draw the plots of ``argv[0]/report.json``; print ``{name: file}``."""
    folder = argv[0]
    _warm_up()
    parent = int(argv[1])  # not os.getppid() here: the parent may have died while this one started
    if not sys.stdin.readline():  # the parent ended (or was killed) without a report
        shutil.rmtree(folder, ignore_errors=True)
        return 0
    try:
        report = Report.model_validate_json((Path(folder) / REPORT_JSON).read_bytes())
        files = render_report_plots(report, Path(folder) / "out")
        json.dump({name: str(path) for name, path in files.items()}, sys.stdout)
        sys.stdout.flush()
        sys.stdin.read()  # the parent has copied the files when it closes this input (or it died)
    finally:
        if os.getppid() != parent:  # the parent died (killed): nobody collects the files
            shutil.rmtree(folder, ignore_errors=True)
    return 0
