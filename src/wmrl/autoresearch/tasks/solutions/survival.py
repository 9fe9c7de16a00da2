"""A survival reference: a ``risk(X_fit, time, event, X_new)`` validated by the concordance index on a split.

Slots: the risk model's imports, the categorical columns and the risk model (a part from ``risks/``).
"""
import numpy as np
import pandas as pd
from lifelines.utils import concordance_index
from sklearn.model_selection import train_test_split  # __imports__

train = pd.read_csv("public/train.csv")
test = pd.read_csv("public/test.csv")
categorical = __categorical__


def features(frame):
    X = frame.drop(columns=[c for c in ("id", "time", "event") if c in frame.columns])
    return pd.get_dummies(X, columns=categorical, drop_first=True, dtype=float)


X_all = features(pd.concat([train, test]))
X_all = X_all.fillna(X_all.median())
X, X_test = X_all.iloc[: len(train)], X_all.iloc[len(train):]


# __risk__


fit_rows, val_rows = train_test_split(np.arange(len(train)), test_size=0.25, random_state=0)
fit, val = train.iloc[fit_rows], train.iloc[val_rows]
val_risk = risk(X.iloc[fit_rows], fit["time"], fit["event"], X.iloc[val_rows])
score = concordance_index(val["time"], -val_risk, val["event"])
print(f"VALIDATION_SCORE={score:.6f}")
prediction = risk(X, train["time"], train["event"], X_test)
pd.DataFrame({"id": test["id"], "prediction": prediction}).to_csv("submission.csv", index=False)
