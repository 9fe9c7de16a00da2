"""Damped-trend exponential smoothing with additive seasons.

Starting values from the data (not a brute-force grid) and a least-squares fit: statsmodels' default (estimated
start, grid search, L-BFGS-B) jumps between local optima on last-bit differences, 4.8% apart on another CPU
(issue 22); this setting moves by <= 3e-5 under 1e-13 relative noise on every forecast task.
"""
from statsmodels.tsa.holtwinters import ExponentialSmoothing


def forecast(history, steps):
    seasonal = "add" if period > 1 else None
    start = "heuristic" if seasonal and len(history) >= 2 * period + 10 else "legacy-heuristic"
    model = ExponentialSmoothing(history, trend="add", damped_trend=True, seasonal=seasonal,
                                 seasonal_periods=period if seasonal else None, initialization_method=start)
    return model.fit(use_brute=False, method="least_squares").forecast(steps)
