"""A tabular reference: the floor of the leaderboard, one constant for every row (the slot: its expression)."""
import pandas as pd

train = pd.read_csv("public/train.csv")
test = pd.read_csv("public/test.csv")
constant = __constant__
pd.DataFrame({"id": test["id"], "prediction": constant}).to_csv("submission.csv", index=False)
