"""A random forest on the log time, censored rows weighted half."""
from sklearn.ensemble import RandomForestRegressor


def risk(X_fit, time, event, X_new):
    model = RandomForestRegressor(n_estimators=300, min_samples_leaf=5, random_state=0)
    model.fit(X_fit, np.log(time), sample_weight=np.where(event == 1, 1.0, 0.5))
    return -model.predict(X_new)
