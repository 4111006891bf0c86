"""Data: demo generators, degradation models and the stagers of the real downloads."""
