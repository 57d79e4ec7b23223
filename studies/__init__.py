"""Studies: Optuna storages, the objective built on a search space, resuming and exporting.

A placeholder for the next issue; it may import `cost` and `search_spaces`, never `tuner`.
"""

__all__: list[str] = []
