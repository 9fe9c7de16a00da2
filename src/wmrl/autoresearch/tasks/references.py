"""Reference solutions: the scripts whose scores make a task's leaderboard.

A submission's reward is its percentile among these scores, so the set must span the quality range an agent
can reach: a trivial floor, the linear baseline (also the starter solution shown in the prompt, so it stays
short and readable), and stronger or differently-biased models (neighbours, shallow and deep trees, boosting,
bagged boosting). Each script follows the solution contract exactly (reads ``public/*.csv``, writes
``submission.csv``), is deterministic (fixed seeds, one thread) and imports no dataset package.

The scripts are Python files under ``tasks/solutions/`` (a frame per task type, one part per forecaster and risk
model); this module chooses, per task, the model, its imports and the values of the frames' slots
(:mod:`wmrl.autoresearch.tasks.script_files`).
"""

from __future__ import annotations

from wmrl.autoresearch.tasks.script_files import fill, part
from wmrl.autoresearch.tasks.spec import TaskSpec

_SEASONAL_PERIODS = {
    "co2_forecast": 12,
    "sunspots_forecast": 11,
    "elnino_forecast": 12,
    "unemployment_forecast": 4,
    "seattle_temps_forecast": 24,
    "us_employment_forecast": 12,
    "air_passengers_forecast": 12,
    "us_electricity_forecast": 12,
    "antidiabetic_sales_forecast": 12,
}

_PREDICTION = {
    "label": "model.predict(features(frame))",
    "probability": "model.predict_proba(features(frame))[:, 1]",
    "real": "model.predict(features(frame))",
    "positive": "np.maximum(model.predict(features(frame)), 1e-3)",
}

_SCORE = {
    "accuracy": ("from sklearn.metrics import accuracy_score", "accuracy_score({y}, {p})"),
    "macro_f1": ("from sklearn.metrics import f1_score", 'f1_score({y}, {p}, average="macro")'),
    "roc_auc": ("from sklearn.metrics import roc_auc_score", "roc_auc_score({y}, {p})"),
    "log_loss": ("from sklearn.metrics import log_loss", "log_loss({y}, {p})"),
    "rmse": ("from sklearn.metrics import root_mean_squared_error", "root_mean_squared_error({y}, {p})"),
    "mae": ("from sklearn.metrics import mean_absolute_error", "mean_absolute_error({y}, {p})"),
    "poisson_deviance": (
        "from sklearn.metrics import mean_poisson_deviance",
        "mean_poisson_deviance({y}, {p})",
    ),
    "smape": ("", "100 * np.mean(2 * np.abs({p} - {y}) / (np.abs({y}) + np.abs({p})))"),
}


def reference_solutions(spec: TaskSpec, columns: dict[str, str]) -> dict[str, str]:
    """Complete solution scripts for ``spec``, keyed by name; ``linear_baseline`` is the starter solution.

    Args:
        spec: the task.
        columns: feature column -> ``numeric`` | ``categorical``, as in the public train file.

    Returns:
        At least eight scripts, each runnable as ``python solution.py`` in a task's working directory.
    """
    from wmrl.autoresearch.tasks.metrics import METRICS

    kind = METRICS[spec.metric].prediction
    if spec.type == "forecast":
        return _forecast_solutions(spec)
    if spec.type == "survival":
        return _survival_solutions(spec, columns)
    categorical = [c for c, k in columns.items() if k == "categorical" and c not in (*spec.target, "id")]
    return _tabular_solutions(spec, kind, categorical)


# --- tabular: binary, multiclass, regression, count ---------------------------------------------------------

_TABULAR_IMPORTS = (
    "from sklearn.compose import ColumnTransformer",
    "from sklearn.impute import SimpleImputer",
    "from sklearn.model_selection import train_test_split",
    "from sklearn.pipeline import make_pipeline",
)
_LINEAR_STEPS = 'make_pipeline(SimpleImputer(strategy="median"), StandardScaler())'
_ONE_HOT = 'OneHotEncoder(handle_unknown="ignore")'
_ONE_HOT_DENSE = 'OneHotEncoder(handle_unknown="ignore", sparse_output=False)'
_ORDINAL = 'OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1)'
_MEDIAN = 'SimpleImputer(strategy="median")'


