"""A tabular reference: gradient boosting bagged over five folds, scored on its out-of-fold predictions.

Slots: the estimator (classifier or regressor) and its parameters, the folds (stratified when classifying), the
task's target and categorical columns, the raw prediction, ``finish`` (raw predictions -> submitted values) and
the validation score with its import.
"""
import numpy as np
import pandas as pd
from sklearn.ensemble import __estimator__
from sklearn.model_selection import __folds__
from sklearn.preprocessing import OrdinalEncoder  # __score_import__

train = pd.read_csv("public/train.csv")
test = pd.read_csv("public/test.csv")
target = "__target__"
categorical = __categorical__
numeric = [c for c in test.columns if c not in categorical and c != "id"]
encoder = OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1)
encoder.fit(pd.concat([train, test])[categorical].astype(str))


def features(frame):
    codes = encoder.transform(frame[categorical].astype(str)) if categorical else np.empty((len(frame), 0))
    return np.column_stack([frame[numeric].to_numpy(dtype=float), codes])


def raw(model, X):
    return __raw__


X, y, X_test = features(train), train[target].to_numpy(), features(test)
is_categorical = [False] * len(numeric) + [True] * len(categorical)
out_of_fold, test_raw = None, 0.0
for fit_rows, val_rows in __folds__(n_splits=5, shuffle=True, random_state=0).split(X, y):
    model = __estimator__(__params__, categorical_features=is_categorical, random_state=0)
    model.fit(X[fit_rows], y[fit_rows])
    fold_raw = raw(model, X[val_rows])
    if out_of_fold is None:
        out_of_fold = np.zeros((len(X),) + np.shape(fold_raw)[1:])
    out_of_fold[val_rows] = fold_raw
    test_raw = test_raw + raw(model, X_test) / 5
# __finish__
score = __score__
print(f"VALIDATION_SCORE={score:.6f}")
pd.DataFrame({"id": test["id"], "prediction": finish(test_raw)}).to_csv("submission.csv", index=False)
