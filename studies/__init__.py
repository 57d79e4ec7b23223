"""Studies: Optuna storages, our metadata on a stored study, trial results, and reading
studies back (lists, best plans, exports).

May import `cost`, `search_spaces`, Optuna's storages and study API and SQLAlchemy; never
`tuner` or click (shared/STYLE.md, sec. 1). Persists through Optuna's storage only (sec. 13).
"""

from .errors import StudyError
from .listing import best_results, export_trials, list_studies, trials_table
from .locate import LEGACY_STORAGE_URL, Located, locate_storage
from .metadata import (
    SCHEMA_VERSION,
    create_or_continue,
    load_study,
    set_target_trials,
    spec_digest,
    stored_spec,
    target_trials,
)
from .metrics import OBJECTIVE_UNITS, metric_names, name_metrics
from .records import RESULT_ATTR, TrialResult, is_feasible, record_result, result_of
from .recovery import (
    JOURNAL_STALE_S,
    JOURNAL_UNSTAMPED_S,
    WORKER_ATTR,
    fail_silent_trials,
    recover_stale_trials,
    waiting_retries,
    worker_identity,
)
from .storage import (
    DEFAULT_STORAGE_URL,
    ENV_VAR,
    directory_problem,
    open_storage,
    redact_url,
    storage_url,
)
from .workers import (
    RECOVERY_EVERY_S,
    RecoveryCallback,
    complete_count,
    finished_under_us,
    settle,
    settle_s,
    to_run,
)

__all__ = [
    "DEFAULT_STORAGE_URL",
    "ENV_VAR",
    "JOURNAL_STALE_S",
    "JOURNAL_UNSTAMPED_S",
    "LEGACY_STORAGE_URL",
    "OBJECTIVE_UNITS",
    "RECOVERY_EVERY_S",
    "RESULT_ATTR",
    "SCHEMA_VERSION",
    "WORKER_ATTR",
    "Located",
    "RecoveryCallback",
    "StudyError",
    "TrialResult",
    "best_results",
    "complete_count",
    "create_or_continue",
    "directory_problem",
    "export_trials",
    "fail_silent_trials",
    "finished_under_us",
    "is_feasible",
    "list_studies",
    "load_study",
    "locate_storage",
    "metric_names",
    "name_metrics",
    "open_storage",
    "record_result",
    "recover_stale_trials",
    "redact_url",
    "result_of",
    "set_target_trials",
    "settle",
    "settle_s",
    "spec_digest",
    "storage_url",
    "stored_spec",
    "target_trials",
    "to_run",
    "trials_table",
    "waiting_retries",
    "worker_identity",
]
