"""Autotuning: candidate tile configurations, measurement, search, tuned tables."""
