"""Small named builders for the studies tests: specs from the GPT-3 example, realistic
PLAN_RESULT dicts, and studies made by hand in a SQLite storage under tmp_path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import yaml

import cost
from search_spaces import StudySpec, parse_spec
from studies import RESULT_ATTR, create_or_continue, open_storage

EXAMPLES = Path(__file__).resolve().parents[2] / "search_spaces" / "examples"
GPT3 = EXAMPLES / "gpt3-175b-a100-fixed.yaml"


def gpt3_text(**plan: Any) -> str:
    """The GPT-3 example's YAML with `plan` values replaced (or added)."""
    data = yaml.safe_load(GPT3.read_text(encoding="utf-8"))
    data["plan"].update(plan)
    return yaml.safe_dump(data, sort_keys=False)


def spec_of(text: str, *, name: str = "gpt3") -> StudySpec:
    return parse_spec({**yaml.safe_load(text), "name": name}, file="gpt3.yaml", name=name)


def gpt3_result(**plan: Any) -> dict[str, Any]:
    """The PLAN_RESULT of the GPT-3 example with `plan` values replaced."""
    inputs = spec_of(gpt3_text(**plan)).to_cost_inputs()
    return cost.plan_result(*inputs, cost.evaluate(*inputs)).as_dict()


def storage_in(tmp_path: Path) -> optuna.storages.RDBStorage:
    return open_storage(f"sqlite:///{tmp_path / 'studies.db'}", heartbeat_interval_s=None)


def new_study(
    storage: optuna.storages.BaseStorage, *, name: str = "gpt3",
    directions: tuple[str, ...] = ("maximize",), target: int = 10,
) -> optuna.Study:
    """A study made by create_or_continue from the GPT-3 example (objective per direction)."""
    objectives = ["throughput"] if len(directions) == 1 else ["time_to_train", "cost"]
    text = gpt3_text() + f"objective: {objectives}\n"
    return create_or_continue(storage, spec_of(text, name=name), text,
                              directions=list(directions), target_trials=target)


def add_trial(
    study: optuna.Study, values: list[float], result: dict[str, Any] | None, *,
    memory: float = -1.0, state: optuna.trial.TrialState = optuna.trial.TrialState.COMPLETE,
    params: dict[str, int] | None = None,
) -> None:
    """Add one finished trial with its PLAN_RESULT and a memory constraint value (<= 0 fits);
    `params` are integers in [1, 1024]."""
    params = params or {"micro_batch": 1}
    distributions: dict[str, optuna.distributions.BaseDistribution] = {
        k: optuna.distributions.IntDistribution(1, 1024) for k in params}
    complete = state == optuna.trial.TrialState.COMPLETE
    study.add_trial(optuna.trial.create_trial(
        state=state, values=values if complete else None, params=params,
        distributions=distributions,
        user_attrs={RESULT_ATTR: result} if result is not None else None,
        constraints={"memory": memory}))
