"""A Weights & Biases run that never raises into training: a failure is one warning, then no-ops."""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import shlex
import warnings
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from seffi._convert import plain
from seffi.errors import SeffiError
from seffi.report import keys

Mode = Literal["offline", "online", "disabled"]
MODES: tuple[str, ...] = ("offline", "online", "disabled")
#: W&B's own aliases of ``WANDB_MODE``.
_MODE_ALIASES = {"run": "online", "dryrun": "offline"}


def wandb_mode_from_env() -> str | None:
    """The W&B mode ``WANDB_MODE`` names (W&B's aliases "run" and "dryrun" too), else None."""
    env = os.environ.get("WANDB_MODE", "").strip().lower()
    env = _MODE_ALIASES.get(env, env)
    return env if env in MODES else None


def wandb_mode(mode: str | None = None) -> str:
    """The W&B mode to use: ``mode`` when given, else ``WANDB_MODE``, else offline (never online unasked)."""
    return mode if mode is not None else wandb_mode_from_env() or "offline"


#: Seconds an online ``wandb.init`` may take (W&B's own 90 s of retries would stall training);
#: ``WANDB_INIT_TIMEOUT`` overrides it.
INIT_TIMEOUT_S = 15.0


class WandbSinkWarning(RuntimeWarning):
    """W&B failed or dropped data; training and the local report continue."""


_LOG_FILE_ERRORS: dict[str, BaseException] = {}
#: The key scopes seffi logs under in each run it did not start (the user's), to see a second user.
_SCOPES_IN_RUN: weakref.WeakKeyDictionary[Any, set[str | None]] = weakref.WeakKeyDictionary()


def _quiet(self: logging.FileHandler, record: logging.LogRecord) -> None:
    """``handleError`` of W&B's own log files: the error noted, nothing printed."""
    import sys

    _LOG_FILE_ERRORS.setdefault(self.baseFilename, sys.exc_info()[1] or OSError("write failed"))


def _quiet_log_files(record: logging.LogRecord) -> bool:
    """A filter of the ``wandb`` logger, run before any handler sees a record: file handlers get `_quiet`."""
    for h in logging.getLogger("wandb").handlers:
        if isinstance(h, logging.FileHandler) and getattr(h, "handleError", None) is not _quiet:
            h.handleError = _quiet.__get__(h)  # type: ignore[method-assign]
    return True


def check_init_arguments(kwargs: Mapping[str, Any]) -> None:
    """Refuse in one line a ``wandb.init`` argument seffi sets itself, or one ``wandb.init`` does not take."""
    if reserved := sorted({"mode", "reinit"} & kwargs.keys()):
        raise SeffiError(
            f"W&B init arguments may not set {reserved[0]}: pass wandb='offline', 'online' or 'disabled'; "
            "each run seffi starts is its own"
        )
    try:
        import inspect

        import wandb

        taken = inspect.signature(wandb.init).parameters
    except Exception:  # W&B itself fails: that is the init's warning to give
        return
    if not any(p.kind is p.VAR_KEYWORD for p in taken.values()):
        if unknown := sorted(kwargs.keys() - taken.keys() - {"run", "quiet"}):
            raise SeffiError(f"wandb.init takes no argument {unknown[0]!r} (given in the W&B init arguments)")


