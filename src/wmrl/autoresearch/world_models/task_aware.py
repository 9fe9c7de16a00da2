"""`TaskAwareWorldModel`: an AutoResearch world model that reads the task as well as the code.

The embedding world model (:class:`~wmrl.autoresearch.world_models.learned.LearnedWorldModel`) sees only what a
script changed: on the `score` view, where every valid script differs from the next in its estimator, it ranked
the scripts of a task it had not seen at chance (out-of-fold Spearman 0.02), while which estimator wins depends
on the task. This model predicts from both:

- **The task card**, computed once per task from what the agent itself is given (``public/train.csv`` and the
  task's type and metric, never the answers): rows, columns, the categorical share, the classes and the
  minority class's share, and *landmarks* -- each estimator family of the menu (:data:`LANDMARKS`), with
  default settings, fitted and scored in the task's own metric on a seeded subsample of ``train.csv``
  (:data:`LANDMARK_ROWS` rows, :data:`LANDMARK_FOLDS`-fold cross-validation). Landmarking is the meta-learning
  way of describing a dataset by how simple learners fare on it; here it also tells which families suit the
  task. It runs in the training process on public data, a few seconds per task once, counted in
  :attr:`card_seconds` (the model's cost, reported beside every result that uses it).
- **The code**: the estimator classes the changed part names (their family, :data:`FAMILIES`), whether a
  classifier is used on a regression task or the reverse, and whether the script reads a name it never
  defines or imports (a ``NameError`` to come).
- **A regressor over both** (scikit-learn's ``HistGradientBoostingRegressor``: it represents task x code
  interactions, e.g. "this family's landmark is the task's best"), fitted to the real reward of executions.
  It is pretrained on executions of the ``world_model`` split only (``benchmarks/pretrain_world_model.py
  --task-aware``: the menu of every task of that split, executed once; its executions and seconds are kept in
  the file as its cost), and keeps learning from the anchors online, as the embedding model does.
- **Exact recall**: a script that executes as one an anchor already ran on the same task (the same
  :func:`~wmrl.autoresearch.environments.executed_form.executed_form` of the changed part) gets that anchor's
  real reward, with the spread of its repeats as variance. On the ``score`` view the real reward is a function of
  the task and the estimator line (every repeated pair in the shipped log got one reward), so one anchor teaches
  a (task, line) cell for the rest of the run.

The variance of a prediction is the regressor's out-of-fold squared error on its training examples (by task
folds, so it is the error on a task it did not see) and, for a recalled script, the variance of its repeats.
Forecast and survival tasks have no landmarks (their scripts are not a menu line): their landmark features are
missing (a value below every real one, which a tree splits off), and recall still applies. The gate is every world model's: no code block
or a syntax error is 0.0, no model call.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import logging
import math
import re
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wmrl.autoresearch.contracts import ComparesWithStarter
from wmrl.autoresearch.environments.executed_form import executed_form
from wmrl.autoresearch.world_models.gate import gate
from wmrl.autoresearch.world_models.learned import changed_part, read_executions, read_pretrained
from wmrl.autoresearch.world_models.lm import FALLBACK_REWARD, MAX_VARIANCE
from wmrl.types import (
    Basis,
    KnowsItsAgreement,
    KnowsItsSeparation,
    LearnsFromAnchors,
    Outcome,
    ReportsMetrics,
    Source,
    Status,
)

if TYPE_CHECKING:
    import numpy as np
    import torch

    from wmrl.autoresearch.tasks.suite import TaskSuite
    from wmrl.types import StepRequest

log = logging.getLogger(__name__)

#: estimator class -> family (scikit-learn's names; the menu's and the usual others)
FAMILIES: dict[str, str] = {
    **dict.fromkeys(("LogisticRegression", "Ridge", "RidgeClassifier", "LinearRegression", "Lasso", "ElasticNet",
                     "SGDClassifier", "SGDRegressor", "LinearSVC", "LinearSVR", "BayesianRidge", "HuberRegressor"),
                    "linear"),
    **dict.fromkeys(("PoissonRegressor", "TweedieRegressor", "GammaRegressor"), "glm"),
    **dict.fromkeys(("RandomForestClassifier", "RandomForestRegressor"), "random_forest"),
    **dict.fromkeys(("ExtraTreesClassifier", "ExtraTreesRegressor"), "extra_trees"),
    **dict.fromkeys(("GradientBoostingClassifier", "GradientBoostingRegressor", "AdaBoostClassifier",
                     "AdaBoostRegressor"), "gradient_boosting"),
    **dict.fromkeys(("HistGradientBoostingClassifier", "HistGradientBoostingRegressor"), "hist_gradient_boosting"),
    **dict.fromkeys(("KNeighborsClassifier", "KNeighborsRegressor"), "knn"),
    **dict.fromkeys(("SVC", "SVR", "NuSVC", "NuSVR"), "svm"),
    **dict.fromkeys(("DecisionTreeClassifier", "DecisionTreeRegressor"), "decision_tree"),
    **dict.fromkeys(("GaussianNB", "BernoulliNB", "MultinomialNB"), "naive_bayes"),
    **dict.fromkeys(("MLPClassifier", "MLPRegressor"), "mlp"),
    **dict.fromkeys(("DummyClassifier", "DummyRegressor"), "dummy"),
}
FAMILY_NAMES = tuple(sorted(set(FAMILIES.values())))
#: the families with a landmark, and the estimator that measures it (classifier, regressor); the menu's settings
LANDMARKS: dict[str, tuple[tuple | None, tuple | None]] = {
    "linear": (("sklearn.linear_model", "LogisticRegression", {"max_iter": 2000}), ("sklearn.linear_model", "Ridge", {})),
    "glm": (None, ("sklearn.linear_model", "PoissonRegressor", {})),
    "random_forest": (("sklearn.ensemble", "RandomForestClassifier", {"random_state": 0}),
                      ("sklearn.ensemble", "RandomForestRegressor", {"random_state": 0})),
    "extra_trees": (("sklearn.ensemble", "ExtraTreesClassifier", {"random_state": 0}),
                    ("sklearn.ensemble", "ExtraTreesRegressor", {"random_state": 0})),
    "gradient_boosting": (("sklearn.ensemble", "GradientBoostingClassifier", {"random_state": 0}),
                          ("sklearn.ensemble", "GradientBoostingRegressor", {"random_state": 0})),
    "hist_gradient_boosting": (("sklearn.ensemble", "HistGradientBoostingClassifier", {"random_state": 0}),
                               ("sklearn.ensemble", "HistGradientBoostingRegressor", {"random_state": 0})),
    "knn": (("sklearn.neighbors", "KNeighborsClassifier", {}), ("sklearn.neighbors", "KNeighborsRegressor", {})),
    "svm": (("sklearn.svm", "SVC", {}), ("sklearn.svm", "SVR", {})),
    "decision_tree": (("sklearn.tree", "DecisionTreeClassifier", {"random_state": 0}),
                      ("sklearn.tree", "DecisionTreeRegressor", {"random_state": 0})),
}
LANDMARK_ROWS = 1000  # rows of train.csv the landmarks are fitted on (seeded subsample)
LANDMARK_FOLDS = 3
TABULAR = ("binary", "multiclass", "regression", "count")
CARD_KEYS = ("log_rows", "log_columns", "categorical_share", "classes", "minority_share", "probability_metric",
             "landmark_spread", "best_landmark_gain")
#: the regressor's feature vector: the task card, then the code's features (one row per script)
FEATURES = (
    *(f"type_{t}" for t in TABULAR), *CARD_KEYS,
    *(f"family_{f}" for f in FAMILY_NAMES), "family_unknown", "kind_mismatch", "undefined_name", "unchanged",
    "landmark_z", "landmark_rank", "landmark_gain_over_starter", "landmark_failed",
)
PRETRAINED_FORMAT = 1
KEY_HEX = 32  # recall keys: 128 bits of a sha256, sent across ranks as 8 16-bit words (exact in float64)
TASK_HEX = 16  # an example's task, by 64 bits of its id's sha256 (4 words): the folds of the error estimate
_CALLED_CLASS = re.compile(r"\b([A-Z][A-Za-z0-9_]*)\s*\(")
_ESTIMATOR_SUFFIXES = ("Classifier", "Regressor", "Regression")


def estimator_classes(code: str) -> list[str]:
    """The estimator-like class names ``code`` calls, in order (known ones and unknown ones alike).

    >>> estimator_classes("model = make_pipeline(preprocess, RandomForestClassifier(random_state=0))")
    ['RandomForestClassifier']
    >>> estimator_classes("m = SupinetreesClassifier(); p = make_pipeline(StandardScaler(), SVC())")
    ['SupinetreesClassifier', 'SVC']
    """
    return [name for name in _CALLED_CLASS.findall(code) if name in FAMILIES or name.endswith(_ESTIMATOR_SUFFIXES)]


def undefined_names(code: str) -> set[str]:
    """Names ``code`` loads that nothing in it defines or imports, nor Python's builtins (a ``NameError`` when
    that line runs). Conservative: any binding anywhere in the script counts, whatever its scope."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set()
    bound = set(dir(builtins))
    loaded: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            if any(alias.name == "*" for alias in node.names):
                return set()  # a star import binds what it binds: nothing can be said
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
            args = node.args if not isinstance(node, ast.ClassDef) else None
            if args is not None:
                bound.update(a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs])
                bound.update(a.arg for a in (args.vararg, args.kwarg) if a is not None)
        elif isinstance(node, ast.Lambda):
            bound.update(a.arg for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs])
        elif isinstance(node, ast.Name):
            (bound if isinstance(node.ctx, ast.Store | ast.Del) else loaded).add(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.Global | ast.Nonlocal):
            bound.update(node.names)
        elif isinstance(node, ast.MatchAs | ast.MatchStar) and node.name:
            bound.add(node.name)
    return loaded - bound


