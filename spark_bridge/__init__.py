"""Offset analytics in Spark on the same Ray cluster (RayDP), reading the offsets log."""
