"""The mean of the last three seasons, repeated."""


def forecast(history, steps, seasons=3):
    n = min(seasons, len(history) // period) * period
    recent = history[-n:].reshape(-1, period).mean(axis=0)
    return np.array([recent[k % period] for k in range(steps)])
