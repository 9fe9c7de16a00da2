"""The ``score`` view of a tabular starter: the policy chooses the model, the prompt says what to beat.

With the starter shown whole (the ``script`` view), a small policy copies its model line: SmolLM2-135M's valid
held-out samples all scored exactly the starter's leaderboard position, so GRPO could teach it to finish a script
but never to write a better one (every valid sample scored the same). The ``score`` view keeps a choice open and
makes it the only thing left to write:

- :func:`choice_starter` rewrites a tabular starter so that everything after its ``model = ...`` line becomes one
  helper, ``finish(model)`` (fit on the split, print the validation score, refit on all of ``train.csv``, write the
  submission), and imports a menu of scikit-learn estimators of the task's kind beside the starter's own. The
  ``starter_head`` prefill (everything before the model line) then ends with the helper, and the policy writes two
  lines: ``model = make_pipeline(preprocess, <estimator>)`` and ``finish(model)``.
- :func:`choice_prompt` shows that head, not the model line to continue, the starter's measured validation score
  with the metric's direction, and the menu as runnable model lines (the starter's own first), and asks for the one
  that scores best on the task. Offered nothing to copy (the head and a request for "an estimator that scores
  better"), SmolLM2-135M wrote no valid script in 12 samples of 2 training tasks (it invented arguments and
  classes); a line to choose from it copies.

Which estimator wins differs from task to task (``benchmarks/model_choice.py`` executes the menu on the train
split), so the rewards of a group differ among valid samples and GRPO has something to learn.
"""

from __future__ import annotations

import re

#: the estimators imported into a choice starter, by the kind of the starter's own model
MENUS = {
    "classifier": (
        "from sklearn.ensemble import (ExtraTreesClassifier, GradientBoostingClassifier, HistGradientBoostingClassifier,\n"
        "                              RandomForestClassifier)\n"
        "from sklearn.linear_model import LogisticRegression\n"
        "from sklearn.neighbors import KNeighborsClassifier\n"
        "from sklearn.svm import SVC\n"
        "from sklearn.tree import DecisionTreeClassifier\n"
    ),
    "regressor": (
        "from sklearn.ensemble import (ExtraTreesRegressor, GradientBoostingRegressor, HistGradientBoostingRegressor,\n"
        "                              RandomForestRegressor)\n"
        "from sklearn.linear_model import PoissonRegressor, Ridge\n"
        "from sklearn.neighbors import KNeighborsRegressor\n"
        "from sklearn.svm import SVR\n"
        "from sklearn.tree import DecisionTreeRegressor\n"
    ),
}
#: the estimators a ``score`` prompt offers, one runnable model line each (the starter's own first)
CANDIDATES = {
    "classifier": ("LogisticRegression(max_iter=2000)", "RandomForestClassifier(random_state=0)",
                   "ExtraTreesClassifier(random_state=0)", "GradientBoostingClassifier(random_state=0)",
                   "HistGradientBoostingClassifier(random_state=0)", "KNeighborsClassifier()", "SVC()",
                   "DecisionTreeClassifier(random_state=0)"),
    "regressor": ("Ridge()", "RandomForestRegressor(random_state=0)", "ExtraTreesRegressor(random_state=0)",
                  "GradientBoostingRegressor(random_state=0)", "HistGradientBoostingRegressor(random_state=0)",
                  "KNeighborsRegressor()", "SVR()", "DecisionTreeRegressor(random_state=0)", "PoissonRegressor()"),
}
_MODEL_LINE = re.compile(r"^model\s*=\s*(.*)$")
_ESTIMATOR = re.compile(r"make_pipeline\(\s*preprocess\s*,\s*([A-Za-z_]\w*)\(")
#: the starter section's opening in the ``score`` view
CHOICE_INTRO = (
    "The starter below stops where its model is chosen. Its own model, {estimator}, scored "
    "VALIDATION_SCORE={score} on the validation split ({direction} is better). Each of these model lines runs:\n\n"
    "```python\n{candidates}\n```\n\n"
    "Write the one that scores best on this task, then `finish(model)`."
)


def _split(starter: str) -> tuple[list[str], str, list[str]]:
    """The starter's lines before its top-level model line, that line, and the lines after it."""
    lines = starter.splitlines()
    for i, line in enumerate(lines):
        if _MODEL_LINE.match(line):
            return lines[:i], line, lines[i + 1 :]
    raise ValueError("the starter has no top-level `model = ...` line to choose (only tabular starters have one)")