def _tabular_solutions(spec: TaskSpec, kind: str, categorical: list[str]) -> dict[str, str]:
    target = spec.target[0]
    classify = spec.type in ("binary", "multiclass")
    linear_prep = (_LINEAR_STEPS, _ONE_HOT, "from sklearn.preprocessing import OneHotEncoder, StandardScaler")
    dense_prep = (
        _LINEAR_STEPS,
        _ONE_HOT_DENSE,
        "from sklearn.preprocessing import OneHotEncoder, StandardScaler",
    )
    tree_prep = (_MEDIAN, _ORDINAL, "from sklearn.preprocessing import OrdinalEncoder")

    if classify:
        models = {
            "linear_baseline": (
                linear_prep,
                "from sklearn.linear_model import LogisticRegression",
                "LogisticRegression(max_iter=2000)",
            ),
            "linear_strong_l2": (
                linear_prep,
                "from sklearn.linear_model import LogisticRegression",
                "LogisticRegression(C=0.01, max_iter=2000)",
            ),
            "knn": (
                linear_prep,
                "from sklearn.neighbors import KNeighborsClassifier",
                "KNeighborsClassifier(n_neighbors=15)",
            ),
            "naive_bayes": (dense_prep, "from sklearn.naive_bayes import GaussianNB", "GaussianNB()"),
            "decision_tree_shallow": (
                tree_prep,
                "from sklearn.tree import DecisionTreeClassifier",
                "DecisionTreeClassifier(max_depth=3, random_state=0)",
            ),
            "random_forest": (
                tree_prep,
                "from sklearn.ensemble import RandomForestClassifier",
                "RandomForestClassifier(n_estimators=300, random_state=0)",
            ),
            "extra_trees": (
                tree_prep,
                "from sklearn.ensemble import ExtraTreesClassifier",
                "ExtraTreesClassifier(n_estimators=300, min_samples_leaf=2, random_state=0)",
            ),
            "gradient_boosting": (
                tree_prep,
                "from sklearn.ensemble import HistGradientBoostingClassifier",
                "HistGradientBoostingClassifier(random_state=0)",
            ),
        }
    else:
        models = {
            "linear_baseline": (linear_prep, "from sklearn.linear_model import Ridge", "Ridge(alpha=1.0)"),
            "lasso": (
                linear_prep,
                "from sklearn.linear_model import LassoCV",
                "LassoCV(cv=5, random_state=0)",
            ),
            "knn": (
                linear_prep,
                "from sklearn.neighbors import KNeighborsRegressor",
                "KNeighborsRegressor(n_neighbors=15)",
            ),
            "decision_tree_shallow": (
                tree_prep,
                "from sklearn.tree import DecisionTreeRegressor",
                "DecisionTreeRegressor(max_depth=3, random_state=0)",
            ),
            "random_forest": (
                tree_prep,
                "from sklearn.ensemble import RandomForestRegressor",
                "RandomForestRegressor(n_estimators=300, min_samples_leaf=2, random_state=0)",
            ),
            "extra_trees": (
                tree_prep,
                "from sklearn.ensemble import ExtraTreesRegressor",
                "ExtraTreesRegressor(n_estimators=300, min_samples_leaf=2, random_state=0)",
            ),
            "gradient_boosting": (
                tree_prep,
                "from sklearn.ensemble import HistGradientBoostingRegressor",
                "HistGradientBoostingRegressor(random_state=0)",
            ),
        }
        if kind == "positive":
            models["linear_baseline"] = (
                linear_prep,
                "from sklearn.linear_model import PoissonRegressor",
                "PoissonRegressor(alpha=1e-3, max_iter=1000)",
            )
            del models["lasso"]
            models["log_linear"] = (
                linear_prep,
                "from sklearn.compose import TransformedTargetRegressor\n"
                "from sklearn.linear_model import Ridge",
                "TransformedTargetRegressor(Ridge(), func=np.log1p, inverse_func=np.expm1)",
            )
            models["gradient_boosting"] = (
                tree_prep,
                "from sklearn.ensemble import HistGradientBoostingRegressor",
                'HistGradientBoostingRegressor(loss="poisson", random_state=0)',
            )

    score_import, score_template = _SCORE[spec.metric]
    scripts = {"trivial": _trivial_tabular(target, kind)}
    for name, (prep, model_import, model) in models.items():
        scripts[name] = _tabular_script(spec, kind, categorical, prep, model_import, model)
    scripts["gradient_boosting_bagged"] = _bagged(spec, kind, categorical, score_import, score_template)
    return scripts


