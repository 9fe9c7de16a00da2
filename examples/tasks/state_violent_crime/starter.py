import numpy as np
import pandas as pd
from sklearn.linear_model import Ridge
from sklearn.model_selection import cross_val_score

train = pd.read_csv("public/train.csv")
test = pd.read_csv("public/test.csv")
features = ["hs_grad", "poverty", "single", "white", "urban"]

model = Ridge(alpha=1.0)
rmse = -cross_val_score(model, train[features], train["violent_rate"], cv=5,
                        scoring="neg_root_mean_squared_error").mean()
print(f"VALIDATION_SCORE={rmse:.4f}")
model.fit(train[features], train["violent_rate"])
pd.DataFrame({"id": test["id"], "prediction": np.maximum(model.predict(test[features]), 0.0)}).to_csv(
    "submission.csv", index=False)
