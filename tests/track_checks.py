"""What the papers' ``track`` tests share: the config schema's enums, and which modules importing one module loads."""

from __future__ import annotations

import ast
import subprocess
import sys
from typing import Any

from tests.conftest import REPO


def schema_enums(node: Any) -> list[list[Any]]:
    """Every ``enum`` list in a (loaded) schema, depth first."""
    if isinstance(node, dict):
        found = [node["enum"]] if isinstance(node.get("enum"), list) else []
        return found + [e for value in node.values() for e in schema_enums(value)]
    if isinstance(node, list):
        return [e for value in node for e in schema_enums(value)]
    return []


def loaded_by_import(module: str, candidates: tuple[str, ...]) -> list[str]:
    """Which of ``candidates`` a fresh Python process has imported after ``import module``."""
    code = f"import sys, {module}; print(sorted(m for m in {candidates!r} if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert result.returncode == 0, result.stderr
    return ast.literal_eval(result.stdout.strip())