def code_features(changed: str, script: str, task_type: str) -> dict[str, float]:
    """The code's features (before the landmarks): family one-hot, unknown estimator, kind mismatch, undefined
    name, unchanged script."""
    classes = estimator_classes(changed)
    families = {FAMILIES[c] for c in classes if c in FAMILIES}
    out = {f"family_{f}": float(f in families) for f in FAMILY_NAMES}
    out["family_unknown"] = float(any(c not in FAMILIES for c in classes))
    classifier = any(c.endswith(("Classifier", "SVC", "NB")) or c == "LogisticRegression" for c in classes)
    regressor = any(c.endswith(("Regressor", "SVR", "Regression")) and c != "LogisticRegression" or
                    c in ("Ridge", "Lasso", "ElasticNet") for c in classes)
    classify = task_type in ("binary", "multiclass", "ordinal")
    out["kind_mismatch"] = float((classify and regressor and not classifier) or
                                 (not classify and task_type in TABULAR and classifier and not regressor))
    out["undefined_name"] = float(bool(undefined_names(script)))
    out["unchanged"] = float(changed.strip() == "# (the starter solution, unchanged)")
    return out


def _estimator(where: tuple):
    import importlib

    module, name, kwargs = where
    return getattr(importlib.import_module(module), name)(**kwargs)


