"""The starter: a linear trend plus one dummy per season, fitted on the last four seasons."""
from sklearn.linear_model import LinearRegression


def design(t):
    return np.column_stack([t, np.eye(period)[t % period]])


def forecast(history, steps, seasons=4):
    t = np.arange(len(history))[-seasons * period:]
    model = LinearRegression().fit(design(t), history[t])
    return model.predict(design(np.arange(len(history), len(history) + steps)))
