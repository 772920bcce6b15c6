"""No issue numbers in what a reader of the project sees.

A reader has no issue tracker: the README, the docs, the model files and queries, the code's comments,
docstrings and messages, the tools, benchmarks and tests name the evidence by its file, its question or its
run instead ("the H100 question runs, evidence/h100_hopper_questions.json").  External references keep their
project's name and number without the word (DeepGEMM #176).  Result files (evidence/ data, generated/,
vectors/, tests/data/, benchmarks/results/) are not scanned: they are kept byte for byte and the commands they
record are history.
"""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PATTERN = re.compile(r"(?<![a-z])issues?[\s_-]*#?\d+", re.IGNORECASE)
"""'issue 13', 'Issue 12 item 6', 'issue #13', 'issues 11', 'issue-12', and in a name 'h100_issue13'."""

SCANNED = ("README.md", "pyproject.toml", ".ci", "docs", "models", "queries", "tcsmt", "tools", "tests", "benchmarks")
SKIPPED = ("tests/data", "benchmarks/results", "tests/test_no_issue_numbers.py")
"""Result files (kept byte for byte), and this file (it holds the allow-list)."""

SUFFIXES = {".md", ".py", ".toml", ".sh", ".cu", ".txt", ".cfg", ".ini", ""}

ALLOWED: dict[tuple[str, str], str] = {
    ("evidence/README.md", "issue13"):
        "the old names of the H100 question files (h100_issue13_*.json), as the result files' recorded commands "
        "still write them (those files are kept byte for byte), mapped once to today's names",
}
"""(file, matched text) -> why it stays.  Each entry must still match exactly once (a stale one fails)."""


def _files() -> list[Path]:
    out = sorted((ROOT / "evidence").glob("*.md"))
    for name in SCANNED:
        top = ROOT / name
        for p in [top] if top.is_file() else sorted(top.rglob("*")):
            rel = p.relative_to(ROOT).as_posix()
            if not p.is_file() or "__pycache__" in p.parts or rel.startswith(SKIPPED) or p.suffix not in SUFFIXES:
                continue
            out.append(p)
    return out


def _found() -> dict[tuple[str, str], list[int]]:
    found: dict[tuple[str, str], list[int]] = {}
    for p in _files():
        try:
            text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for m in PATTERN.finditer(text):
            key = (p.relative_to(ROOT).as_posix(), m.group())
            found.setdefault(key, []).append(text.count("\n", 0, m.start()) + 1)
    return found


def test_pattern():
    hits = ["issue 13", "Issue 12 item 6", "issue #13", "(issue 12, items 2 and 5)", "issues 11", "issue-12 contract",
            "h100_issue13_x.json", "test_issue14.py", "ISSUE\n14"]
    misses = ["DeepGEMM #176", "the issue's answer", "tissue 5", "issues two HMMA", "github.com/x/y/issues/176"]
    assert all(PATTERN.search(t) for t in hits)
    assert not any(PATTERN.search(t) for t in misses)


def test_no_issue_numbers():
    found = _found()
    assert len(_files()) > 200  # the scan reaches the package, the tests, the docs and the model files
    bad = {k: v for k, v in found.items() if k not in ALLOWED}
    assert not bad, "issue numbers (name the evidence by its file, question or run instead):\n" + "\n".join(
        f"  {f}:{lines} {text!r}" for (f, text), lines in sorted(bad.items()))
    stale = [k for k in ALLOWED if len(found.get(k, [])) != 1]
    assert not stale, f"allow-list entries that no longer match exactly once (remove them): {stale}"