def task_card(task: Any) -> dict[str, Any]:
    """The task card of a built task: its statistics and each landmark family's score (higher is better, the
    metric's sign applied; ``None`` where the family's estimator fails on the task, as a script using it would).

    Reads ``public/train.csv`` only (what the agent's script reads). Landmarks exist for tabular tasks.
    """
    import numpy as np
    import pandas as pd

    from wmrl.autoresearch.tasks.card import column_kinds
    from wmrl.autoresearch.tasks.metrics import METRICS

    spec = task.spec
    train = pd.read_csv(Path(task.root) / "public" / "train.csv")
    target = spec.target[0]
    features = train.drop(columns=[c for c in (*spec.target, "id") if c in train.columns])
    kinds = column_kinds(features, ())
    classify = spec.type in ("binary", "multiclass", "ordinal")
    counts = train[target].value_counts(normalize=True) if classify else None
    card: dict[str, Any] = {
        "type": spec.type,
        "log_rows": math.log10(max(len(train), 1)),
        "log_columns": math.log10(max(features.shape[1], 1)),
        "categorical_share": sum(k == "categorical" for k in kinds.values()) / max(len(kinds), 1),
        "classes": float(len(counts)) if counts is not None else 0.0,
        "minority_share": float(counts.min()) if counts is not None else 0.0,
        "probability_metric": float(METRICS[spec.metric].prediction == "probability"),
        "landmarks": {},
    }
    if spec.type not in TABULAR:
        return card
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.model_selection import KFold, StratifiedKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    rows = np.sort(rng.permutation(len(train))[:LANDMARK_ROWS])
    x, y = features.iloc[rows].reset_index(drop=True), train[target].iloc[rows].reset_index(drop=True)
    numeric = [c for c, k in kinds.items() if k == "numeric"]
    categorical = [c for c, k in kinds.items() if k == "categorical"]
    x = x.astype({c: str for c in categorical})
    preprocess = ColumnTransformer([
        ("numeric", make_pipeline(SimpleImputer(strategy="median"), StandardScaler()), numeric),
        ("categorical", OneHotEncoder(handle_unknown="ignore", max_categories=20), categorical),
    ])
    metric = METRICS[spec.metric]
    stratified = classify and counts is not None and int(y.value_counts().min()) >= LANDMARK_FOLDS
    folds = (StratifiedKFold if stratified else KFold)(LANDMARK_FOLDS, shuffle=True, random_state=0)
    for family, (classifier, regressor) in LANDMARKS.items():
        where = classifier if classify else regressor
        if where is None:
            continue
        scores = []
        try:
            for fit, val in folds.split(x, y if stratified else None):
                model = make_pipeline(preprocess, _estimator(where))
                # one thread, as a sandboxed run has: OpenMP's threads on a busy 2-core host cost 10x on boosting
                with warnings.catch_warnings(), threadpool_limits(1):
                    warnings.simplefilter("ignore")
                    model.fit(x.iloc[fit], y.iloc[fit])
                    if metric.prediction == "probability":  # as the starters predict (their predict() helper)
                        prediction = model.predict_proba(x.iloc[val])[:, 1]
                    elif metric.prediction == "positive":
                        prediction = np.maximum(model.predict(x.iloc[val]), 1e-3)
                    else:
                        prediction = model.predict(x.iloc[val])
                    score = metric.fn(pd.DataFrame({target: y.iloc[val].to_numpy()}), np.asarray(prediction))
                if not math.isfinite(score):
                    raise ValueError("non-finite score")
                scores.append(score if metric.higher_is_better else -score)
            card["landmarks"][family] = float(np.mean(scores))
        except Exception:  # noqa: BLE001 -- a family that fails here fails in the script too: that is the signal
            card["landmarks"][family] = None
    return card


