"""The README's walk-through, run: every `$ tuner ...` line of a ```console block, in order, in
one fresh directory (search_spaces/ linked in, the default SQLite storage), must exit 0 and
print the lines the README shows under it (up to a `...`), timings in parentheses aside: a
change of the model's numbers must refresh the README's examples in the same commit
(`python scripts/readme_console.py --apply` writes them).

Convention (README, "Walk-through"): in ```console blocks, a line starting with `$ ` is a
command and the lines after it, up to the next command, are its output; a line `...` marks
where the shown output was trimmed. Other blocks (bash, yaml, text) are not run."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from tuner.cli import main

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
_BLOCK = re.compile(r"^```console\n(.*?)^```", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Example:
    command: str
    output: list[str]


def readme_examples(text: str) -> list[Example]:
    """The commands of the README's console blocks with the output shown after each."""
    examples: list[Example] = []
    for block in _BLOCK.findall(text):
        for line in block.splitlines():
            if line.startswith("$ "):
                examples.append(Example(line[2:].strip(), []))
            elif examples:
                examples[-1].output.append(line)
    return examples


def _shown(line: str) -> str:
    """A line as compared: timings in parentheses ("(0.9 s)", which vary with the machine's
    load) replaced, trailing blanks dropped."""
    return re.sub(r"\(\d+(?:\.\d+)? s\)", "(T s)", line).rstrip()


def test_the_readme_has_a_walk_through() -> None:
    examples = readme_examples(README.read_text(encoding="utf-8"))
    commands = [e.command.split()[:2] for e in examples]
    assert len(examples) >= 8 and all(c[0] == "tuner" for c in commands)
    for needed in ("search", "best", "evaluate", "explain", "report"):
        assert ["tuner", needed] in commands


def test_readme_commands_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "search_spaces").symlink_to(ROOT / "search_spaces", target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TUNER_STORAGE", raising=False)
    for example in readme_examples(README.read_text(encoding="utf-8")):
        args = shlex.split(example.command)[1:]
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, f"$ {example.command}\n{result.output}"
        shown = example.output[:example.output.index("...")] if "..." in example.output \
            else example.output
        while shown and not shown[-1].strip():
            shown = shown[:-1]
        printed = result.stdout.rstrip("\n").splitlines()[:len(shown)]
        assert [_shown(x) for x in printed] == [_shown(x) for x in shown], \
            f"$ {example.command}: the README shows other output (scripts/readme_console.py)"
    assert (tmp_path / "gpt3-175b-1024-a100.html").is_file()
