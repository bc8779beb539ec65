"""Built-in data: real test weights fetched on demand (never committed) and calibration text."""
