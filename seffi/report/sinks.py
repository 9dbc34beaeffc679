"""Where logged numbers go: a local folder (always) and W&B (optional, never fatal), and the closing lines."""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import tempfile
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Union, runtime_checkable

from seffi._convert import json_default
from seffi._io import append_line, drop_lines_after, drop_partial_line, write_atomic
from seffi.coverage import state as states
from seffi.errors import SeffiError
from seffi.report import keys
from seffi.report.caveats import console_lines, summary_notes
from seffi.report.files import PlotRenderer, dumps_report, load_report, write_report
from seffi.report.plots import save_coverage
from seffi.report.run_folder import (
    claim_run_folder,
    fresh_out_dir,
    holds_claim,
    refuse_links,
    release_run_folder,
)
from seffi.report.safe_load import os_errors
from seffi.report.schema import Comparison, Report
from seffi.report.tensorboard import TensorBoardSink
from seffi.report.wandb_run import Mode, SafeWandbRun, check_init_arguments, display_path, wandb_mode

if TYPE_CHECKING:
    from seffi.coverage.tracker import CoverageTracker

#: A tracker state for the sinks: JSON-safe data (``state_dict()``), or to a sink with ``takes_tracker``
#: the tracker itself, written as it is read (no copy of its state in memory).
TrackerState = Union[Mapping[str, Any], "CoverageTracker"]  # Union: "X | str" fails at run time

TRACKER_STATE_JSON = "tracker_state.json"


@runtime_checkable
class Sink(Protocol):
    """What the callbacks and ``seffi run`` log to."""

    def log(self, data: Mapping[str, Any], step: int) -> None:
        """Log scalars at ``step``."""

    def log_snapshot(self, comparison: Comparison, step: int, scope: str | None = None) -> None:
        """Log a curve snapshot of one comparison."""

    def finish(self, report: Report | None = None, tracker_state: TrackerState | None = None) -> None:
        """Write final results and close."""


def state_for(sink: Any, state: TrackerState) -> TrackerState:
    """``state`` as ``sink`` takes it: the tracker if it says ``takes_tracker``, else ``state_dict()``."""
    if isinstance(state, Mapping) or getattr(sink, "takes_tracker", False):
        return state
    return state.state_dict()


def _state_text(state: TrackerState) -> Iterable[str]:
    """tracker_state.json in pieces: a tracker's state read a slice of rows at a time (`state.text`)."""
    if not isinstance(state, Mapping):
        return states.text(state)
    return [json.dumps(state, sort_keys=True, separators=(",", ":"), default=json_default) + "\n"]


class LocalSinkWarning(RuntimeWarning):
    """A local file did not fit (a full disk, a file-size limit): training went on, the lines were kept."""


