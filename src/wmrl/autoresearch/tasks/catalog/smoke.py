"""The ``smoke`` split: tiny tasks for tests and quick checks, drawn from training sources."""

from __future__ import annotations

from wmrl.autoresearch.tasks import loaders
from wmrl.autoresearch.tasks.catalog.entry import task
from wmrl.autoresearch.tasks.sources import SKLEARN
from wmrl.autoresearch.tasks.spec import TaskSpec

TASKS: tuple[TaskSpec, ...] = (
    # --- smoke: tiny, fast, for tests and quick checks ---------------------------------------------------
    task("smoke_iris", "smoke", SKLEARN, "sklearn.datasets.load_iris", type="multiclass",
         target=("species",), metric="accuracy", load=loaders.iris,
         title="Iris species from flower measurements",
         goal="Predict the species of an iris flower (setosa, versicolor or virginica) from four sepal and "
              "petal measurements in centimetres."),
    task("smoke_breast_cancer", "smoke", SKLEARN, "sklearn.datasets.load_breast_cancer", type="binary",
         target=("malignant",), metric="roc_auc", load=loaders.breast_cancer,
         title="Malignant breast tumours from cell nuclei",
         goal="Predict the probability that a breast mass is malignant (malignant = 1) from 30 summary "
              "statistics of cell nuclei measured on a digitised fine-needle aspirate image."),
    task("smoke_diabetes", "smoke", SKLEARN, "sklearn.datasets.load_diabetes", type="regression",
         target=("progression",), metric="rmse", load=loaders.diabetes,
         title="Diabetes progression after one year",
         goal="Predict a quantitative measure of diabetes progression one year after baseline from age, "
              "sex, body mass index, blood pressure and six blood serum measurements."),
)
