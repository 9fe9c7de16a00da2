"""The last value plus the average step of the whole history."""


def forecast(history, steps):
    slope = (history[-1] - history[0]) / (len(history) - 1)
    return history[-1] + slope * np.arange(1, steps + 1)