class LocalSink:
    """Always-on local sink: metrics.jsonl, snapshots.jsonl, and at ``finish`` the state and report files.

    It holds the folder's lock and never writes through a symbolic link. A full disk never stops
    training: one warning, and the lines that do not fit wait in memory for a later write that fits.

    Args:
        out_dir: the run folder (created).
        plots: render PNG plots at ``finish``.

    Raises:
        SeffiError: ``out_dir`` is not writable, held by another live process, or holds a link.
    """

    def __init__(self, out_dir: str | Path, *, plots: bool = True) -> None:
        self.out_dir = Path(out_dir)
        self.plots = plots
        self.metrics_path = self.out_dir / "metrics.jsonl"
        self.snapshots_path = self.out_dir / "snapshots.jsonl"
        self._renderer: PlotRenderer | None = None
        self.files: dict[str, Path] = {}
        self._handles: dict[Path, Any] = {}  # path -> open binary file (append mode, unbuffered)
        self._backlog: dict[Path, list[str]] = {}  # lines a full disk refused, in order
        self._warned = False
        self._own_lock = False
        try:
            with os_errors(f"cannot write to the output folder {self.out_dir}"):
                self.out_dir.mkdir(parents=True, exist_ok=True)
                self._own_lock = not holds_claim(self.out_dir)  # a command's folder stays the command's
                claim_run_folder(self.out_dir)
                refuse_links(self.out_dir)
                self._handle(self.metrics_path)  # an empty metrics.jsonl marks a run that has not logged yet
        except SeffiError:
            self._release()
            raise

    def _handle(self, path: Path) -> Any:
        fh = self._handles.get(path)
        if fh is None or fh.closed:
            # O_NOFOLLOW: a metrics.jsonl that is a link to another file is refused (ELOOP), not appended to.
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o666)
            drop_partial_line(fd)
            fh = self._handles[path] = os.fdopen(fd, "ab", buffering=0)
        return fh

    def _append(self, path: Path, record: Mapping[str, Any]) -> None:
        self._backlog.setdefault(path, []).append(json.dumps(record, sort_keys=True, default=json_default))
        self._write_backlog()

    def _write_backlog(self) -> bool:
        """Write the lines kept in memory, oldest first; False (lines kept) on a full disk."""
        for path, lines in self._backlog.items():
            try:
                fh = self._handle(path)
                while lines:
                    append_line(fh, lines[0])  # cut back to the last whole line when it fails
                    del lines[0]
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise SeffiError(f"{path} is a symbolic link: seffi never writes through one") from None
                self._disk_full(f"cannot write {path.name} to {self.out_dir}: {exc.strerror or exc}")
                return False
        return True

    def _disk_full(self, what: str) -> None:
        if not self._warned:
            self._warned = True
            warnings.warn(
                f"{what}; training goes on, and seffi keeps what it measures in memory and writes it at "
                "the next checkpoint that fits, or when the run ends",
                LocalSinkWarning,
                stacklevel=5,
            )

    def close(self) -> None:
        """Close the open files (a later log reopens them)."""
        for fh in self._handles.values():
            fh.close()
        self._handles.clear()

    def cut_after(self, key: str, value: float) -> tuple[int, int | None]:
        """Drop what a killed run logged after its checkpoint; (logs kept, the last one's step or None).

        Metrics lines whose ``key`` is above ``value`` go, then the snapshots after the last step kept.
        """
        self.close()  # the files are replaced: a later log appends to the new ones
        drop_lines_after(self.metrics_path, key, value)
        steps = []
        for line in self.metrics_path.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError, TypeError, KeyError):  # a line seffi did not write
                steps.append(int(json.loads(line)[keys.STEP_KEY]))
        drop_lines_after(self.snapshots_path, "step", steps[-1] if steps else -math.inf)
        return len(steps), steps[-1] if steps else None

    def _release(self) -> None:
        self.close()
        if self._renderer is not None:
            self._renderer.close()
        if self._own_lock:
            release_run_folder(self.out_dir)

    def log(self, data: Mapping[str, Any], step: int) -> None:
        """Append one record (every step kept, in call order)."""
        self._append(self.metrics_path, {keys.STEP_KEY: int(step), **data})

    def log_snapshot(self, comparison: Comparison, step: int, scope: str | None = None) -> None:
        """Append the whole comparison (curves as lists) to snapshots.jsonl."""
        data = comparison.model_dump(mode="json")
        self._append(self.snapshots_path, {"step": int(step), "scope": scope, "comparison": data})

    def _write_state(self, tracker_state: TrackerState) -> None:
        path = self.out_dir / TRACKER_STATE_JSON
        with os_errors(f"cannot write {path}"):
            write_atomic(path, _state_text(tracker_state))
        self.files[TRACKER_STATE_JSON] = path

    def start_renderer(self) -> None:
        """Start the child process that draws the plots at `finish` (`PlotRenderer`)."""
        if self.plots and self._renderer is None:
            self._renderer = PlotRenderer()

    def render_ahead(self, report: Report) -> None:
        """Start drawing the plots of ``report`` in the child; `finish` of an equal report waits for them."""
        if self.plots:
            self.start_renderer()
            assert self._renderer is not None
            self._renderer.submit(dumps_report(report))

    def finish(self, report: Report | None = None, tracker_state: TrackerState | None = None) -> None:
        """Write the kept lines, tracker_state.json, report.json, report.md and the plots; release the folder.

        Raises:
            SeffiError: One line naming what did not fit (a full disk); what fitted is written whole.
        """
        failed = []
        try:
            if not self._write_backlog():
                unwritten = sum(map(len, self._backlog.values()))
                failed.append(f"{unwritten} lines of metrics.jsonl / snapshots.jsonl did not fit")
            try:
                if tracker_state is not None:
                    self._write_state(tracker_state)
                if report is not None:
                    files = write_report(self.out_dir, report, plots=self.plots, renderer=self._renderer)
                    self.files.update(files)
            except SeffiError as exc:
                failed.append(str(exc))
        finally:
            self._release()
        if failed:
            raise SeffiError("; ".join(failed) + " (the files written before are whole)")

    def checkpoint(self, report: Report, tracker_state: TrackerState) -> None:
        """Write tracker_state.json and report.json of a run in progress (a full disk: one warning)."""
        self._write_backlog()
        try:
            self._write_state(tracker_state)
            self.files.update(write_report(self.out_dir, report, plots=False, markdown=False))
        except SeffiError as exc:
            self._disk_full(str(exc))


