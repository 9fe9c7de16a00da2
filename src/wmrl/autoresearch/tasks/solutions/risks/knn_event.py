"""The probability of the event at all (times ignored), by the 25 nearest neighbours."""
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler


def risk(X_fit, time, event, X_new):
    model = make_pipeline(StandardScaler(), KNeighborsClassifier(n_neighbors=25))
    model.fit(X_fit, event)
    return model.predict_proba(X_new)[:, 1]
