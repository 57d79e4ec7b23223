"""The search engine: samplers, the objective (one vectorised sweep of the cheap knobs per
trial), the exhaustive sweep, warm start, explain's what-ifs and calibration."""
