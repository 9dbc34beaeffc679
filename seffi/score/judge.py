"""An LLM judge over an OpenAI-compatible chat-completions endpoint, as a labeler.

The judge gets a prompt made from a template (the strategy list, the task prompt, the completion)
and must answer with one JSON object, ``{"strategies": [ids], "valid": true|false}`` (``valid``
optional); any other answer, or an id that is not declared, is ``parse_ok=False`` with the reason.
Requests run a bounded number at a time, each with a timeout, and a refused or failed request
(HTTP 429 or 5xx, a timeout, a dropped connection) is retried with exponential backoff, honouring
``Retry-After``. Every answer is cached on disk (SQLite), keyed by (model, template, prompt,
completion), so a second run of the same command makes no request; a request that still fails after
its retries stops the run with one line, and what was answered stays cached.

Examples:
    >>> judge = JudgeLabeler("http://127.0.0.1:8000/v1", ["loop", "recursion"], cache=None)  # doctest: +SKIP
    >>> judge.label_many([("fib", "for i in range(n): ...")])[0].strategy_matches  # doctest: +SKIP
    frozenset({'loop'})
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from seffi.errors import SeffiError
from seffi.tasks.base import ValidationResult, coerce_text

__all__ = ["DEFAULT_TEMPLATE", "JudgeLabeler", "parse_answer"]

DEFAULT_TEMPLATE = """You decide which solution strategies a completion follows.

Strategies (ids): {strategies}

Task prompt:
{prompt}

Completion:
{completion}

Answer with one JSON object and nothing else: {"strategies": [the ids the completion follows], \
"valid": true if it solves the task else false}"""

#: HTTP statuses worth another try: rate limits and the server's own failures.
RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


def parse_answer(content: Any, declared: frozenset[str]) -> ValidationResult:
    """A judge's answer as a `ValidationResult`: strict JSON ``{"strategies": [...], "valid": bool}``.

    Args:
        content: The message content the judge returned.
        declared: The declared strategy ids.

    Returns:
        The matches and validity, or ``parse_ok=False`` with the reason.
    """

    def refused(reason: str) -> ValidationResult:
        return ValidationResult(parse_ok=False, valid=False, strategy_matches=frozenset(), error=reason)

    if not isinstance(content, str):
        return refused("the judge returned no text")
    try:
        answer = json.loads(content)
    except json.JSONDecodeError:
        shown = content.strip()[:60]
        return refused(f"the judge's answer is not JSON: {shown!r}")
    if not isinstance(answer, dict) or not isinstance(answer.get("strategies"), list):
        return refused('the judge\'s answer has no "strategies" list')
    ids = answer["strategies"]
    if not all(isinstance(s, str) for s in ids):
        return refused('the judge\'s "strategies" are not all strings')
    unknown = sorted(set(ids) - declared)
    if unknown:
        return refused(f"the judge named undeclared strategies {unknown}")
    valid = answer.get("valid", True)
    if not isinstance(valid, bool):
        return refused('the judge\'s "valid" is not true or false')
    return ValidationResult(parse_ok=True, valid=valid, strategy_matches=frozenset(ids))


class _Cache:
    """Answers on disk: key -> the judge's message content (SQLite, written from one thread)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                # Ray workers of one run share the file: wait for another process's write, not fail.
                self._db = sqlite3.connect(path, check_same_thread=False, timeout=60)
                self._db.execute("CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, content TEXT)")
            except sqlite3.Error as exc:
                raise SeffiError(f"judge cache {path}: {exc}") from None
        self._lock = threading.Lock()

    def get_many(self, keys: Sequence[str]) -> dict[str, str]:
        if self._db is None or not keys:
            return {}
        found: dict[str, str] = {}
        with self._lock:
            for i in range(0, len(keys), 500):
                part = list(keys[i : i + 500])
                marks = ",".join("?" * len(part))
                found.update(
                    self._db.execute(f"SELECT key, content FROM answers WHERE key IN ({marks})", part)
                )
        return found

    def put(self, key: str, content: str) -> None:
        if self._db is not None:
            with self._lock:
                self._db.execute("INSERT OR REPLACE INTO answers VALUES (?, ?)", (key, content))
                self._db.commit()