class WandbSink:
    """W&B sink following the key scheme; never raises into training.

    Args:
        run: a [`SafeWandbRun`][seffi.report.SafeWandbRun]; when None one is started with ``mode``.
        mode: W&B mode when starting a run.
        log_curves_every: turn every n-th ``log_snapshot`` of each scope (the first included) into a
            ``line_series`` table and (with ``log_images``) a coverage image.
        log_images: also log the coverage figure as an image with each snapshot.
        **run_kwargs: passed on to the `SafeWandbRun` it starts (``project``, ``name``, ``dir``, ...).
    """

    takes_tracker = True

    def __init__(
        self,
        run: SafeWandbRun | None = None,
        *,
        mode: Mode = "offline",
        log_curves_every: int = 10,
        log_images: bool = True,
        **run_kwargs: Any,
    ) -> None:
        if type(log_curves_every) is not int or log_curves_every < 1:
            raise SeffiError(f"log_curves_every must be a positive int, got {log_curves_every!r}")
        self.run = run if run is not None else SafeWandbRun(mode=mode, **run_kwargs)
        self.log_curves_every = log_curves_every
        self.log_images = log_images
        self._snapshot_calls: dict[str | None, int] = {}  # per scope
        # The final chart's image (comparison, step, scope), drawn at this sink's next call.
        self._final_image: tuple[Comparison, int, str | None] | None = None
        self.run.define_step_metric()

    @property
    def enabled(self) -> bool:
        """False once W&B failed or when disabled."""
        return self.run.enabled

    def log(self, data: Mapping[str, Any], step: int) -> None:
        """Scalars at ``step`` (out-of-order steps are dropped with one warning)."""
        self._log_final_image()
        self.run.log(data, step)

    def log_snapshot(self, comparison: Comparison, step: int, scope: str | None = None) -> None:
        """Every ``log_curves_every``-th call: coverage ``line_series`` (+ image) of all curve sets."""
        self._log_final_image()
        call = self._snapshot_calls.get(scope, 0)
        self._snapshot_calls[scope] = call + 1
        if call % self.log_curves_every or not self.run.enabled:
            return
        self._curves(comparison, step, scope, image=self.log_images)

    def log_final_curves(
        self, comparison: Comparison, step: int | None = None, scope: str | None = None, *, image: bool = True
    ) -> None:
        """The final coverage chart of a comparison, under the key of the curve snapshots.

        With ``image`` the coverage plot goes to ``.../curves/coverage_plot`` at ``step`` (default: the
        last one), drawn at this sink's next call: at `finish` the local sink's figure is reused.
        """
        self._log_final_image()
        if self.run.enabled:
            self._curves(comparison, step, scope, image=False)
            if image and self.log_images and comparison.curve_sets():
                at = step if step is not None else (self.run.last_step or 0)
                self._final_image = (comparison, at, scope)

    def _log_final_image(self) -> None:
        pending, self._final_image = self._final_image, None
        if pending is not None and self.run.enabled:
            self._image(*pending)

    def _curves(self, comparison: Comparison, step: int | None, scope: str | None, *, image: bool) -> None:
        sets = comparison.curve_sets()
        if not sets:
            return
        # line_series needs one shared x axis: that of the first set (lines on other grids skip).
        ys = {c.label: c.coverage for c in sets if c.k == sets[0].k}
        self.run.log_line_series(
            keys.curves_key("coverage", scope), sets[0].k, ys, _chart_title(comparison), "k", step
        )
        if image:
            self._image(comparison, step if step is not None else (self.run.last_step or 0), scope)

    def _image(self, comparison: Comparison, step: int, scope: str | None) -> None:
        with tempfile.TemporaryDirectory(prefix="seffi-img-") as tmp:
            png = save_coverage(comparison, Path(tmp) / "coverage.png")  # wandb.Image copies it at log time
            self.run.log_image(
                keys.curves_key("coverage_plot", scope), png, step, caption=_chart_title(comparison)
            )

    def finish(self, report: Report | None = None, tracker_state: TrackerState | None = None) -> None:
        """Final chart image, ``run.summary``, report.json + tracker state as one artifact; finish."""
        self._log_final_image()
        if report is not None:
            self.run.update_summary({**keys.report_scalars(report), **summary_notes(report)})
        if self.run.enabled and (report is not None or tracker_state is not None):
            texts = {
                "report.json": None if report is None else [dumps_report(report)],
                TRACKER_STATE_JSON: None if tracker_state is None else _state_text(tracker_state),
            }
            with tempfile.TemporaryDirectory(prefix="seffi-art-") as tmp:
                paths = [Path(tmp) / name for name, text in texts.items() if text is not None]
                for path in paths:
                    with path.open("w", encoding="utf-8") as fh:
                        fh.writelines(texts[path.name])
                one = report is not None and len(report.comparisons) == 1
                name = f"seffi-report-{report.comparisons[0].slug}" if one else "seffi-report"  # type: ignore[union-attr]
                self.run.log_artifact(name, "seffi-report", paths)  # add_file copies at call time
        self.run.finish()


