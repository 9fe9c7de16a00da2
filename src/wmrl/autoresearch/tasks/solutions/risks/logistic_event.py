"""The probability of the event at all (times ignored), by logistic regression."""
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler


def risk(X_fit, time, event, X_new):
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    model.fit(X_fit, event)
    return model.predict_proba(X_new)[:, 1]
