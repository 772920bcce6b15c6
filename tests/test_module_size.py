"""Small modules with one job : a module of ``tcsmt/`` or ``tools/`` over 400 lines says why in its
docstring (the words "over 400 lines", then the reason), or is split by concern."""
from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LIMIT = 400

#: over the limit with no reason yet (none now: library_import.py was split, params.py states its reason)
PENDING: set[str] = set()


def test_long_modules_say_why():
    unexplained = {}
    for folder in ("tcsmt", "tools"):
        for path in sorted((REPO / folder).rglob("*.py")):
            text = path.read_text()
            lines = text.count("\n")
            name = path.relative_to(REPO).as_posix()
            if lines <= LIMIT:
                continue
            doc = ast.get_docstring(ast.parse(text)) or ""
            if re.search(r"over 400 lines", doc, re.IGNORECASE):
                continue
            if name in PENDING:
                continue
            unexplained[name] = lines
    assert not unexplained, (f"modules over {LIMIT} lines without a reason in their docstring: {unexplained}; "
                             "split them by concern, or say in the docstring why they are one module")
