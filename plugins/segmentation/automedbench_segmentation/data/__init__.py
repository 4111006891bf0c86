"""Dataset layouts and converters for the TotalSegmentator, AeroPath and PANTHER tasks, and the airway demo."""
