"""A tabular reference (binary, multiclass, regression, count): one scikit-learn pipeline, validated on a split.

Slots: the task's target and categorical columns, the model and its imports, the preprocessing steps, the
prediction (labels, a probability, a value) and the validation score. The linear baseline written from this file
is the starter solution shown in the prompt, so it stays short and readable.
"""
import numpy as np
import pandas as pd  # __imports__

train = pd.read_csv("public/train.csv")
test = pd.read_csv("public/test.csv")
target = "__target__"
categorical = __categorical__
numeric = [c for c in test.columns if c not in categorical and c != "id"]


def features(frame):
    return frame[numeric + categorical].astype({c: str for c in categorical})


def predict(frame):
    return __prediction__


fit, val = train_test_split(train, test_size=0.2, random_state=0, **__stratify__)
preprocess = ColumnTransformer([
    ("numeric", __numeric_steps__, numeric),
    ("categorical", __categorical_step__, categorical),
])
model = make_pipeline(preprocess, __model__)
model.fit(features(fit), fit[target])
score = __score__
print(f"VALIDATION_SCORE={score:.6f}")

model.fit(features(train), train[target])
pd.DataFrame({"id": test["id"], "prediction": predict(test)}).to_csv("submission.csv", index=False)