def estimator_name(starter: str) -> str:
    """The class of the starter's own estimator (``make_pipeline(preprocess, <Class>(...))``).

    >>> estimator_name("x = 1\\nmodel = make_pipeline(preprocess, LogisticRegression(max_iter=2000))\\n")
    'LogisticRegression'
    """
    _, line, _ = _split(starter)
    match = _ESTIMATOR.search(line)
    if match is None:
        raise ValueError(f"the starter's model line is not `model = make_pipeline(preprocess, <estimator>)`: {line!r}")
    return match.group(1)


def estimator_kind(starter: str) -> str:
    """``classifier`` or ``regressor``: the kind of the starter's estimator (which menu it gets)."""
    name = estimator_name(starter)
    return "classifier" if name.endswith("Classifier") or name in ("LogisticRegression", "SVC", "GaussianNB") \
        else "regressor"


def candidate_lines(starter: str) -> list[str]:
    """The model lines a ``score`` prompt offers: the starter's own estimator first, then the menu's others."""
    own = _split(starter)[1].partition("make_pipeline(preprocess, ")[2][:-1]
    others = [c for c in CANDIDATES[estimator_kind(starter)] if c.split("(")[0] != own.split("(")[0]]
    return [f"model = make_pipeline(preprocess, {e})" for e in (own, *others)]


def with_model_line(starter: str, model_line: str) -> str:
    """``starter`` with ``model_line`` in place of its top-level model line: the script a ``score`` prompt's answer
    makes of it.

    >>> print(with_model_line("x = 1\\nmodel = make_pipeline(preprocess, Ridge())\\nmodel.fit(x)\\n",
    ...                       "model = make_pipeline(preprocess, SVR())"), end="")
    x = 1
    model = make_pipeline(preprocess, SVR())
    model.fit(x)
    """
    before, _, after = _split(starter)
    return "\n".join([*before, model_line, *after]) + "\n"


def choice_starter(starter: str) -> str:
    """``starter`` with its estimator menu and its ``finish(model)`` helper (module docstring); it runs as the
    original does (the same model, fit, score and submission).

    >>> script = ("import pandas as pd\\n\\nx = 1\\nmodel = make_pipeline(preprocess, Ridge())\\n"
    ...           "model.fit(x)\\nprint(x)\\n")
    >>> print(choice_starter(script))  # doctest: +ELLIPSIS
    import pandas as pd
    from sklearn.ensemble import (ExtraTreesRegressor, ...
    ...
    x = 1
    <BLANKLINE>
    <BLANKLINE>
    def finish(model):  # fit on the split, print the validation score, refit on all of train.csv, write the submission
        model.fit(x)
        print(x)
    <BLANKLINE>
    <BLANKLINE>
    model = make_pipeline(preprocess, Ridge())
    finish(model)
    <BLANKLINE>
    """
    head, model_line, tail = _split(starter)
    kind = estimator_kind(starter)
    imports = [i for i, line in enumerate(head) if line.startswith(("import ", "from "))]
    at = imports[-1] + 1 if imports else 0
    body = [f"    {line}" if line.strip() else "" for line in tail]
    while body and not body[-1]:
        body.pop()
    helper = ["def finish(model):  # fit on the split, print the validation score, refit on all of train.csv, "
              "write the submission", *body]
    while head and not head[-1].strip():
        head.pop()
    menu = [line for line in MENUS[kind].rstrip("\n").splitlines() if line not in head]
    lines = [*head[:at], *menu, *head[at:], "", "", *helper, "", "", model_line,
             "finish(model)"]
    return "\n".join(lines) + "\n"


def choice_prompt(description: str, heading: str, starter: str, validation_score: float | None,
                  higher_is_better: bool) -> str:
    """The task prompt of the ``score`` view: ``description`` up to its starter section (``heading``), then the
    choice starter's head (no model line) and the starter's validation score to beat."""
    overview, _, _ = description.partition(heading)
    score = "unmeasured" if validation_score is None else f"{validation_score:.4f}"
    intro = CHOICE_INTRO.format(estimator=estimator_name(starter), score=score,
                                direction="higher" if higher_is_better else "lower",
                                candidates="\n".join(candidate_lines(starter)))
    head = "\n".join(_split(starter)[0]).rstrip()  # what the ``starter_head`` prefill begins the turn with
    return f"{overview}{heading}\n{intro}\n\n```python\n{head}\n```\n"
