"""Gradient boosting on the time index and the season."""
from sklearn.ensemble import HistGradientBoostingRegressor


def design(t):
    return np.column_stack([t, t % period])


def forecast(history, steps):
    t = np.arange(len(history))
    model = HistGradientBoostingRegressor(random_state=0).fit(design(t), history)
    return model.predict(design(np.arange(len(history), len(history) + steps)))
