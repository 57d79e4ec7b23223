"""Studies: Optuna storages, our metadata on a stored study, trial results, and reading
studies back (lists, best plans, exports).

May import `cost`, `search_spaces`, Optuna's storages and study API and SQLAlchemy; never
`tuner` or click (shared/STYLE.md, sec. 1). Persists through Optuna's storage only (sec. 13).
"""

from .errors import StudyError
from .exclusive import exclusively
from .identity import cost_model_version, problem, problem_differences, problem_digest
from .listing import (
    best_payload,
    best_results,
    export_page,
    export_trials,
    list_studies,
    nearest_result,
    studies_page,
    trials_table,
)
from .liveness import LIVE_GRACE_S, live_workers
from .locate import LEGACY_STORAGE_URL, Located, locate_storage
from .metadata import (
    SCHEMA_VERSION,
    check_problem,
    create_or_continue,
    load_study,
    nearest_name,
    set_target_trials,
    spec_digest,
    stored_spec,
    target_trials,
)
from .metrics import OBJECTIVE_UNITS, metric_names, name_metrics
from .records import (
    EQUIVALENT_ATTR,
    RESULT_ATTR,
    TrialResult,
    equivalent_plans,
    is_feasible,
    record_result,
    result_of,
)
from .recovery import (
    JOURNAL_STALE_S,
    JOURNAL_UNSTAMPED_S,
    WORKER_ATTR,
    fail_silent_trials,
    process_gone,
    process_identity,
    recover_stale_trials,
    waiting_retries,
    worker_identity,
)
from .retry import one_transaction
from .settings import (
    SEARCH_ATTR,
    SWEPT_ATTR,
    began,
    search_settings,
    store_search_settings,
    store_swept,
    swept,
)
from .storage import (
    DEFAULT_STORAGE_URL,
    ENV_VAR,
    close_storage,
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
    "EQUIVALENT_ATTR",
    "JOURNAL_STALE_S",
    "JOURNAL_UNSTAMPED_S",
    "LEGACY_STORAGE_URL",
    "LIVE_GRACE_S",
    "OBJECTIVE_UNITS",
    "RECOVERY_EVERY_S",
    "RESULT_ATTR",
    "SCHEMA_VERSION",
    "SEARCH_ATTR",
    "SWEPT_ATTR",
    "WORKER_ATTR",
    "Located",
    "RecoveryCallback",
    "StudyError",
    "TrialResult",
    "began",
    "best_payload",
    "best_results",
    "check_problem",
    "close_storage",
    "complete_count",
    "cost_model_version",
    "create_or_continue",
    "directory_problem",
    "equivalent_plans",
    "exclusively",
    "export_page",
    "export_trials",
    "fail_silent_trials",
    "finished_under_us",
    "is_feasible",
    "list_studies",
    "live_workers",
    "load_study",
    "locate_storage",
    "metric_names",
    "name_metrics",
    "nearest_name",
    "nearest_result",
    "one_transaction",
    "open_storage",
    "problem",
    "problem_differences",
    "problem_digest",
    "process_gone",
    "process_identity",
    "record_result",
    "recover_stale_trials",
    "redact_url",
    "result_of",
    "search_settings",
    "set_target_trials",
    "settle",
    "settle_s",
    "spec_digest",
    "storage_url",
    "store_search_settings",
    "store_swept",
    "stored_spec",
    "studies_page",
    "swept",
    "target_trials",
    "to_run",
    "trials_table",
    "waiting_retries",
    "worker_identity",
]
