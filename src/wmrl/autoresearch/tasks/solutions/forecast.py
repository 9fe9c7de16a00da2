"""A forecast reference: a ``forecast(history, steps)`` validated on the last ``horizon`` points of train.

Slots: the forecaster's imports (and the score's), the time and target columns, the seasonal period, the
forecaster (a part from ``forecasters/``) and the validation score.
"""
import numpy as np
import pandas as pd  # __imports__

train = pd.read_csv("public/train.csv").sort_values("__time__")
test = pd.read_csv("public/test.csv").sort_values("__time__")
y = train["__target__"].to_numpy(dtype=float)
horizon, period = len(test), __period__


# __forecast__


validation, actual = forecast(y[:-horizon], horizon), y[-horizon:]
score = __score__
print(f"VALIDATION_SCORE={score:.6f}")
pd.DataFrame({"id": test["id"], "prediction": forecast(y, horizon)}).to_csv("submission.csv", index=False)