def _chart_title(comparison: Comparison) -> str:
    return f"{comparison.task}: coverage C(k), K={comparison.budget}"


class MultiSink:
    """Fan-out to several sinks, in order (put the local sink first so its files exist before W&B's)."""

    takes_tracker = True

    def __init__(self, sinks: Sequence[Sink]) -> None:
        self.sinks = list(sinks)

    @property
    def local(self) -> LocalSink | None:
        """The first [`LocalSink`][seffi.report.LocalSink], if any."""
        return next((s for s in self.sinks if isinstance(s, LocalSink)), None)

    @property
    def wandb(self) -> WandbSink | None:
        """The first [`WandbSink`][seffi.report.WandbSink], if any."""
        return next((s for s in self.sinks if isinstance(s, WandbSink)), None)

    def _each(self, method: str, *args: Any, **kwargs: Any) -> None:
        for s in self.sinks:
            call = getattr(s, method, None)
            if call is not None:
                call(*args, **kwargs)

    def log(self, data: Mapping[str, Any], step: int) -> None:
        self._each("log", data, step)

    def log_snapshot(self, comparison: Comparison, step: int, scope: str | None = None) -> None:
        self._each("log_snapshot", comparison, step, scope)

    def log_final_curves(
        self, comparison: Comparison, step: int | None = None, scope: str | None = None, *, image: bool = True
    ) -> None:
        self._each("log_final_curves", comparison, step, scope, image=image)

    def _with_state(self, sinks: Iterable[Any], state: TrackerState | None) -> Iterator[tuple[Any, Any]]:
        """Each of ``sinks`` with ``state`` as it takes it (`state_for`), ``state_dict()`` made once."""
        data = None
        for sink in sinks:
            if state is None or isinstance(state, Mapping) or getattr(sink, "takes_tracker", False):
                yield sink, state
            else:
                data = state.state_dict() if data is None else data
                yield sink, data

    def finish(self, report: Report | None = None, tracker_state: TrackerState | None = None) -> None:
        """Finish every sink (the local one first); a sink's `SeffiError` is raised once all have finished."""
        error: SeffiError | None = None
        for sink, state in self._with_state(self.sinks, tracker_state):
            try:
                sink.finish(report, state)
            except SeffiError as exc:  # a full disk must not leave the W&B run open
                error = error or exc
        if error is not None:
            raise error

    def start_renderer(self) -> None:
        self._each("start_renderer")

    def render_ahead(self, report: Report) -> None:
        self._each("render_ahead", report)

    def checkpoint(self, report: Report, tracker_state: TrackerState) -> None:
        saving = (s for s in self.sinks if hasattr(s, "checkpoint"))
        for sink, state in self._with_state(saving, tracker_state):
            sink.checkpoint(report, state)