def card_features(card: dict[str, Any]) -> dict[str, float]:
    """The task card as features: type one-hot, statistics, the landmarks' spread and the best family's gain
    over the linear starter's, in units of the spread."""
    import numpy as np

    out = {f"type_{t}": float(card["type"] == t) for t in TABULAR}
    out.update({k: float(card[k]) for k in ("log_rows", "log_columns", "categorical_share", "classes",
                                               "minority_share", "probability_metric")})
    values = [v for v in card["landmarks"].values() if v is not None]
    spread = float(np.std(values)) if len(values) >= 2 else math.nan
    linear = card["landmarks"].get("linear")
    out["landmark_spread"] = spread
    out["best_landmark_gain"] = (max(values) - linear) / spread if values and linear is not None and spread > 0 \
        else math.nan
    return out


def landmark_features(card: dict[str, Any], families: set[str]) -> dict[str, float]:
    """Where the script's families stand among the task's landmarks: z-score, rank (1 = best), gain over the
    linear starter's landmark (in units of the spread), and whether a family of it failed its landmark."""
    import numpy as np

    landmarks = card["landmarks"]
    mine = [landmarks[f] for f in families if f in landmarks]
    values = [v for v in landmarks.values() if v is not None]
    out = {"landmark_z": math.nan, "landmark_rank": math.nan, "landmark_gain_over_starter": math.nan,
           "landmark_failed": float(any(v is None for v in mine))}
    scored = [v for v in mine if v is not None]
    if not scored or len(values) < 2:
        return out
    value, mean, spread = float(np.mean(scored)), float(np.mean(values)), float(np.std(values))
    out["landmark_rank"] = sum(v <= value for v in values) / len(values)
    if spread > 0:
        out["landmark_z"] = (value - mean) / spread
        linear = landmarks.get("linear")
        if linear is not None:
            out["landmark_gain_over_starter"] = (value - linear) / spread
    return out


