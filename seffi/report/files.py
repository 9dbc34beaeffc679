"""report.json on disk: deterministic serialisation, bounded loading, and rendering a run folder."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from seffi._io import write_atomic
from seffi.errors import SeffiError
from seffi.report.markdown import render_markdown
from seffi.report.plots import DPI, check_format, render_report_plots
from seffi.report.run_folder import refuse_links
from seffi.report.safe_load import load_json_file
from seffi.report.schema import SCHEMA_VERSION, Report

if TYPE_CHECKING:
    from seffi.report.render import PlotRenderer

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
    touches its only copy; a ``renderer`` (`seffi.report.render.PlotRenderer`) draws the plots in a
    child process.

    Returns:
        ``{name: path}`` of every file written (a plot is named like ``"<slug>/coverage"``).

    Raises:
        SeffiError: ``out_dir`` cannot be created or written, or ``format`` is unknown.
    """
    out = Path(out_dir)
    if plots:
        check_format(format)  # before anything is written
    text = dumps_report(report) if report_json or renderer is not None else ""
    try:
        out.mkdir(parents=True, exist_ok=True)
        refuse_links(out)  # seffi report must not write its plots through a link to another folder
        if report_json:
            write_atomic(out / REPORT_JSON, text)
    except OSError as exc:
        raise SeffiError(f"cannot write the report to {out}: {exc.strerror or exc}") from None
    files: dict[str, Path] = {REPORT_JSON: out / REPORT_JSON}
    plot_files: dict[str, Path] = {}
    if plots:
        try:
            if renderer is not None:
                plot_files = renderer.plots(report, text, out)
            else:
                plot_files = render_report_plots(report, out, format=format, dpi=dpi)
        except OSError as exc:  # a full disk or an unwritable plots/ folder: what was written stays valid
            raise SeffiError(f"cannot write the plots to {out}: {exc.strerror or exc}") from None
        files.update(plot_files)
    if markdown:
        rel = {name: p.relative_to(out).as_posix() for name, p in plot_files.items()}
        try:
            write_atomic(out / REPORT_MD, render_markdown(report, rel))
        except OSError as exc:
            raise SeffiError(f"cannot write {REPORT_MD} to {out}: {exc.strerror or exc}") from None
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
