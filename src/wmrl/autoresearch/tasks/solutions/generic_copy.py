"""The generic starter when no model fits the public files: it submits the sample (the slot: the reason)."""
import shutil

# A generic baseline that wmrl wrote from the public files (the task ships no starter.py): __reason__, so it submits
# the sample submission as it is. Replace it with a model.
shutil.copy("public/sample_submission.csv", "submission.csv")
