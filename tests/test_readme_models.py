"""The README's model tables are the model files' (``tcsmt models --table``, tcsmt/cli/models_table.py).

Both tables of the README, "Built-in models" and the narrow-format kinds of "Narrow formats, mixed operands
and block scaling", are compared row for row with the rows made from models/*.toml: a changed parameter,
hypothesis or path fails here until the README is regenerated (``tcsmt models --table``).
"""
from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from tcsmt.cli import main
from tcsmt.cli.models_table import HEADER, NARROW_HEADER, narrow_rows, rows

README = Path(__file__).resolve().parent.parent / "README.md"


def _table(header: str) -> list[str]:
    """The README's rows under ``header`` (its first line), up to the first line that is not a table row."""
    lines = README.read_text().splitlines()
    first, rule = header.splitlines()
    assert lines.count(first) == 1, f"README: the table header {first!r} must occur once"
    i = lines.index(first)
    assert lines[i + 1] == rule
    out = []
    for line in lines[i + 2:]:
        if not line.startswith("|"):
            break
        out.append(line)
    return out


def _diff(readme: list[str], models: list[str]) -> str:
    key = lambda r: " | ".join(r.split(" | ")[:3])  # noqa: E731  (arch, path, instruction)
    want = {key(r): r for r in models}
    got = {key(r): r for r in readme}
    lines = [f"only in the README: {k}" for k in got if k not in want]
    lines += [f"not in the README: {k}" for k in want if k not in got]
    lines += [f"differs: {got[k]}\n   models: {want[k]}" for k in got if k in want and got[k] != want[k]]
    return "\n".join(lines) or "same rows, another order"


def test_builtin_models_table_is_the_model_files():
    readme, models = _table(HEADER), rows()
    assert readme == models, "README 'Built-in models' table (regenerate: tcsmt models --table)\n" + _diff(readme, models)


def test_narrow_format_table_is_the_model_files():
    readme, models = _table(NARROW_HEADER), narrow_rows()
    assert readme == models, "README narrow-format table (regenerate: tcsmt models --table)\n" + _diff(readme, models)


def test_models_table_command():
    """``tcsmt models --table`` prints both tables; with an architecture, its rows only."""
    r = CliRunner().invoke(main, ["models", "--table"])
    assert r.exit_code == 0
    assert r.output == "\n".join([HEADER, *rows(), "", NARROW_HEADER, *narrow_rows()]) + "\n"
    r = CliRunner().invoke(main, ["models", "b200", "--table"])
    assert r.exit_code == 0
    body = [line for line in r.output.splitlines() if line.startswith("| ") and not line.startswith("| arch ")]
    assert body and all(line.startswith("| blackwell |") for line in body)
    assert any("block16.ue4m3" in line and "a zero scale's group is left out of E" in line for line in body)
    r = CliRunner().invoke(main, ["models", "nosuch", "--table"])
    assert r.exit_code == 2
