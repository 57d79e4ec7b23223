"""`tuner serve`: the HTTP API over the same library as the command line (FastAPI on uvicorn).

- app.py: the application (errors, OpenAPI); routes.py: the /v1 routes; service.py: their
  work, as thin over the library as the command line's.
- body.py: request bodies (JSON or YAML specs); models.py: response models for the schema.
- auth.py: loopback or a bearer token; guard.py: body limit, last-resort 500; logs.py:
  redacted logging.
- runner.py: studies run by `tuner worker` processes that outlive the server, resumed from
  the storage by the next server; progress.py: a study's status from the storage.

fastapi and uvicorn come with the `serve` extra: importing this package needs them.
"""

from .app import create_app
from .config import ServeConfig

__all__ = ["ServeConfig", "create_app"]
