"""The commands the CLI's lines advise (`tuner resume NAME`, `tuner explain NAME --trial 3`,
`tuner studies`), made to work as typed: the library words them without knowing which storage
the user named, so a line printed under `--storage URL` gets that `--storage` inside each
advised command that reads or writes studies (without it the command looks in the default
storage and finds no study of that name). Studies' names in them are quoted for the shell by
the library (shlex.quote). A password in the URL is shown as `***` (studies.redact_url): a
line never prints it, at the cost of a command to complete by hand. The storage given is
kept in click's context `meta`, shared by a command's context and its group's, so the
group's one error path can read it."""

from __future__ import annotations

import re
import shlex

import click

__all__ = ["advised", "remember_storage"]

_KEY = "tuner.storage"
_STUDY_COMMANDS = ("resume", "worker", "explain", "best", "export", "report", "plan",
                   "studies", "dashboard")
_ADVICE = re.compile(rf"`tuner (?:{'|'.join(_STUDY_COMMANDS)})\b[^`]*`")


def remember_storage(ctx: click.Context, param: click.Parameter, value: str | None
                     ) -> str | None:
    """--storage's callback: keep the URL the user gave for the lines that advise commands."""
    if value is not None:
        ctx.meta[_KEY] = value
    return value


def advised(line: str, ctx: click.Context | None = None) -> str:
    """`line` with `--storage URL` added to each advised study command (where the command
    line named a storage and the advice names none)."""
    ctx = ctx or click.get_current_context(silent=True)
    storage = ctx.meta.get(_KEY) if ctx is not None else None
    if not storage:
        return line
    from studies import redact_url

    flag = f" --storage {shlex.quote(redact_url(storage))}"  # never a password: *** for it
    return _ADVICE.sub(lambda m: m.group(0) if "--storage" in m.group(0)
                       else f"{m.group(0)[:-1]}{flag}`", line)
