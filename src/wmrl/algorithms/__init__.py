"""Pure functions of the method (no state): rewards, advantages, losses, calibration maps."""
