"""Validation: published measurements, the in-situ fit, and calibration from a user's runs and traces."""