class SafeWandbRun:
    """A W&B run wrapper whose methods never raise.

    Args:
        mode: "offline" (default; files only, ``wandb sync`` later), "online" or "disabled".
        project: W&B project.
        dir: parent folder of ``wandb/`` (default: ``WANDB_DIR`` or cwd).
        name: passed to ``wandb.init``, as are ``group``, ``job_type``, ``config`` and ``tags``.
        run: an existing run to log into, not finished by ``finish()``. Without it, an active
            ``wandb.run`` (the user's) is reused the same way; otherwise this object starts a run of its
            own (``reinit="create_new"``, never ``wandb.run``), so two monitors never share one.
        quiet: keep W&B's console chatter out of the user's output (online runs still print the URL).
        **init_kwargs: any other ``wandb.init`` argument (``entity``, ``notes``, ``id``, ``resume``,
            ``settings``, ...), passed as given (``settings`` over seffi's quiet defaults); not ``reinit``.

    Attributes:
        enabled: False once anything failed (or in "disabled" mode), and after ``finish()``.
        failed: True once a W&B call failed (it stays False after ``finish()``).
        owns_run: True when this object started the run (then ``finish()`` finishes it).
    """

    def __init__(
        self,
        mode: Mode = "offline",
        project: str = "seffi",
        dir: str | Path | None = None,  # mirrors wandb.init
        name: str | None = None,
        group: str | None = None,
        job_type: str | None = None,
        config: Mapping[str, Any] | None = None,
        tags: Sequence[str] | None = None,
        run: Any = None,
        quiet: bool = True,
        **init_kwargs: Any,
    ) -> None:
        if mode not in MODES:
            raise SeffiError(f"W&B mode must be one of {', '.join(MODES)}, got {mode!r}")
        check_init_arguments(init_kwargs)
        self.mode: str = mode
        self.step_key = keys.STEP_KEY
        self.enabled = False
        self.failed = False
        self.owns_run = False
        self.run: Any = None
        self._wandb: Any = None
        self._warned = False
        self._warned_order = False
        self._last_step: int | None = None
        self._defined = False
        self._axes: dict[str, str] = {}
        self._axis_defined: set[str] = set()
        self._axis_last: dict[str, Any] = {}  # step key -> its last logged value
        self._named = name is not None
        self._shared: tuple[set[str | None], str | None] | None = None  # (the run's scopes, ours)
        if mode == "disabled":
            return
        try:
            import wandb

            self._wandb = wandb
            if _quiet_log_files not in logging.getLogger("wandb").filters:
                logging.getLogger("wandb").addFilter(_quiet_log_files)
            run = wandb.run if run is None else run
            if run is None:
                if mode == "online" and not self.logged_in():
                    # wandb.init would prompt for a key (or hang) inside a training process.
                    raise SeffiError("no W&B login for online mode (run `wandb login` or set WANDB_API_KEY)")
                # wandb reads WANDB_DIR once per process: resolved at every init instead.
                dir = Path(dir if dir is not None else os.environ.get("WANDB_DIR") or os.getcwd())
                dir.mkdir(parents=True, exist_ok=True)
                run = wandb.init(
                    project=project,
                    dir=str(dir),
                    name=name,
                    group=group,
                    job_type=job_type,
                    config=dict(config) if config else None,
                    tags=list(tags) if tags else None,
                    mode=mode,
                    reinit="create_new",
                    settings=self._settings(wandb, mode, quiet, init_kwargs.pop("settings", None)),
                    **init_kwargs,
                )
                self.owns_run = True
            self.run = run
            self.enabled = run is not None
        except BaseException as exc:  # W&B must never stop training
            if isinstance(exc, KeyboardInterrupt):
                raise
            self._fail("init", exc)

    def share(self, scope: str | None) -> None:
        """Note that a monitor logs under key ``scope`` into this run; warn if one already does.

        Only a run the user started is shared: each run seffi starts has one monitor.
        """
        if not self.enabled or self.owns_run:
            return
        try:
            scopes = _SCOPES_IN_RUN.setdefault(self.run, set())
        except TypeError:  # a run object that takes no weak reference: nothing to compare with
            return
        self._shared = (scopes, scope)  # given back at `finish`: a later monitor may use the keys
        if scope in scopes:
            where = f"seffi/{scope}/..." if scope else "seffi/..."
            warnings.warn(
                f"two seffi monitors log into the W&B run you started under the same keys ({where}): "
                "their numbers mix; give each its own scope (MonitorConfig(scope=...))",
                stacklevel=3,
            )
        scopes.add(scope)

    def describe(self, name: str, tags: Sequence[str], config: Mapping[str, Any]) -> None:
        """Name, tags and config keys of a run this object started, where the caller set none."""
        if not (self.enabled and self.owns_run):
            return
        try:
            if not self._named:
                self.run.name = name
            if not self.run.tags:
                self.run.tags = tuple(tags)
            self.run.config.update({k: v for k, v in config.items() if k not in self.run.config})
        except Exception as exc:  # a run left unnamed still logs: say so, go on
            warnings.warn(f"W&B: could not name or tag the run ({exc}); logging goes on", stacklevel=2)

    @staticmethod
    def _settings(wandb: Any, mode: str, quiet: bool, given: Any = None) -> Any:
        """W&B settings: seffi's defaults under the caller's ``given`` (a ``wandb.Settings``: as given)."""
        if given is not None and not isinstance(given, Mapping):
            return given
        kwargs: dict[str, Any] = {}
        # Not offline: that init talks to a local process, which may start slowly.
        if mode == "online" and "WANDB_INIT_TIMEOUT" not in os.environ:
            kwargs["init_timeout"] = INIT_TIMEOUT_S
        if quiet:
            # silent drops every W&B console line, including the online run URL; quiet keeps that one.
            kwargs["silent" if mode == "offline" else "quiet"] = True
        return wandb.Settings(**{**kwargs, **(given or {})})

    @staticmethod
    def logged_in() -> bool:
        """True when W&B has credentials, found without prompting or network."""
        if os.environ.get("WANDB_API_KEY") or os.environ.get("WANDB_IDENTITY_TOKEN_FILE"):
            return True
        try:
            import wandb

            return bool(wandb.login(prompt=False, verify=False))
        except Exception:  # any failure means "not usable"
            return False

    @classmethod
    def check_login(cls, mode: str = "online") -> None:
        """Raise one clear `SeffiError` when ``mode`` is "online" and there is no W&B login (for a CLI)."""
        if mode not in MODES:
            raise SeffiError(f"W&B mode must be one of {', '.join(MODES)}, got {mode!r}")
        if mode == "online" and not cls.logged_in():
            raise SeffiError(
                "W&B online mode needs a login: run `wandb login` or set WANDB_API_KEY "
                "(or use --wandb offline and `wandb sync` later)"
            )

    def _fail(self, what: str, exc: BaseException) -> None:
        if _service_lost(exc) and self._wandb is not None and (self.owns_run or self.run is None):
            self._close_service()  # the run this object starts (or started) lost wandb-core
        self.enabled = False
        self.failed = True
        if not self._warned:
            self._warned = True
            # One line: W&B's messages may carry advice on further lines (e.g. "increase init_timeout").
            first = (str(exc).strip().splitlines() or [""])[0]
            with contextlib.suppress(Exception):  # pydantic (W&B settings): the field at fault and why
                error = exc.errors()[0]  # type: ignore[attr-defined]
                first += f": {'.'.join(map(str, error['loc']))}: {error['msg']}"
            warnings.warn(
                f"W&B {what} failed ({type(exc).__name__}: {first}); W&B logging is off for this run, "
                "training continues and the local report keeps everything",
                WandbSinkWarning,
                stacklevel=3,
            )

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        if not self.enabled:
            return None
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # W&B must never stop training
            self._fail(what, exc)
            return None

    def define_step_metric(self) -> None:
        """Chart ``seffi/*`` against ``seffi/step``."""

        def _define() -> None:
            self.run.define_metric(self.step_key)
            self.run.define_metric(keys.GLOB, step_metric=self.step_key)

        self._call("define_metric", _define)
        self._defined = self.enabled

    def add_step_axis(self, scope: str) -> str:
        """Give the keys under ``seffi/<scope>/`` their own step metric, ``seffi/<scope>/step``; return it.

        W&B matches overlapping globs in no fixed order, so `log` defines each new key under the prefix
        by its exact name before its first value.
        """
        step_key = keys.step_key(scope)
        self._axes[step_key[: -len("step")]] = step_key
        self._call("define_metric", lambda: self.run.define_metric(step_key))
        self._axis_defined.add(step_key)
        return step_key

    def _with_axes(self, payload: dict[str, Any]) -> dict[str, Any]:
        """Define new keys of extra axes by exact name, and give every row the value of its axes."""
        for name in list(payload):
            # The longest matching prefix names the key's axis.
            prefix = max((p for p in self._axes if name.startswith(p)), key=len, default=None)
            axis = self._axes[prefix] if prefix is not None else None
            if axis is None or name == axis:
                if name in self._axes.values():
                    self._axis_last[name] = payload[name]
                continue
            if name not in self._axis_defined:
                self._axis_defined.add(name)
                self._call("define_metric", lambda n=name, a=axis: self.run.define_metric(n, step_metric=a))
            if axis not in payload and axis in self._axis_last:
                payload[axis] = self._axis_last[axis]
        return payload

    def _accept_step(self, step: int) -> bool:
        """Steps must be non-decreasing: W&B would silently drop an older one, so we drop it loudly."""
        if self._last_step is not None and step < self._last_step:
            if not self._warned_order:
                self._warned_order = True
                warnings.warn(
                    f"dropping W&B data at step {step}: steps must not decrease (last was "
                    f"{self._last_step}); further out-of-order steps are dropped silently",
                    WandbSinkWarning,
                    stacklevel=3,
                )
            return False
        self._last_step = step
        return True

    def log(self, data: Mapping[str, Any], step: int) -> bool:
        """Log ``data`` at ``step`` (the ``seffi/step`` value); False when disabled or dropped."""
        if not self.enabled:
            return False
        step = int(step)
        if not self._accept_step(step):
            return False
        if not self._defined:
            self.define_step_metric()
        payload = {k: plain(v) for k, v in data.items()}
        payload[self.step_key] = step
        if self._axes:
            payload = self._with_axes(payload)
        self._call("log", self.run.log, payload)
        return self.enabled

    def log_line_series(
        self,
        key: str,
        xs: Sequence[float],
        ys_by_label: Mapping[str, Sequence[float]],
        title: str,
        xname: str,
        step: int | None = None,
    ) -> bool:
        """Show a ``wandb.plot.line_series`` chart (one line per label) under ``key``; a new call replaces it.

        The table goes to ``run.summary`` and the chart into the run config, without a history row
        (whose ``ncols``/``nrows`` W&B would chart as metrics). A line with a NaN/None value is skipped.
        """
        if not self.enabled or (step is not None and not self._accept_step(int(step))):
            return False
        labels, ys = [], []
        for label, values in ys_by_label.items():
            vals = [None if v is None else float(v) for v in values]
            if len(vals) != len(xs) or any(v is None or not math.isfinite(v) for v in vals):
                continue
            labels.append(label)
            ys.append(vals)
        if not ys:
            return False
        floats = [float(x) for x in xs]
        chart = self._call(
            "line_series",
            lambda: self._wandb.plot.line_series(floats, ys, keys=labels, title=title, xname=xname),
        )
        if chart is None:
            return False
        publish = getattr(self.run, "_config_callback", None)
        spec = getattr(chart, "spec", None)
        if publish is None or spec is None or not hasattr(chart, "set_key"):
            return self.log({key: chart}, step if step is not None else (self._last_step or 0))

        def _show() -> None:
            chart.set_key(key)
            publish(key=spec.config_key, val=spec.config_value)
            self.run.summary[spec.table_key] = chart.table

        self._call("line_series", _show)
        return self.enabled

    @property
    def last_step(self) -> int | None:
        """The last step that went to W&B (None before the first)."""
        return self._last_step

    def log_image(self, key: str, path: str | Path, step: int, caption: str | None = None) -> bool:
        """Log a PNG file as a ``wandb.Image``."""
        image = self._call("image", lambda: self._wandb.Image(str(path), caption=caption))
        return image is not None and self.log({key: image}, step)

    def update_summary(self, data: Mapping[str, Any]) -> None:
        """Put final numbers into ``run.summary``."""
        self._call("summary", lambda: self.run.summary.update({k: plain(v) for k, v in data.items()}))

    def log_artifact(self, name: str, type: str, paths: Sequence[str | Path]) -> None:
        """Log files as one artifact (the name is sanitised to W&B's allowed characters)."""

        def _log() -> None:
            safe = re.sub(r"[^A-Za-z0-9_.-]", "-", name).strip("-") or "seffi"
            artifact = self._wandb.Artifact(safe, type=type)
            for p in paths:
                artifact.add_file(str(p))
            self.run.log_artifact(artifact)

        self._call("artifact", _log)

    def _close_service(self) -> None:
        """Tear down W&B's connection to its lost ``wandb-core`` (else its exit hook prints a traceback)."""
        try:
            self._wandb.teardown()
        except BaseException as exc:  # a dead connection fails here, as expected
            if isinstance(exc, KeyboardInterrupt):
                raise

    def finish(self) -> None:
        """Finish the run if this object started it; one that was not saved whole counts as failed."""
        if self._shared is not None:
            self._shared[0].discard(self._shared[1])
            self._shared = None
        if self.enabled and self.owns_run:
            self._call("finish", self.run.finish)
            if self.enabled and (trouble := self._storage_trouble()) is not None:
                self._fail("save", trouble)
        self.enabled = False

    def _storage_trouble(self) -> OSError | None:
        """Why the run's local files are incomplete (a failed write, a full folder), or None."""
        folder = self.run_dir
        if folder is None:
            return None
        inside = [e for f, e in _LOG_FILE_ERRORS.items() if Path(f).is_relative_to(folder)]
        if inside:
            return OSError(f"a write to W&B's log failed ({type(inside[0]).__name__}: {inside[0]})")
        if _core_lost_records(folder / "logs" / "debug-internal.log"):
            return OSError("wandb-core could not save every record (see its logs/debug-internal.log)")
        try:
            st = os.statvfs(folder)
        except OSError:
            return None
        if st.f_bavail == 0:
            return OSError(f"no space left in W&B's folder {display_path(folder)}")
        return None

    @property
    def run_dir(self) -> Path | None:
        """The local run folder (``.../wandb/offline-run-*/``); None without a run."""
        for where in (lambda: self.run.settings.sync_dir, lambda: Path(self.run.dir).parent):
            with contextlib.suppress(Exception):
                return None if self.run is None else Path(where())
        return None

    @property
    def sync_hint(self) -> str | None:
        """``wandb sync <run_dir>`` for an offline run that did not fail (None otherwise)."""
        if self.mode != "offline" or self.failed or self.run_dir is None:
            return None
        with contextlib.suppress(Exception):
            if self.run.settings.mode != "offline":  # a reused run may be online
                return None
        return f"wandb sync {shlex.quote(display_path(self.run_dir))}"


#: wandb.sdk.mailbox's errors when wandb-core is gone.
_MAILBOX_LOST = ("HandleAbandonedError", "MailboxClosedError")


def _service_lost(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or an error it came from) says W&B lost its connection to ``wandb-core``."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, ConnectionError) or type(exc).__name__ in _MAILBOX_LOST:
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def _core_lost_records(log: Path) -> bool:
    """Whether ``wandb-core``'s log says a record was not saved (it says so nowhere else)."""
    try:
        with open(log, "rb") as f:
            return any(b"failed to save record" in line for line in f)
    except OSError:
        return False


def display_path(path: str | Path) -> str:
    """``path`` relative to the current directory when it lies under it, else as an absolute path."""
    p = Path(path)
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(p.resolve()) if p.is_absolute() else str(p)