def _tabular_script(
    spec: TaskSpec, kind: str, categorical: list[str], prep: tuple[str, str, str], model_import: str, model: str
) -> str:
    numeric_steps, categorical_step, prep_import = prep
    score_import, score_template = _SCORE[spec.metric]
    imports = {*model_import.split("\n"), prep_import, score_import, *_TABULAR_IMPORTS}
    return fill(
        "tabular",
        imports="\n" + "\n".join(sorted(imports)),
        target=spec.target[0],
        categorical=repr(categorical),
        prediction=_PREDICTION[kind],
        numeric_steps=numeric_steps,
        categorical_step=categorical_step,
        model=model,
        stratify=", stratify=train[target]" if spec.type in ("binary", "multiclass") else "",
        score=score_template.format(y="val[target]", p="predict(val)"),
    )


#: The heavy execution tier's starter (``SandboxEnvironment(starter_solution="heavy_boosting")``): the linear
#: baseline's script with a long gradient-boosting run instead of the linear model (no early stopping), so that a
#: typical solution costs what heavy AutoResearch work costs (docs/findings.md: 30-120 s of one core on the
#: heavy tasks) while the part an agent writes keeps the baseline's shape. Not a leaderboard reference.
HEAVY_STARTER = "heavy_boosting"
_HEAVY_PARAMS = "max_iter=1000, learning_rate=0.05, max_leaf_nodes=31, early_stopping=False, random_state=0"


def _boosting(spec: TaskSpec, columns: dict[str, str], starter: str,
              params: str) -> tuple[str, list[str], bool, str, str]:
    """What a boosting starter needs of a tabular task: the prediction kind, the categorical columns, whether it
    classifies, the boosting estimator's class name and its call (Poisson loss for positive targets)."""
    from wmrl.autoresearch.tasks.metrics import METRICS

    if spec.type in ("forecast", "survival"):
        raise ValueError(f"task {spec.id!r} ({spec.type}) has no {starter} starter: it is for tabular tasks")
    kind = METRICS[spec.metric].prediction
    categorical = [c for c, k in columns.items() if k == "categorical" and c not in (*spec.target, "id")]
    classify = spec.type in ("binary", "multiclass")
    estimator = "HistGradientBoostingClassifier" if classify else "HistGradientBoostingRegressor"
    call = f'{estimator}(loss="poisson", {params})' if kind == "positive" else f"{estimator}({params})"
    return kind, categorical, classify, estimator, call


def heavy_starter(spec: TaskSpec, columns: dict[str, str]) -> str:
    """The heavy tier's starter solution for a tabular task (see :data:`HEAVY_STARTER`)."""
    kind, categorical, _, estimator, booster = _boosting(spec, columns, HEAVY_STARTER, _HEAVY_PARAMS)
    prep = (_MEDIAN, _ORDINAL, "from sklearn.preprocessing import OrdinalEncoder")
    return _tabular_script(spec, kind, categorical, prep, f"from sklearn.ensemble import {estimator}", booster)


#: A paper's-regime starter for stronger policies (``SandboxEnvironment(starter_solution="heavy_stacking")``):
#: the linear baseline as the meta-model of a stack. Before the validation split the script fits a long
#: gradient-boosting run (1000 rounds, no early stopping, as ``heavy_boosting``'s) in 5 folds, twice with the folds
#: shuffled differently, and once on all of train, and adds its averaged out-of-fold predictions (class
#: probabilities, or the predicted value) as features. Stacking is what Kaggle solutions run for
#: minutes; every executed script pays it (it sits before the ``model =`` line, in the prefilled head), whatever model
#: the policy then writes, so execution weighs what it does in AutoResearch work (measured on one core: 56 s on
#: ``digits_recognition``, 124 s on ``airport_state``, both valid). It is for policies that can continue it: the
#: 135M CPU default, prefilled with this head, hit the token limit in 80-90% of its turns (measured), so the
#: ``cpu-heavy`` benchmark shows ``heavy_boosting`` instead. Not a leaderboard reference.
STACKING_STARTER = "heavy_stacking"
_STACKING_PARAMS = "max_iter=1000, learning_rate=0.05, max_leaf_nodes=31, early_stopping=False, random_state=0"


