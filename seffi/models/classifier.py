"""A labeler that is not the validator: a small classifier trained on labelled reference traces.

The seed's rung 3 labels traces at LLM scale, with an independent mechanism whose own error enters
every coverage number. `ClassifierLabeler` is the smallest such mechanism a researcher would
build: it learns, from texts whose strategy match sets are known (reference traces labelled once by
a person or by a task's validator), to predict the match set of a new text. `agreement`
measures how far its labels are from a reference labeler's (per-strategy confusion matrices, Cohen's
kappa, the exact-set rate), so a reader sees the labeler error beside the coverage result.

numpy only (no torch, no scikit-learn).

Examples:
    >>> texts = ["right right down down", "down down right right"] * 20
    >>> sets = [{"right_first"}, {"down_first"}] * 20
    >>> clf = ClassifierLabeler().fit(texts, sets, ["right_first", "down_first"])
    >>> sorted(clf(None, "right right right down").strategy_matches)
    ['right_first']
    >>> clf(None, None).parse_ok
    False
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from seffi.errors import SeffiError
from seffi.labelers import coerce_text, judge_validity
from seffi.tasks.base import ValidationResult

__all__ = ["ClassifierLabeler", "agreement", "cohen_kappa"]

_BOS, _EOS = "<s>", "</s>"


def _ngrams(text: str, max_n: int) -> Counter[str]:
    """Counts of the text's token n-grams, ``n = 1..max_n``.

    Unigrams are the tokens themselves; longer n-grams also see a start and an end marker, so the
    first and the last token of a trace are features of their own (a route's first move, say).
    """
    tokens = text.split()
    grams: Counter[str] = Counter(tokens)
    padded = [_BOS, *tokens, _EOS]
    for n in range(2, max_n + 1):
        grams.update(" ".join(padded[i : i + n]) for i in range(len(padded) - n + 1))
    return grams


def _match_set(item: Any, known: frozenset[str], what: str) -> frozenset[str]:
    """A match set given as an iterable of ids or a ValidationResult, checked against ``known``."""
    if isinstance(item, ValidationResult):
        ids = item.strategy_matches
    elif isinstance(item, str):
        ids = frozenset((item,))
    else:
        try:
            ids = frozenset(str(s) for s in item)
        except TypeError:
            raise SeffiError(
                f"{what} must be an iterable of strategy ids or a ValidationResult, got {type(item).__name__}"
            ) from None
    unknown = ids - known
    if unknown:
        raise SeffiError(f"{what} holds undeclared strategy ids {sorted(unknown)}; declared: {sorted(known)}")
    return ids


def _declared(strategies: Iterable[str]) -> tuple[str, ...]:
    if isinstance(strategies, str):
        raise SeffiError("strategies must be a sequence of strategy ids, not one string")
    out = tuple(dict.fromkeys(str(s) for s in strategies))
    if not out:
        raise SeffiError("strategies must name at least one strategy id")
    return out


class ClassifierLabeler:
    """Predicts a trace's strategy match set from its token n-grams; a [`Labeler`][seffi.labelers.Labeler].

    Model: one-vs-rest L2-regularised logistic regression, one binary decision per strategy
    (``p_s >= threshold``), on a bag of token n-grams (``n = 1..max_n``, default 1-2; sublinear counts
    ``1 + log(count)``, each text's vector scaled to unit length, plus an unpenalised intercept).
    Why logistic regression rather than naive Bayes: every bigram repeats its two unigrams, so naive
    Bayes' independence assumption counts the same evidence several times and its posteriors grow
    with text length, which moves a fixed threshold's decisions; logistic regression fits the weights
    of overlapping features jointly. One-vs-rest because match sets hold several strategies when their
    traces coincide on an input. The objective is strictly convex and is minimised by full-batch
    Nesterov gradient descent from zero weights with step ``1 / L`` (``L`` a bound on the gradient's
    Lipschitz constant), so a fit is a deterministic function of its data: no seed is involved, and
    the vocabulary's ties are broken by the n-gram's text.

    The classifier reads the text only, as a judge given the trace without the problem would:
    ``x`` goes to ``valid`` alone. Validity (is the trace a correct solution?) is not the classifier's
    job: ``valid(x, text) -> bool`` is the researcher's correctness check, e.g.
    ``lambda x, y: task.validate_y_text(x, y).valid``. Without it every usable text counts as valid
    (valid coverage then equals raw coverage), as with [`RegexRubric`][seffi.labelers.RegexRubric].

    Never raises on the text: ``None``, non-text, bytes that are not UTF-8, empty and over-long text
    come back as ``parse_ok=False`` with no matches ([`coerce_text`][seffi.labelers.coerce_text]); an
    exception inside ``valid`` gives ``valid=False`` with its message and keeps the predicted matches.

    Args:
        valid: ``callable(x, text) -> bool`` deciding correctness, or ``None`` (every usable text valid).
        max_n: Longest n-gram used as a feature (1 = bag of words).
        l2: Weight of the L2 penalty ``l2 / 2 * ||W||^2`` on the mean logistic loss.
        threshold: Probability at or above which a strategy is in the predicted set.
        max_features: Keep the n-grams found in the most training texts (ties by text), so the dense
            feature matrix has at most this many columns.
        max_iter: Gradient steps at most.
        tol: Stop once the gradient's largest entry is below this.

    Attributes:
        strategies: The declared strategy ids (set by `fit`; empty before).
        features: The n-gram vocabulary, in column order (set by `fit`).
        n_iter: Gradient steps the last fit took.

    Raises:
        SeffiError: A setting out of range or a ``valid`` that is not callable.
    """

    def __init__(
        self,
        *,
        valid: Callable[[Any, str], bool] | None = None,
        max_n: int = 2,
        l2: float = 1e-3,
        threshold: float = 0.5,
        max_features: int = 5000,
        max_iter: int = 2000,
        tol: float = 1e-5,
    ) -> None:
        if valid is not None and not callable(valid):
            raise SeffiError(f"valid must be callable(x, text) -> bool or None, got {type(valid).__name__}")
        if not (isinstance(max_n, int) and max_n >= 1):
            raise SeffiError(f"max_n must be an int >= 1, got {max_n!r}")
        if not l2 > 0:
            raise SeffiError(f"l2 must be > 0 (it makes the fit unique), got {l2!r}")
        if not 0 < threshold < 1:
            raise SeffiError(f"threshold must lie in (0, 1), got {threshold!r}")
        if not (isinstance(max_features, int) and max_features >= 1):
            raise SeffiError(f"max_features must be an int >= 1, got {max_features!r}")
        if not (isinstance(max_iter, int) and max_iter >= 1):
            raise SeffiError(f"max_iter must be an int >= 1, got {max_iter!r}")
        self.valid = valid
        self.max_n = max_n
        self.l2 = float(l2)
        self.threshold = float(threshold)
        self.max_features = max_features
        self.max_iter = max_iter
        self.tol = float(tol)
        self.strategies: tuple[str, ...] = ()
        self.features: tuple[str, ...] = ()
        self.n_iter = 0
        self._index: dict[str, int] = {}
        self._weights: np.ndarray | None = None  # (features + 1, strategies); the last row is the intercept

    def __repr__(self) -> str:
        state = f"{len(self.features)} features" if self._weights is not None else "not fitted"
        return f"ClassifierLabeler({list(self.strategies)}, {state})"

    # -- features -------------------------------------------------------------------------------

    def _matrix(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length sublinear n-gram counts of ``texts``, with the intercept's column of ones last."""
        X = np.zeros((len(texts), len(self._index) + 1))
        for r, text in enumerate(texts):
            for gram, count in _ngrams(text, self.max_n).items():
                col = self._index.get(gram)
                if col is not None:
                    X[r, col] = 1.0 + np.log(count)
        norms = np.linalg.norm(X[:, :-1], axis=1, keepdims=True)
        np.divide(X[:, :-1], norms, out=X[:, :-1], where=norms > 0)
        X[:, -1] = 1.0
        return X

    # -- training -------------------------------------------------------------------------------

    def fit(
        self, texts: Sequence[Any], match_sets: Sequence[Any], strategies: Iterable[str]
    ) -> ClassifierLabeler:
        """Learn the match sets of ``texts``.

        Args:
            texts: Training traces. Entries that are not usable text (``coerce_text``) are skipped:
                the labeler maps them to the empty set without consulting the model.
            match_sets: The match set of each text: an iterable of strategy ids, or a
                [`ValidationResult`][seffi.tasks.ValidationResult] (its ``strategy_matches``), e.g. the output
                of ``TaskLabeler(task)(x, text)``.
            strategies: The declared strategy ids (every id in ``match_sets`` must be one).

        Returns:
            ``self``, fitted.

        Raises:
            SeffiError: Lengths differ, no usable text, no strategy, or an undeclared id.
        """
        declared = _declared(strategies)
        known = frozenset(declared)
        texts, match_sets = list(texts), list(match_sets)
        if len(texts) != len(match_sets):
            raise SeffiError(f"fit needs one match set per text: {len(texts)} texts, {len(match_sets)} sets")
        kept: list[str] = []
        sets: list[frozenset[str]] = []
        for i, (raw, item) in enumerate(zip(texts, match_sets, strict=True)):
            ids = _match_set(item, known, f"match set {i}")
            text, _ = coerce_text(raw)
            if text is not None:
                kept.append(text)
                sets.append(ids)
        if not kept:
            raise SeffiError("fit found no usable training text (every entry empty, non-text or too long)")
        df: Counter[str] = Counter()
        for text in kept:
            df.update(_ngrams(text, self.max_n).keys())
        ranked = sorted(df, key=lambda g: (-df[g], g))[: self.max_features]
        # The state changes only once the data has passed every check.
        self.strategies = declared
        self.features = tuple(sorted(ranked))
        self._index = {g: i for i, g in enumerate(self.features)}
        X = self._matrix(kept)
        Y = np.array([[s in ids for s in declared] for ids in sets], dtype=np.float64)
        self._weights, self.n_iter = self._solve(X, Y)
        return self

    def _solve(self, X: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, int]:
        """Minimise the mean logistic loss plus ``l2 / 2 * ||W||^2`` (intercept unpenalised)."""
        n = X.shape[0]
        penalty = np.ones((X.shape[1], 1))
        penalty[-1] = 0.0
        # Rows have unit length plus the intercept's 1, so ||X||_2^2 <= ||X||_F^2 <= 2 n: the mean
        # logistic loss's gradient is (2 n / 4 n = 0.5)-Lipschitz, plus l2 from the penalty.
        step = 1.0 / (0.5 + self.l2)
        W = np.zeros((X.shape[1], Y.shape[1]))
        V, W_prev = W.copy(), W.copy()
        for it in range(1, self.max_iter + 1):
            grad = X.T @ (_sigmoid(X @ V) - Y) / n + self.l2 * penalty * V
            if np.max(np.abs(grad)) < self.tol:
                return V, it
            W_prev, W = W, V - step * grad
            V = W + (it - 1) / (it + 2) * (W - W_prev)
        return W, self.max_iter

    # -- prediction -----------------------------------------------------------------------------

    def _fitted(self) -> np.ndarray:
        if self._weights is None:
            raise SeffiError("ClassifierLabeler is not fitted: call fit(texts, match_sets, strategies) first")
        return self._weights

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """Probability of each strategy (columns, in ``strategies`` order) for each text (rows).

        Args:
            texts: Usable texts (strings); pass junk through ``__call__`` instead.

        Returns:
            An array of shape ``(len(texts), len(strategies))``.

        Raises:
            SeffiError: Not fitted, or an entry is not a string.
        """
        weights = self._fitted()
        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise SeffiError(f"predict_proba takes strings; entry {i} is {type(t).__name__}")
        return _sigmoid(self._matrix(texts) @ weights)

    def predict(self, texts: Sequence[str]) -> list[frozenset[str]]:
        """The predicted match set of each text (strategies with probability >= ``threshold``)."""
        proba = self.predict_proba(texts)
        return [
            frozenset(s for s, p in zip(self.strategies, row, strict=True) if p >= self.threshold)
            for row in proba
        ]

    def __call__(self, x: Any, y_text: Any) -> ValidationResult:
        """Label ``y_text`` (generated for ``x``): predicted matches, validity from ``valid``.

        Never raises on ``y_text`` or inside ``valid``; raises `SeffiError` only when the labeler
        was never fitted (a setup error, caught at the first call).
        """
        self._fitted()
        text, reason = coerce_text(y_text)
        if text is None:
            return ValidationResult.unparsable(reason or "unusable text")
        return judge_validity(self.predict([text])[0], self.valid, x, text, "classifier")


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # overflow-free logistic


def cohen_kappa(tp: int, fp: int, fn: int, tn: int) -> float:
    """Cohen's kappa of two binary raters from their 2x2 table.

    ``kappa = (p_o - p_e) / (1 - p_e)`` with ``p_o = (tp + tn) / N`` the observed agreement and ``p_e``
    the agreement expected from the two raters' marginal rates alone.

    Args:
        tp: Count of items both raters (reference, predicted) say yes to.
        fp: Count only the second (predicted) rater says yes to.
        fn: Count only the first (reference) rater says yes to.
        tn: Count both say no to.

    Returns:
        kappa in ``[-1, 1]``; ``nan`` when it is undefined (``N = 0``, or ``p_e = 1``: both raters give
        one and the same answer throughout), as ``sklearn.metrics.cohen_kappa_score``.
    """
    n = tp + fp + fn + tn
    if n == 0:
        return float("nan")
    p_o, p_e = (tp + tn) / n, _chance(tp, fp, fn, tn)
    return float("nan") if p_e >= 1.0 else float((p_o - p_e) / (1.0 - p_e))


def _chance(tp: int, fp: int, fn: int, tn: int) -> float:
    """Agreement expected from the two raters' yes-rates alone: ``P(both yes) + P(both no)``."""
    n = tp + fp + fn + tn
    return ((tp + fp) * (tp + fn) + (fn + tn) * (fp + tn)) / n**2


def _table(ref: np.ndarray, pred: np.ndarray) -> dict[str, int]:
    return {
        "tp": int(np.sum(ref & pred)),
        "fp": int(np.sum(~ref & pred)),
        "fn": int(np.sum(ref & ~pred)),
        "tn": int(np.sum(~ref & ~pred)),
    }


def agreement(
    reference: Sequence[Any], predicted: Sequence[Any], strategies: Iterable[str]
) -> dict[str, Any]:
    """How well one labeler's match sets agree with a reference labeler's, on the same traces.

    Each trace gives one binary decision per strategy (in the set or not); a trace's decisions are
    compared pairwise, reference first.

    Args:
        reference: The reference match set of each trace (e.g. the task validator's): iterables of
            strategy ids, or [`ValidationResult`][seffi.tasks.ValidationResult] (their ``strategy_matches``).
        predicted: The other labeler's match set of the same traces, in the same order.
        strategies: The declared strategy ids; every id in either side must be one.

    Returns:
        ``{"n", "strategies", "per_strategy", "pooled", "exact_set_rate", "mean_kappa"}``:

        * ``per_strategy[s]``: the 2x2 table ``tp, fp, fn, tn`` (reference yes/no x predicted yes/no),
          ``agreement`` (share of equal decisions) and ``kappa`` (`cohen_kappa`);
        * ``pooled``: every (trace, strategy) decision in one table (``tp, fp, fn, tn``,
          ``agreement``) with ``kappa`` whose chance agreement is the mean of the per-strategy chance
          agreements — the agreement expected from each strategy's own yes-rates. ``kappa_one_table``
          is Cohen's kappa of the summed table, whose chance term pools the yes-rates of all
          strategies: it credits a labeler merely for knowing which strategies are common (a labeler
          that always answers each strategy's majority has ``kappa`` 0 but ``kappa_one_table`` well
          above 0 when the strategies' rates differ), so ``kappa`` is the one to read;
        * ``exact_set_rate``: share of traces whose two match sets are equal;
        * ``mean_kappa``: mean of the per-strategy kappas that are defined (``nan`` if none is).

        Kappas are ``nan`` where undefined (see `cohen_kappa`); rates are ``nan`` with no trace.

    Raises:
        SeffiError: The two sides differ in length, or hold an undeclared id.
    """
    declared = _declared(strategies)
    known = frozenset(declared)
    reference, predicted = list(reference), list(predicted)
    if len(reference) != len(predicted):
        raise SeffiError(
            f"agreement needs one prediction per reference: {len(reference)} vs {len(predicted)} match sets"
        )
    ref_sets = [_match_set(r, known, f"reference {i}") for i, r in enumerate(reference)]
    pred_sets = [_match_set(p, known, f"predicted {i}") for i, p in enumerate(predicted)]
    ref = np.array([[s in ids for s in declared] for ids in ref_sets], dtype=bool).reshape(-1, len(declared))
    pred = np.array([[s in ids for s in declared] for ids in pred_sets], dtype=bool).reshape(
        -1, len(declared)
    )
    n = len(ref_sets)
    per: dict[str, dict[str, float]] = {}
    for j, s in enumerate(declared):
        table = _table(ref[:, j], pred[:, j])
        per[s] = {
            **table,
            "agreement": (table["tp"] + table["tn"]) / n if n else float("nan"),
            "kappa": cohen_kappa(**table),
        }
    pooled: dict[str, float] = _table(ref.ravel(), pred.ravel())
    if n:
        p_o = (pooled["tp"] + pooled["tn"]) / ref.size
        p_e = float(np.mean([_chance(**_table(ref[:, j], pred[:, j])) for j in range(len(declared))]))
        pooled["agreement"] = p_o
        pooled["kappa"] = float("nan") if p_e >= 1.0 else (p_o - p_e) / (1.0 - p_e)
    else:
        pooled["agreement"] = pooled["kappa"] = float("nan")
    pooled["kappa_one_table"] = cohen_kappa(**_table(ref.ravel(), pred.ravel()))
    kappas = [v["kappa"] for v in per.values() if not np.isnan(v["kappa"])]
    return {
        "n": n,
        "strategies": list(declared),
        "per_strategy": per,
        "pooled": pooled,
        "exact_set_rate": (
            float(np.mean([r == p for r, p in zip(ref_sets, pred_sets, strict=True)])) if n else float("nan")
        ),
        "mean_kappa": float(np.mean(kappas)) if kappas else float("nan"),
    }
