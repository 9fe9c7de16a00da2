"""The generic starter (``wmrl.autoresearch.tasks.starter``): the linear baseline written from a task's public files alone.

Slots: the estimator (logistic or ridge regression) and the validation score with its import, the target and the
lines after it (a survival target's ``event`` column, the rows that lack a target dropped), the numeric and
categorical columns (and those left out), the prediction, the submission's rows (its id column ``key``, its
columns and the ``predictions`` frame), the stratified split (by the class, or by a survival target's event), and
the model.
"""
import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.impute import SimpleImputer
from sklearn.linear_model import __estimator__  # __score_import__
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

# A generic baseline that wmrl wrote from the public files (the task ships no starter.py).
train = pd.read_csv("public/train.csv")
test = pd.read_csv("public/test.csv")
sample = pd.read_csv("public/sample_submission.csv")
target = __target__  # __target_lines__
numeric = __numeric__
categorical = __categorical__  # __dropped__


def features(frame):
    return frame[numeric + categorical].astype({c: str for c in categorical})


def predict(frame):
    return __predict__


def write_submission(values):
    predictions = __predictions__
    sample[[__key__]].merge(predictions[__columns__], on=__key__, how="left").to_csv("submission.csv", index=False)


def finish(model):  # fit on the split, print the validation score, refit on all of train.csv, write the submission
    model.fit(features(fit), fit[target])
    print(f"VALIDATION_SCORE={__score__:.6f}")
    model.fit(features(train), train[target])
    write_submission(predict(test))


fit, val = train_test_split(train, test_size=0.2, random_state=0, **__stratify__)
preprocess = ColumnTransformer([
    ("numeric", make_pipeline(SimpleImputer(strategy="median"), StandardScaler()), numeric),
    ("categorical", OneHotEncoder(handle_unknown="ignore"), categorical),
])
model = make_pipeline(preprocess, __model__)
finish(model)