class NullSink:
    """Drops everything: the sink of a worker's tracker replica (RLlib env runner, non-main TRL process).

    Not a `MultiSink`: a monitor asks its sinks for ``checkpoint`` and ``render_ahead`` and must find
    none here, or a replica would build reports only to drop them.
    """

    takes_tracker = True

    def log(self, data: Mapping[str, Any], step: int) -> None: ...

    def log_snapshot(self, comparison: Comparison, step: int, scope: str | None = None) -> None: ...

    def finish(self, report: Report | None = None, tracker_state: TrackerState | None = None) -> None: ...


class ForwardingSink:
    """Forwards logs to a run's shared sinks but leaves ``finish`` to the run's owner (``seffi run``'s tasks).

    With a ``scope`` (``<task>/train``), each log also carries the scope's own step axis
    ``seffi/<scope>/step`` = ``step - start`` (``seffi/step`` counts over all scopes).
    """

    takes_tracker = True

    def __init__(self, sinks: Sink, scope: str | None = None, start: int = 0) -> None:
        self.sinks, self.start = sinks, int(start)
        self.step_key = keys.step_key(scope) if scope else None
        wandb = getattr(sinks, "wandb", None)
        if self.step_key is not None and wandb is not None:
            wandb.run.add_step_axis(scope)

    def log(self, data: Mapping[str, Any], step: int) -> None:
        if self.step_key is not None:
            data = {**data, self.step_key: float(int(step) - self.start)}
        self.sinks.log(data, step)

    def log_snapshot(self, comparison: Comparison, step: int, scope: str | None = None) -> None:
        self.sinks.log_snapshot(comparison, step, scope)

    def log_final_curves(
        self, comparison: Comparison, step: int | None = None, scope: str | None = None, *, image: bool = True
    ) -> None:
        if hasattr(self.sinks, "log_final_curves"):
            self.sinks.log_final_curves(comparison, step, scope, image=image)

    def finish(
        self, report: Report | None = None, tracker_state: TrackerState | None = None
    ) -> None: ...  # the owner of the run finishes the shared sinks once


