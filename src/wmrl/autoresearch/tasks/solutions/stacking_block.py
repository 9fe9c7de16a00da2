"""The block the ``heavy_stacking`` starter adds before the linear baseline's validation split.

It is not a script on its own: it runs after the baseline's data loading and ``features`` (so ``train``,
``test``, ``target``, ``numeric`` and ``categorical`` exist) and adds the stacked predictions to ``numeric``.
Slots: the boosting estimator's call, the folds, ``cross_val_predict``'s method and the prediction method.
"""
# Stacking: the out-of-fold predictions of a long gradient-boosting run become features of the final model.
booster = make_pipeline(
    ColumnTransformer([
        ("numeric", SimpleImputer(strategy="median"), numeric),
        ("categorical", OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1), categorical),
    ]),
    __booster__,
)
stacked = np.mean([  # out-of-fold predictions averaged over two shuffles of the folds
    cross_val_predict(booster, features(train), train[target], cv=__folds__(5, shuffle=True, random_state=seed), **__method__)
    for seed in range(2)
], axis=0).reshape(len(train), -1)
booster.fit(features(train), train[target])
stacked_test = np.asarray(booster.__predict__(features(test))).reshape(len(test), -1)
stack = [f"stack_{k}" for k in range(stacked.shape[1])]
train[stack], test[stack] = stacked, stacked_test
numeric += stack