class TaskAwareWorldModel(ComparesWithStarter, LearnsFromAnchors, ReportsMetrics, KnowsItsAgreement,
                          KnowsItsSeparation):
    """A world model over the task card and the code (see the module docstring).

    Args:
        pretrained: a file written by :meth:`save` (``benchmarks/pretrain_world_model.py --task-aware`` builds
            one from the ``world_model`` split's executions): examples and regressor, loaded before the first step.
        warm_start: execution logs (JSONL) to learn from before the first step.
        min_examples: examples before the regressor answers; the prior until then.
        refit_every: refit after this many new examples.
        capacity: FIFO cap on the examples kept.
        recall: answer a script an anchor already executed on the same task with that anchor's real reward.
        suite: the task suite (default: the shipped catalogue).
        cache_cards: keep each task's card in ``<suite cache>/task_cards/<task>-<data hash>.json`` (landmarks are
            deterministic for a task's data).
        landmarks: use the landmarks (``False``: the card's statistics and the code only; what the landmarks add
            is measured with it, ``benchmarks/world_model_fidelity.py --unseen``).
    """

    source = Source.WORLD_MODEL

    def __init__(self, pretrained: str | None = None, warm_start: list[str] | None = None, min_examples: int = 16,
                 refit_every: int = 8, capacity: int = 8192, recall: bool = True,
                 suite: TaskSuite | Any | None = None, cache_cards: bool = True, landmarks: bool = True) -> None:
        for key, (value, least) in {"min_examples": (min_examples, 2), "refit_every": (refit_every, 1),
                                    "capacity": (capacity, 2)}.items():
            if value < least:
                raise ValueError(f"TaskAwareWorldModel {key} must be >= {least} (got {value})")
        self.pretrained, self.warm_start = pretrained, list(warm_start or [])
        self.min_examples, self.refit_every, self.capacity, self.recall = min_examples, refit_every, capacity, recall
        self._suite, self.cache_cards, self.landmarks = suite, cache_cards, landmarks
        self._starter_of: Callable[[str], str] | None = None
        self._starter_forms: dict[str, str] = {}  # task -> its starter as it executes (what scripts differ from)
        self._memory: dict[str, list[float]] | None = None  # recall key -> real rewards; rebuilt after learning
        self.cards: dict[str, dict] = {}
        self.examples: list[list[float]] = []  # feature vector, real reward
        self.keys: list[str] = []  # recall key of each example
        self.tasks: list[str] = []  # its task (hashed)
        self.regressor: Any = None
        self.error_variance = MAX_VARIANCE
        self.out_of_fold = None  # the last refit's out-of-fold predictions, by task
        self._pretrained_agreement: tuple[float, float] | None = None
        self.pretrained_meta: dict = {}
        self._ready = False
        self.since_fit = self.refits = self.calls = self.recalled = self.untrained_answers = 0
        self.seconds = self.card_seconds = 0.0
        self.card_seconds_cached = 0.0  # what the cards read from the cache cost when they were computed

    @property
    def suite(self) -> TaskSuite | Any:
        if self._suite is None:
            from wmrl.autoresearch.tasks.suite import TaskSuite

            self._suite = TaskSuite()
        return self._suite

    def compare_with(self, starter: Callable[[str], str]) -> None:
        """Read scripts against ``starter(task_id)``, the starter the agent is shown."""
        self._starter_of = starter
        self._starter_forms.clear()

    def _starter(self, task_id: str) -> str:
        return self._starter_of(task_id) if self._starter_of is not None else self.suite.get(task_id).starter

    def card(self, task_id: str) -> dict:
        """The task's card, computed once (its seconds added to :attr:`card_seconds`) or read from the cache (the
        seconds it cost then added to :attr:`card_seconds_cached`: a run that reuses cards still reports them)."""
        if task_id not in self.cards:
            import json

            task = self.suite.get(task_id)
            digest = hashlib.sha256(json.dumps(task.data_sha256, sort_keys=True).encode()).hexdigest()[:16]
            path = Path(self.suite.cache_dir) / "task_cards" / f"{task_id}-{digest}.json"
            if self.cache_cards and path.is_file():
                self.cards[task_id] = json.loads(path.read_text())
                self.card_seconds_cached += float(self.cards[task_id].get("seconds", 0.0))
            else:
                start = time.perf_counter()
                card = task_card(task)
                card["seconds"] = time.perf_counter() - start
                self.card_seconds += card["seconds"]
                self.cards[task_id] = card
                if self.cache_cards:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(json.dumps(card))
        return self.cards[task_id]

    def copy(self) -> TaskAwareWorldModel:
        """A copy with its own examples that shares this one's cards, starter and fitted regressor until it refits:
        what the copy learns next leaves this one as it is."""
        self._ensure_ready()
        other = TaskAwareWorldModel(None, None, self.min_examples, self.refit_every, self.capacity, self.recall,
                                    self._suite, self.cache_cards, self.landmarks)
        other.cards, other._starter_of, other._starter_forms, other._ready = self.cards, self._starter_of, \
            dict(self._starter_forms), True
        other.examples, other.keys, other.tasks = list(self.examples), list(self.keys), list(self.tasks)
        other.regressor, other.error_variance, other.since_fit = self.regressor, self.error_variance, self.since_fit
        return other

    def _changed(self, task_id: str, script: str) -> str:
        """What ``script`` changes against the task's starter, both read as they execute."""
        if task_id not in self._starter_forms:
            self._starter_forms[task_id] = executed_form(self._starter(task_id))
        return changed_part(executed_form(script), self._starter_forms[task_id])

    def features(self, task_id: str, script: str) -> list[float]:
        """The feature vector (:data:`FEATURES`) of ``script`` on ``task_id``."""
        return self._features(task_id, script, self._changed(task_id, script))

    def key(self, task_id: str, script: str) -> str:
        """What recall matches: the task and the changed part as it executes."""
        return _key(task_id, self._changed(task_id, script))

    def _features(self, task_id: str, script: str, changed: str) -> list[float]:
        card = self.card(task_id)
        if not self.landmarks:
            card = {**card, "landmarks": {}}
        row = {**card_features(card), **code_features(changed, script, card["type"])}
        families = {f for f in FAMILY_NAMES if row[f"family_{f}"]}
        row.update(landmark_features(card, families))
        return [row[name] for name in FEATURES]

    # -- learning --------------------------------------------------------------------------------------
    def _ensure_ready(self) -> None:
        if self._ready:
            return
        self._ready = True
        if self.pretrained is not None and not self.examples:
            self._load_pretrained(self.pretrained)
        if self.warm_start:
            known = {spec.id for spec in self.suite.specs()}
            records = [r for path in self.warm_start for r in read_executions(path) if r[0] in known]
            self.learn([r[0] for r in records], [r[1] for r in records], [r[2] for r in records])

    def example_rows(self, task_ids: Sequence[str], scripts: Sequence[str], outcomes: Sequence[Outcome]) -> torch.Tensor:
        """``[n, len(FEATURES) + 13]`` float64 rows of the learnable outcomes (real, not missing, not gated): the
        features, the real reward, the recall key and the task as 16-bit words (numbers, so ranks can gather them)."""
        import torch

        keep = [i for i, o in enumerate(outcomes) if o.source is Source.REAL and o.reward is not None
                and o.status not in (Status.MALFORMED, Status.SYNTAX_ERR, Status.INFRA_ERROR)]
        rows = []
        for i in keep:
            changed = self._changed(task_ids[i], scripts[i])
            words = _words(_key(task_ids[i], changed)) + _words(_task_hex(task_ids[i]))
            rows.append([*self._features(task_ids[i], scripts[i], changed), float(outcomes[i].reward), *words])
        return torch.tensor(rows, dtype=torch.float64).reshape(len(rows), len(FEATURES) + 1 + (KEY_HEX + TASK_HEX) // 4)

    def learn(self, task_ids: Sequence[str], scripts: Sequence[str], outcomes: Sequence[Outcome],
              gather: Callable[[torch.Tensor], torch.Tensor] | None = None) -> bool:
        """Add the learnable outcomes as examples (every rank's when ``gather`` is given); refit on cadence."""
        rows = self.example_rows(task_ids, scripts, outcomes)
        if gather is not None:
            rows = gather(rows)
        n, k = len(FEATURES) + 1, KEY_HEX // 4
        for row in rows.tolist():
            self.examples.append(row[:n])
            self.keys.append(_hex(row[n : n + k]))
            self.tasks.append(_hex(row[n + k :]))
        del self.examples[: -self.capacity], self.keys[: -self.capacity], self.tasks[: -self.capacity]
        self._memory = None
        self.since_fit += len(rows)
        if len(rows) and (self.since_fit >= self.refit_every or self.regressor is None):
            return self.refit()
        return False

    def observe(self, requests: Sequence[StepRequest], outcomes: Sequence[Outcome],
                gather: Callable[[torch.Tensor], torch.Tensor] | None = None) -> bool:
        """Learn from the anchors' real outcomes, after they were side-graded."""
        self._ensure_ready()
        start = time.perf_counter()
        refit = self.learn([r.task_id for r in requests], [r.code or "" for r in requests], outcomes, gather)
        self.seconds += time.perf_counter() - start
        return refit

    def refit(self) -> bool:
        """Fit the regressor on every example (needs ``min_examples``), and its error variance out of fold."""
        import numpy as np

        if len(self.examples) < self.min_examples:
            return False
        data = np.asarray(self.examples, dtype=float)
        x, y = _missing_as_value(data[:, :-1]), data[:, -1]
        self.regressor = _regressor().fit(x, y)
        predicted = out_of_fold_predictions(x, y, self.tasks)
        self.error_variance = min(float(np.mean((predicted - y) ** 2)), MAX_VARIANCE)
        self.out_of_fold = predicted
        self.since_fit = 0
        self.refits += 1
        return True

    # -- the environment protocol ----------------------------------------------------------------------
    def predict(self, task_ids: Sequence[str], scripts: Sequence[str]) -> np.ndarray:
        """The regressor's reward for each script (no recall, no gate): what :meth:`step_many` answers with."""
        return self._predict([self.features(t, s) for t, s in zip(task_ids, scripts, strict=True)])

    def _predict(self, rows: Sequence[Sequence[float]]) -> np.ndarray:
        import numpy as np

        return np.clip(self.regressor.predict(_missing_as_value(np.asarray(rows, dtype=float))), 0.0, 1.0)

    def memory(self) -> dict[str, list[float]]:
        """Recall key -> the real rewards of the examples with that key (built once after each change)."""
        if self._memory is None:
            self._memory = {}
            for key, row in zip(self.keys, self.examples, strict=True):
                self._memory.setdefault(key, []).append(row[-1])
        return self._memory

    def step_many(self, requests: Sequence[StepRequest]) -> list[Outcome]:
        """Predict the outcome of each turn's code (gated ones without a model call)."""
        import numpy as np

        outcomes, todo = gate(requests)
        if not todo:
            return outcomes  # type: ignore[return-value]
        self._ensure_ready()
        start = time.perf_counter()
        asked = [(requests[i].task_id, requests[i].code or "") for i in todo]
        changed = [self._changed(t, code) for t, code in asked]
        memory = self.memory() if self.recall else {}
        seen = [memory.get(_key(t, c)) for (t, _), c in zip(asked, changed, strict=True)]
        unseen = [k for k, s in enumerate(seen) if not s]
        predictions = {}
        if self.regressor is not None and unseen:
            rows = [self._features(*asked[k], changed[k]) for k in unseen]
            predictions = dict(zip(unseen, self._predict(rows).tolist(), strict=True))
        for k, i in enumerate(todo):
            if seen[k]:
                self.recalled += 1
                outcomes[i] = _outcome(float(np.mean(seen[k])), max(float(np.var(seen[k])), 1e-4),
                                       f"an anchor executed this script on this task ({len(seen[k])}x)")
            elif k in predictions:
                outcomes[i] = _outcome(predictions[k], self.error_variance, "predicted from the task card")
            else:
                outcomes[i] = self._prior()
        self.seconds += time.perf_counter() - start
        self.calls += len(todo)
        return outcomes  # type: ignore[return-value]

    def separation(self, task_id: str) -> float | None:
        """How far apart this model's rewards lie for the model lines the task's prompt offers (the standard deviation
        of its answers over them, recalled ones included), asked before a group is rolled out: ``None`` for a task
        whose starter has no model line to choose (forecast, survival) or before the regressor is fitted.

        On the train split's menu (``benchmarks/anchor_value.py``) the tasks it separates least are the ones it ranks
        worst (Spearman 0.38 across 40 tasks between the two), but also the ones whose lines score alike for real
        (0.82): anchors placed there did worse in training than anchors at random (``AnchorRouting``'s
        ``least_separated``)."""
        import numpy as np

        from wmrl.autoresearch.tasks.model_choice import candidate_lines, with_model_line

        self._ensure_ready()
        if self.regressor is None:
            return None
        starter = self._starter(task_id)
        try:
            scripts = [with_model_line(starter, line) for line in candidate_lines(starter)]
        except ValueError:
            return None
        changed = [self._changed(task_id, script) for script in scripts]
        memory = self.memory() if self.recall else {}
        predicted = self._predict([self._features(task_id, s, c) for s, c in zip(scripts, changed, strict=True)])
        answers = [float(np.mean(memory[_key(task_id, c)])) if memory.get(_key(task_id, c)) else float(p)
                   for c, p in zip(changed, predicted, strict=True)]
        return float(np.std(answers))

    def _prior(self) -> Outcome:
        self.untrained_answers += 1
        seen = [row[-1] for row in self.examples]
        return Outcome(status=Status.RUNTIME_ERR, reward=float(sum(seen) / len(seen)) if seen else FALLBACK_REWARD,
                       feedback="Simulated execution (task-aware world model): not enough real executions seen yet.",
                       source=Source.WORLD_MODEL, error="world_model: untrained", variance=MAX_VARIANCE,
                       basis=Basis.PRIOR)

    def metrics(self) -> dict[str, float]:
        """Logged as ``world_model/*``: examples, refits, recalled answers, the cards' seconds (computed in this run,
        and read from the cache at what they cost when computed)."""
        return {"parse_failures": 0.0, "examples": float(len(self.examples)), "refits": float(self.refits),
                "recalled": float(self.recalled), "card_seconds": self.card_seconds,
                "card_seconds_cached": self.card_seconds_cached}

    # -- a pretrained model ----------------------------------------------------------------------------
    def save(self, path: str | Path, meta: dict | None = None) -> Path:
        """Write the examples (the regressor is refit from them on load) and ``meta`` (e.g. the build's cost)."""
        import torch

        if self.regressor is None:
            raise ValueError(f"TaskAwareWorldModel.save: nothing learned yet (it needs {self.min_examples} examples)")
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"format": PRETRAINED_FORMAT, "features": list(FEATURES), "examples": self.examples,
                    "keys": self.keys, "tasks": self.tasks, "meta": dict(meta or {})}, path)
        return path

    def _load_pretrained(self, path: str) -> None:
        build = "python benchmarks/pretrain_world_model.py --task-aware"
        state = read_pretrained(path, "TaskAwareWorldModel", PRETRAINED_FORMAT, build)
        if state.get("features") != list(FEATURES):
            raise ValueError(f"TaskAwareWorldModel pretrained={path!r} (world_model.init_args.pretrained): written by "
                             f"another version (its features differ): rebuild it with `{build}`")
        self.examples, self.keys, self.tasks = [list(r) for r in state["examples"]], list(state["keys"]), list(state["tasks"])
        self._memory = None
        self.pretrained_meta = dict(state.get("meta") or {})
        self.refit()
        real = [row[-1] for row in self.examples]
        self._pretrained_agreement = within_task_agreement(self.out_of_fold, real, self.tasks)
        log.info("TaskAwareWorldModel: %d pretrained examples from %s (within-task agreement on tasks left out: "
                 "%.3f over %.0f degrees of freedom)", len(self.examples), path, *self._pretrained_agreement)

    def agreement_prior(self) -> tuple[float, float] | None:
        """How well the pretrained model ranked scripts on tasks it was not fitted on (out of fold by task: the
        pooled within-task correlation and its degrees of freedom), ``None`` without a pretrained file (or when
        this model continues from a checkpoint: the run that wrote it had the prior already)."""
        self._ensure_ready()
        return self._pretrained_agreement

    # -- checkpointing ---------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {"examples": self.examples, "keys": self.keys, "tasks": self.tasks, "since_fit": self.since_fit, "refits": self.refits,
                "cards": self.cards, "ready": self._ready}

    def load_state_dict(self, state: dict) -> None:
        self.examples, self.keys, self.tasks = [list(r) for r in state["examples"]], list(state["keys"]), list(state["tasks"])
        self._memory = None
        self.cards, self._ready = dict(state["cards"]), state["ready"]
        refits = state["refits"]
        self.regressor = None
        if self.examples:
            self.refit()
        self.since_fit, self.refits = state["since_fit"], refits