def default_sinks(
    out_dir: str | Path,
    *,
    wandb: Mode = "offline",
    run: Any = None,
    log_curves_every: int = 10,
    plots: bool = True,
    tensorboard: bool = False,
    **run_kwargs: Any,
) -> MultiSink:
    """The standard pair: [`LocalSink`][seffi.report.LocalSink] (always) then `WandbSink` (unless disabled).

    Args:
        out_dir: local run folder.
        wandb: "offline" (default), "online" or "disabled".
        run: an existing ``wandb`` run (or [`SafeWandbRun`][seffi.report.SafeWandbRun]) to log into.
        log_curves_every: see [`WandbSink`][seffi.report.WandbSink].
        plots: render the plots into ``out_dir`` at ``finish``.
        tensorboard: also a [`TensorBoardSink`][seffi.report.tensorboard.TensorBoardSink] in ``out_dir/tb``.
        **run_kwargs: ``wandb.init`` arguments (``project``, ``dir``, ``name``, ...).
    """
    # First: without tensorboardX the error comes before any folder or W&B run is made.
    if wandb != "disabled" and not isinstance(run, SafeWandbRun):
        check_init_arguments(run_kwargs)
    board = TensorBoardSink(Path(out_dir) / "tb") if tensorboard else None
    sinks: list[Sink] = [LocalSink(out_dir, plots=plots)]
    if isinstance(run, SafeWandbRun) or wandb != "disabled":
        safe = run if isinstance(run, SafeWandbRun) else SafeWandbRun(mode=wandb, run=run, **run_kwargs)
        sinks.append(WandbSink(safe, log_curves_every=log_curves_every))
    return MultiSink(sinks if board is None else [*sinks, board])


def own_sinks(
    out_dir: str | Path | None,
    wandb: str | None,
    plots: bool,
    wandb_kwargs: Mapping[str, Any],
    *,
    reuse: bool = False,
    names: Sequence[str] = ("local", "wandb"),
) -> tuple[Path, Sink]:
    """(folder, sinks) of a callback: `default_sinks` in a fresh folder (``reuse``: a resumed run's own).

    ``wandb`` None reads ``WANDB_MODE``; ``names`` adds W&B (``"wandb"``) and TensorBoard (``"tensorboard"``).
    """
    folder = Path(out_dir) if reuse and out_dir is not None else fresh_out_dir(out_dir)
    mode = wandb_mode(wandb) if "wandb" in names else "disabled"
    # The caller decides which logs are curve snapshots: every snapshot it sends is one.
    board = "tensorboard" in names
    return folder, default_sinks(
        folder, wandb=mode, log_curves_every=1, plots=plots, tensorboard=board, **wandb_kwargs
    )


def closing_lines(
    out_dir: str | Path | None,
    wandb: SafeWandbRun | WandbSink | None = None,
    *,
    contents: str = "report.json, report.md, plots",
    seconds: float | None = None,
    prefix: str = "",
    report: Report | None = None,
    unwritten: bool = False,
) -> list[str]:
    """What a finished run prints at the end: its caveats, its folder, and how to upload its W&B run.

    Args:
        out_dir: The local report folder (None: no folder line).
        wandb: The run's W&B sink or [`SafeWandbRun`][seffi.report.SafeWandbRun] (None: none of seffi's).
        contents: What the folder holds, in words.
        seconds: Wall time, added to the folder line when given.
        prefix: Put before each line (``"[seffi] "`` inside a training log).
        report: The final report, for its caveats; None reads ``out_dir/report.json`` when there is one.
        unwritten: The report files did not fit (a full disk): the folder line says so.
    """
    run = wandb.run if isinstance(wandb, WandbSink) else wandb
    if report is None and out_dir is not None and (Path(out_dir) / "report.json").is_file():
        with contextlib.suppress(Exception):  # a closing message never fails a finished run
            report = load_report(out_dir)
    lines = [f"{prefix}{line}" for line in ([] if report is None else console_lines(report))]
    if out_dir is not None:
        timing = f"; {seconds:.1f} s" if seconds is not None else ""
        if unwritten:
            contents = "its logs; the report files did not fit, see the warning above"
        lines.append(f"{prefix}run folder: {display_path(out_dir)}  ({contents}{timing})")
    hint = run.sync_hint if run is not None else None
    if hint:
        lines.append(f"{prefix}W&B offline run saved; upload it with: {hint}")
    elif run is not None and run.mode != "disabled" and run.failed:
        lines.append(f"{prefix}W&B logging failed (see the warning above); the run folder has everything")
    return lines
