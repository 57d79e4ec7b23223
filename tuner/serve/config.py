"""What a `tuner serve` process is configured with, and the limits it puts on each request."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["EVALUATIONS", "MAX_BODY_BYTES", "MAX_SPECS", "ServeConfig"]

MAX_BODY_BYTES = 1 << 20
"""The largest request body accepted (1 MiB: a spec is a few hundred bytes to a few KiB)."""
MAX_SPECS = 64
"""The most specs one POST /v1/evaluate may carry (each is a few milliseconds of model)."""
EVALUATIONS = 2
"""Evaluate requests computed at once; more wait their turn (asyncio.Semaphore, in order).
The model is Python under one interpreter lock, so more threads add no throughput; the
bound keeps the work and memory in flight small whatever the number of clients."""


@dataclass(frozen=True, kw_only=True)
class ServeConfig:
    """The server's settings: the storage URL (never shown unredacted), the bearer token
    (None: no token asked; only for loopback), worker processes per study, their heartbeat
    (seconds), the most studies run at once, and the request limits: body bytes, specs per
    evaluate request, evaluate requests computed at once."""

    storage_url: str
    token: str | None = None
    workers: int = 2
    heartbeat_s: int = 10
    max_studies: int = 4
    max_body_bytes: int = MAX_BODY_BYTES
    max_specs: int = MAX_SPECS
    evaluations: int = EVALUATIONS
