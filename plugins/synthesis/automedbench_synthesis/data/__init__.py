"""Data: the degradation, the generated demo volumes, the stagers of the real downloads and the staging writer."""
