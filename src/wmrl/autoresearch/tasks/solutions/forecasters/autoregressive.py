"""An autoregression with a trend and seasonal dummies."""
from statsmodels.tsa.ar_model import AutoReg


def forecast(history, steps):
    lags = min(2 * period + 1, len(history) // 4)
    model = AutoReg(history, lags=lags, trend="ct", seasonal=period > 1, period=period).fit()
    return model.predict(start=len(history), end=len(history) + steps - 1)