class JudgeLabeler:
    """Labels completions by asking an LLM over an OpenAI-compatible ``/chat/completions`` endpoint.

    Args:
        url: The API base (``http://host:port/v1``) or the full ``.../chat/completions`` address.
        strategies: The declared strategy ids.
        model: The model name sent with each request (default: the server's first listed model).
        template: The prompt, with ``{strategies}``, ``{prompt}`` and ``{completion}`` in it.
        cache: SQLite file of answers (None: no cache).
        concurrency: Requests in flight at most.
        timeout: Seconds per request.
        retries: Extra tries of a request that failed for a reason worth retrying.
        backoff: Seconds before the first retry; doubled each time (or the server's Retry-After).
        max_tokens: Longest answer requested.
        api_key: Sent as a bearer token (default: the ``OPENAI_API_KEY`` environment variable).

    Attributes:
        calls: HTTP requests made so far (retries included); ``cached``: answers read from the cache.
    """

    def __init__(
        self,
        url: str,
        strategies: Iterable[str],
        *,
        model: str | None = None,
        template: str = DEFAULT_TEMPLATE,
        cache: str | Path | None = None,
        concurrency: int = 8,
        timeout: float = 60.0,
        retries: int = 3,
        backoff: float = 1.0,
        max_tokens: int = 256,
        api_key: str | None = None,
    ) -> None:
        self.strategies = tuple(strategies)
        if not self.strategies:
            raise SeffiError("the judge needs the declared strategies (--strategies a,b,c)")
        missing = [p for p in ("{strategies}", "{completion}") if p not in template]
        if missing:
            raise SeffiError(f"the judge's template has no {missing[0]} placeholder")
        if not url.startswith(("http://", "https://")):
            raise SeffiError(
                f"--judge {url!r}: need an http:// or https:// URL, e.g. http://localhost:8000/v1"
            )
        if not timeout > 0:  # urlopen refuses 0 and negatives, and NaN never times out
            raise SeffiError(f"--judge-timeout must be a positive number of seconds, got {timeout}")
        base = url.rstrip("/")
        self.url = base if base.endswith("/chat/completions") else base + "/chat/completions"
        self.template, self.timeout, self.retries, self.backoff = template, timeout, retries, backoff
        self.concurrency, self.max_tokens = max(1, int(concurrency)), max_tokens
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self._model = model
        self._declared = frozenset(self.strategies)
        self._cache = _Cache(Path(cache) if cache is not None else None)
        self.calls = self.cached = 0
        self._count = threading.Lock()
        self._failed = threading.Event()  # one request gave up: the others stop instead of retrying

    def __getstate__(self) -> dict[str, Any]:
        """What a worker process (``seffi score --ray``) needs: settings and the cache's path, no handles."""
        state = self.__dict__.copy()
        state["_cache"] = self._cache.path
        for handle in ("_count", "_failed"):
            state.pop(handle)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._cache = _Cache(state["_cache"])  # each process opens the SQLite file itself
        self._count, self._failed = threading.Lock(), threading.Event()

    @property
    def model(self) -> str:
        """The model name requests carry: the given one, else the first the server lists."""
        if self._model is None:
            models = self.url.removesuffix("/chat/completions") + "/models"
            listed = self._request(models, None)
            try:
                self._model = str(listed["data"][0]["id"])
            except (KeyError, IndexError, TypeError):
                raise SeffiError(f"the judge at {models} lists no model; pass --judge-model") from None
        return self._model

    def prompt(self, x: Any, text: str) -> str:
        """The message the judge gets for completion ``text`` of task prompt ``x``."""
        return (
            self.template.replace("{strategies}", ", ".join(self.strategies))
            .replace("{prompt}", "" if x is None else str(x))
            .replace("{completion}", text)
        )

    def _key(self, x: Any, text: str) -> str:
        parts = (self.model, self.template, "" if x is None else str(x), text)
        return hashlib.sha256(json.dumps(parts).encode()).hexdigest()

    def needed_calls(self, items: Iterable[tuple[Any, Any]]) -> int:
        """How many requests labelling ``items`` takes: distinct readable texts without a cached answer."""
        keys = {self._key(x, text) for x, t in items if (text := coerce_text(t, "completion")[0]) is not None}
        return len(keys) - len(self._cache.get_many(sorted(keys)))

    def _request(self, url: str, body: dict[str, Any] | None) -> Any:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = None if body is None else json.dumps(body).encode()
        delay = self.backoff
        for attempt in range(self.retries + 1):
            if self._failed.is_set():
                raise SeffiError("stopped: another request to the judge failed")
            with self._count:
                self.calls += 1
            try:
                with urllib.request.urlopen(
                    urllib.request.Request(url, data, headers), timeout=self.timeout
                ) as r:
                    return json.loads(r.read())
            except urllib.error.HTTPError as exc:
                if exc.code not in RETRY_STATUS or attempt == self.retries:
                    self._failed.set()
                    raise SeffiError(f"the judge at {url} answered HTTP {exc.code} {exc.reason}") from None
                retry_after = exc.headers.get("Retry-After") if exc.headers else None
                wait = float(retry_after) if retry_after and retry_after.isdigit() else delay
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
                if attempt == self.retries:
                    self._failed.set()
                    reason = getattr(exc, "reason", exc)
                    raise SeffiError(
                        f"the judge at {url} did not answer after {self.retries + 1} tries: {reason}"
                    ) from None
                wait = delay
            except json.JSONDecodeError:
                self._failed.set()
                raise SeffiError(f"the judge at {url} sent a response that is not JSON") from None
            time.sleep(wait)
            delay *= 2
        raise AssertionError("unreachable")

    def _ask(self, x: Any, text: str) -> str:
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": self.prompt(x, text)}],
            "temperature": 0,
            "max_tokens": self.max_tokens,
        }
        reply = self._request(self.url, body)
        try:
            content = reply["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise SeffiError(f"the judge at {self.url} sent no choices[0].message.content") from None
        return content if isinstance(content, str) else ""

    def label_many(self, items: Sequence[tuple[Any, Any]]) -> list[ValidationResult]:
        """Label ``(x, text)`` pairs: cached answers first, the rest asked ``concurrency`` at a time.

        Raises:
            SeffiError: A request failed after its retries (answers received so far are cached).
        """
        results: list[ValidationResult | None] = [None] * len(items)
        keys: list[str | None] = []
        for i, (x, t) in enumerate(items):
            text, reason = coerce_text(t, "completion")
            if text is None:
                results[i] = ValidationResult(
                    parse_ok=False, valid=False, strategy_matches=frozenset(), error=reason
                )
                keys.append(None)
            else:
                keys.append(self._key(x, text))
        cached = self._cache.get_many(sorted({k for k in keys if k is not None}))
        todo: dict[str, tuple[Any, str]] = {}
        for i, key in enumerate(keys):
            if key is None:
                continue
            if key in cached:
                self.cached += 1
            elif key not in todo:
                todo[key] = (items[i][0], coerce_text(items[i][1], "completion")[0])
        if todo:
            failed: list[BaseException] = []
            with ThreadPoolExecutor(self.concurrency) as pool:
                futures = {key: pool.submit(self._ask, *xt) for key, xt in todo.items()}
                for key, future in futures.items():
                    try:
                        cached[key] = future.result()
                    except SeffiError as exc:  # every answer that did come is cached before stopping
                        failed.append(exc)
                        continue
                    self._cache.put(key, cached[key])
            if failed:
                self._failed.clear()
                raise next((e for e in failed if not str(e).startswith("stopped:")), failed[0])
        for i, key in enumerate(keys):
            if key is not None:
                results[i] = parse_answer(cached[key], self._declared)
        return [r for r in results if r is not None]

    def __call__(self, x: Any, y_text: Any) -> ValidationResult:
        """Label one completion (a `seffi.labelers.Labeler`); `label_many` batches."""
        return self.label_many([(x, y_text)])[0]