def _key(task_id: str, changed: str) -> str:
    """The recall key of a script by its task and what it changes (as it executes)."""
    return hashlib.sha256(f"{task_id}\n{changed}".encode()).hexdigest()[:KEY_HEX]


def _task_hex(task_id: str) -> str:
    return hashlib.sha256(task_id.encode()).hexdigest()[:TASK_HEX]


def _words(hex_digits: str) -> list[float]:
    return [float(int(hex_digits[k : k + 4], 16)) for k in range(0, len(hex_digits), 4)]


def _hex(words: Sequence[float]) -> str:
    return "".join(f"{int(w):04x}" for w in words)


MISSING = -10.0  # a missing feature (no landmark, a failed one) as a value below every real one


def _missing_as_value(x: np.ndarray) -> np.ndarray:
    """NaN features as :data:`MISSING`: a tree splits them off as its own bin (scikit-learn's own NaN bins fail
    to fit on a handful of rows whose column is all NaN, as a run's first anchors on one task can be)."""
    import numpy as np

    return np.nan_to_num(x, nan=MISSING)


def _regressor():
    from sklearn.ensemble import HistGradientBoostingRegressor

    return HistGradientBoostingRegressor(max_iter=200, learning_rate=0.05, max_depth=3, min_samples_leaf=8,
                                         l2_regularization=1.0, random_state=0)


