"""The server's logging: its own lines and uvicorn's (start-up, access log) on stderr, every
record, tracebacks included, with storage passwords and the token masked as `***`."""

from __future__ import annotations

import logging
import re
import traceback
from collections.abc import Iterable

__all__ = ["Redact", "configure_logging", "redact_text"]

_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^:/?#@\s]*:)[^@/?#\s]+"
                           r"(?P<tail>@)")
_LOGGERS = ("tuner", "uvicorn", "uvicorn.error", "uvicorn.access")


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with the password of any URL (`scheme://user:PASSWORD@host`) and each of
    `secrets` replaced by `***`."""
    text = _URL_PASSWORD.sub(r"\g<head>***\g<tail>", text)
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


class Redact(logging.Filter):
    """Masks secrets in a record's message and traceback (formatted here, once)."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self.secrets = [s for s in secrets if s]

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact_text(record.getMessage(), self.secrets)
        record.args = None
        if record.exc_info:
            text = "".join(traceback.format_exception(*record.exc_info)).rstrip()
            record.exc_text = redact_text(text, self.secrets)
            record.exc_info = None
        elif record.exc_text:
            record.exc_text = redact_text(record.exc_text, self.secrets)
        return True


def configure_logging(secrets: Iterable[str]) -> None:
    """One stderr handler on the root logger with the Redact filter; the server's loggers
    and uvicorn's at INFO, sent to it (uvicorn is run without a log config of its own)."""
    root = logging.getLogger()
    if not root.handlers:
        stream = logging.StreamHandler()
        stream.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        root.addHandler(stream)
    redact = Redact(secrets)
    for handler in root.handlers:
        handler.addFilter(redact)
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(min(logger.getEffectiveLevel(), logging.INFO))
        logger.propagate = True
        logger.handlers.clear()
