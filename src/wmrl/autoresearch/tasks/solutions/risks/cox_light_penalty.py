"""The starter's Cox model with a tenth of its penalty."""
from lifelines import CoxPHFitter


def risk(X_fit, time, event, X_new, penalizer=0.01):
    mean, std = X_fit.mean(), X_fit.std().replace(0, 1)
    cox = CoxPHFitter(penalizer=penalizer)
    cox.fit(((X_fit - mean) / std).assign(time=time.values, event=event.values), "time", "event")
    return cox.predict_partial_hazard((X_new - mean) / std).to_numpy()