def out_of_fold_predictions(x: np.ndarray, y: np.ndarray, groups: Sequence[str], folds: int = 5) -> np.ndarray:
    """The regressor's prediction of each example from a fit without it, folds by ``groups`` (the task, so each is a
    prediction on a task it did not see); the examples' mean everywhere when there are too few groups."""
    import numpy as np

    names = sorted(set(groups))
    if len(names) < 2:
        return np.full(len(y), float(np.mean(y)))
    fold_of = {g: k % folds for k, g in enumerate(names)}
    fold = np.array([fold_of[g] for g in groups])
    predicted = np.zeros(len(y))
    for k in set(fold.tolist()):
        inside = fold != k
        predicted[~inside] = _regressor().fit(x[inside], y[inside]).predict(x[~inside])
    return predicted


def within_task_agreement(predicted: Sequence[float], real: Sequence[float], tasks: Sequence[str]) -> tuple[float, float]:
    """The pooled within-task correlation of ``predicted`` with ``real`` rewards and its degrees of freedom (the
    statistic :class:`~wmrl.algorithms.fusion.AgreementEstimate` measures on anchor groups, undecayed)."""
    import math

    import numpy as np

    from wmrl.algorithms.fusion import AgreementEstimate

    estimate = AgreementEstimate(half_life=math.inf)
    tasks = np.asarray(tasks)
    for task in sorted(set(tasks.tolist())):
        rows = tasks == task
        estimate.observe(np.asarray(predicted)[rows], np.asarray(real)[rows])
    return estimate.agreement, estimate.dof


def _outcome(reward: float, variance: float, why: str) -> Outcome:
    """A predicted outcome on the reward ladder (>= 0.5: a valid submission at position ``2 * reward - 1``)."""
    reward = min(max(reward, 0.0), 1.0)
    valid = reward >= 0.5
    return Outcome(status=Status.VALID if valid else Status.RUNTIME_ERR, reward=reward,
                   position=2 * reward - 1 if valid else None,
                   feedback=f"Simulated execution (task-aware world model, {why}): reward {reward:.2f}",
                   source=Source.WORLD_MODEL, variance=min(variance, MAX_VARIANCE))
