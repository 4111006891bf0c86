"""AutoMedBench report-generation track (chest X-ray reports, pathology captions)."""
