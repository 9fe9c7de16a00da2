import pandas as pd
from sklearn.ensemble import RandomForestRegressor

train = pd.read_csv("public/train.csv")
test = pd.read_csv("public/test.csv")
features = ["hs_grad", "poverty", "single", "white", "urban"]
model = RandomForestRegressor(n_estimators=300, min_samples_leaf=2, random_state=0, n_jobs=1)
model.fit(train[features], train["violent_rate"])
pd.DataFrame({"id": test["id"], "prediction": model.predict(test[features])}).to_csv("submission.csv", index=False)