def stacking_starter(spec: TaskSpec, columns: dict[str, str]) -> str:
    """The paper's-regime starter for a tabular task (see :data:`STACKING_STARTER`): the linear baseline with the
    stacking block before its validation split."""
    kind, categorical, classify, estimator, booster = _boosting(spec, columns, STACKING_STARTER, _STACKING_PARAMS)
    block = fill("stacking_block", booster=booster, folds="StratifiedKFold" if classify else "KFold",
                 method=', method="predict_proba"' if classify else "",
                 predict="predict_proba" if classify else "predict") + "\n\n"
    baseline = _tabular_solutions(spec, kind, categorical)["linear_baseline"]
    split = baseline.index("fit, val = train_test_split(")
    imports = ["from sklearn.compose import ColumnTransformer", f"from sklearn.ensemble import {estimator}",
               "from sklearn.impute import SimpleImputer",
               f"from sklearn.model_selection import {'StratifiedKFold' if classify else 'KFold'}, cross_val_predict",
               "from sklearn.preprocessing import OrdinalEncoder"]
    head, body = baseline[:split], baseline[split:]
    present = set(head.splitlines())
    missing = "".join(line + "\n" for line in imports if line not in present)
    first_blank = head.index("\n\n")  # after the import block
    return head[:first_blank + 1] + missing + head[first_blank + 1 :] + block + body


def _trivial_tabular(target: str, kind: str) -> str:
    constant = {
        "label": f'train["{target}"].mode().iloc[0]',
        "probability": f'train["{target}"].mean()',
        "real": f'train["{target}"].mean()',
        "positive": f'max(train["{target}"].mean(), 1e-3)',
    }[kind]
    return fill("tabular_trivial", constant=constant)


def _bagged(spec: TaskSpec, kind: str, categorical: list[str], score_import: str, score_template: str) -> str:
    classify = spec.type in ("binary", "multiclass")
    params = "learning_rate=0.05, max_iter=300, max_leaf_nodes=15, l2_regularization=1.0"
    if kind == "positive":
        params = f'loss="poisson", {params}'
    if classify:
        raw = "model.predict_proba(X)"
        if kind == "label":
            finish = (
                "def finish(probabilities):\n    return model.classes_[np.argmax(probabilities, axis=1)]\n"
            )
        else:
            finish = "def finish(probabilities):\n    return probabilities[:, 1]\n"
    else:
        raw = "model.predict(X)"
        finish = (
            "def finish(values):\n    return np.maximum(values, 1e-3)\n"
            if kind == "positive"
            else ("def finish(values):\n    return values\n")
        )
    return fill(
        "tabular_bagged",
        estimator="HistGradientBoostingClassifier" if classify else "HistGradientBoostingRegressor",
        folds="StratifiedKFold" if classify else "KFold",
        score_import="\n" + score_import,
        target=spec.target[0],
        categorical=repr(categorical),
        raw=raw,
        params=params,
        finish=f"\n\n{finish}\n",
        score=score_template.format(y="y", p="finish(out_of_fold)"),
    )


# --- forecast -----------------------------------------------------------------------------------------------
#: the forecasters (``solutions/forecasters/<name>.py``), in the order a leaderboard lists them
FORECASTERS = ("trivial", "linear_baseline", "seasonal_naive", "drift", "seasonal_mean", "holt_winters",
               "autoregressive", "gradient_boosting", "random_forest", "trend_plus_boosting")


def _forecast_solutions(spec: TaskSpec) -> dict[str, str]:
    if spec.time_column is None:
        raise ValueError(f"task {spec.id}: a forecast task needs time_column")
    period = _SEASONAL_PERIODS.get(spec.id, 1)
    score_import, score_template = _SCORE[spec.metric]
    scripts = {}
    for name in FORECASTERS:
        imports, body = part(f"forecasters/{name}")
        scripts[name] = fill(
            "forecast",
            imports="\n" + "\n".join(line for line in (imports, score_import) if line),
            time=spec.time_column,
            target=spec.target[0],
            period=str(period),
            forecast=body,
            score=score_template.format(y="actual", p="validation"),
        )
    return scripts


# --- survival -----------------------------------------------------------------------------------------------
#: the risk models (``solutions/risks/<name>.py``), in the order a leaderboard lists them
RISKS = ("trivial", "linear_baseline", "cox_light_penalty", "single_feature", "logistic_event", "weibull_aft",
         "random_forest_log_time", "gradient_boosting_event", "knn_event")


def _survival_solutions(spec: TaskSpec, columns: dict[str, str]) -> dict[str, str]:
    if tuple(spec.target) != ("time", "event"):
        raise ValueError(f"task {spec.id}: survival targets must be ('time', 'event'), got {spec.target}")
    categorical = [c for c, k in columns.items() if k == "categorical" and c not in ("id", "time", "event")]
    scripts = {}
    for name in RISKS:
        imports, body = part(f"risks/{name}")
        scripts[name] = fill("survival", imports="\n" + imports, categorical=repr(categorical), risk=body)
    return scripts
