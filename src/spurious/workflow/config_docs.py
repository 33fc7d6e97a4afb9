"""docs/config.md from the config schema: every key with its type, default and description, nested keys included.

``python -m spurious.workflow.config_docs`` (``make config-docs``) writes the page; ``--check`` only compares. The page
is derived from ``schemas/config.schema.yaml`` alone, so a schema change needs nothing but a rerun.

How the schema maps to rows: every ``properties`` key is a row named by its dotted path; a map (``additionalProperties``
with a schema) continues the path with a placeholder, ``<dataset>`` under ``datasets`` (the parent key without its
plural s) or ``<name>``; an array of objects continues it with ``[]``; the object variants of a ``oneOf`` add their keys
to the same path. A ``$defs`` entry with keys of its own that the schema uses more than once gets its own section,
which the rows that use it link to; one used once is written out where it is used; one without keys (``name``,
``training_overrides``) is described once, under "Terms".
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spurious.workflow.config import SCHEMA_PATH, load_schema

DOC_PATH = SCHEMA_PATH.parents[1] / "docs" / "config.md"
REGENERATE = "make config-docs"
_REF_PREFIX = "#/$defs/"


@dataclass(frozen=True)
class Row:
    path: str
    type: str
    default: str
    description: str


def _def_name(node: Mapping[str, Any]) -> str | None:
    ref = node.get("$ref")
    if ref is None:
        return None
    if not ref.startswith(_REF_PREFIX):
        raise ValueError(f"unsupported $ref {ref!r}: only {_REF_PREFIX}<name> is followed")
    return ref[len(_REF_PREFIX) :]


def _iter_refs(node: Any) -> Iterator[str]:
    if isinstance(node, Mapping):
        name = _def_name(node)
        if name is not None:
            yield name
        for value in node.values():
            yield from _iter_refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _iter_refs(value)


def _has_keys(node: Mapping[str, Any]) -> bool:
    return bool(node.get("properties"))


class _Renderer:
    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.defs: Mapping[str, Any] = schema.get("$defs", {})
        uses = Counter(_iter_refs(schema))
        # a def with keys used more than once: a section of its own; without keys: a term
        self.sections = [n for n, d in self.defs.items() if _has_keys(d) and uses[n] > 1]
        self.terms = [n for n, d in self.defs.items() if not _has_keys(d) and uses[n] > 0]

    # -- types ---------------------------------------------------------------------------------------------------------
    def type_text(self, node: Mapping[str, Any]) -> str:
        name = _def_name(node)
        if name is not None:
            if name in self.sections or name in self.terms:
                return f"[{name}](#{name})"
            return self.type_text(self.defs[name])
        for combinator in ("oneOf", "anyOf"):
            if combinator in node:
                return " or ".join(self.type_text(v) for v in node[combinator])
        if "const" in node:
            return _code(node["const"])
        if "enum" in node:
            values = node["enum"]
            return _code(values[0]) if len(values) == 1 else "one of " + ", ".join(_code(v) for v in values)
        types = node.get("type")
        if types is None:
            return "object" if "properties" in node or "propertyNames" in node else "any"
        types = types if isinstance(types, list) else [types]
        return " or ".join(self._one_type(t, node) for t in types)

    def _one_type(self, kind: str, node: Mapping[str, Any]) -> str:
        if kind == "array":
            items = node.get("items")
            if not items:
                text = "array"
            elif "enum" in items:
                text = "array of values from " + ", ".join(_code(v) for v in items["enum"])
            else:
                text = f"array of {self.type_text(items)}"
            return text + _item_count(node)
        if kind == "object":
            names = node.get("propertyNames", {}).get("enum")
            keys = f" (keys: {', '.join(_code(n) for n in names)})" if names else ""
            values = node.get("additionalProperties")
            if isinstance(values, Mapping):
                return f"map{keys} of {self.type_text(values)}"
            return "object" + keys
        if kind in ("integer", "number"):
            return kind + _bounds(node)
        if kind == "string" and "pattern" in node:
            return f"string matching {_code(node['pattern'])}"
        return kind

    # -- rows ----------------------------------------------------------------------------------------------------------
    def rows(self, path: str, node: Mapping[str, Any], required: bool) -> list[Row]:
        """The row of ``path`` (its schema ``node``) and the rows of every key below it."""
        target = self._resolve(node)
        if "default" in node or "default" in target:
            default = _code(node.get("default", target.get("default")))
        else:
            default = "required" if required else "–"
        out = [Row(path, self.type_text(node), default, self._description(node))]
        if _def_name(node) not in self.sections:
            out += self._children(path, target)
        return out

    def _description(self, node: Mapping[str, Any]) -> str:
        """The node's own description, else that of the definition written out in its place (a section or a term
        has its own, not repeated in every row that uses it), else that of its one non-null ``oneOf`` variant."""
        if node.get("description"):
            return _one_line(node["description"])
        name = _def_name(node)
        if name is not None:
            return "" if name in self.sections or name in self.terms else self._description(self.defs[name])
        variants = [v for v in node.get("oneOf", []) if v.get("type") != "null"]
        return self._description(variants[0]) if len(variants) == 1 else ""

    def _resolve(self, node: Mapping[str, Any]) -> Mapping[str, Any]:
        name = _def_name(node)
        return node if name is None else self._resolve(self.defs[name])

    def _children(self, path: str, node: Mapping[str, Any]) -> list[Row]:
        out: list[Row] = []
        for variant in node.get("oneOf", node.get("anyOf", [])):
            if _def_name(variant) in self.sections:
                continue
            for row in self._children(path, self._resolve(variant)):
                if row.path not in {r.path for r in out}:
                    out.append(row)
        required = set(node.get("required", []))
        for key, sub in node.get("properties", {}).items():
            out += self.rows(f"{path}.{key}" if path else key, sub, key in required)
        values = node.get("additionalProperties")
        if isinstance(values, Mapping) and _def_name(values) not in self.sections:
            out += self._children(f"{path}.{_placeholder(path, node)}", self._resolve(values))
        items = node.get("items")
        if isinstance(items, Mapping) and _def_name(items) not in self.sections:
            out += self._children(f"{path}[]", self._resolve(items))
        return out

    # -- page ----------------------------------------------------------------------------------------------------------
    def page(self, schema: Mapping[str, Any]) -> str:
        lines = [
            "# Configuration reference",
            "",
            "[← README](../README.md)",
            "",
            "<!-- Generated from schemas/config.schema.yaml by `make config-docs` "
            "(python -m spurious.workflow.config_docs); do not edit by hand. -->",
            "",
            _one_line(schema.get("description", "")),
            "",
            "A config file (`config.yaml`, `configs/*.yaml`, or your own passed with `--configfile`) sets the keys "
            "below; every key not set takes its default. `<dataset>`, `<model>`, `<name>` and the like stand for "
            "names you choose; `[]` marks the items of a list; a type in brackets links to its section. "
            "How to pass a config and override keys: [running.md](running.md#configuration).",
            "",
        ]
        clash = set(schema.get("properties", {})) & set(self.sections + self.terms)
        if clash:
            raise ValueError(f"$defs {sorted(clash)} share a name with a top-level key: the links would clash")
        if self.terms:
            lines += ["## Terms", ""]
            for name in self.terms:
                term = self.defs[name]
                text = f"{self.type_text(term)}: {_one_line(term.get('description', ''))}"
                lines += [f"### {name}", "", _cell(text), ""]
        required = set(schema.get("required", []))
        for key, sub in schema.get("properties", {}).items():
            lines += [f"## {key}", ""] + _table(self.rows(key, sub, key in required))
        for name in self.sections:
            lines += [f"## {name}", ""] + _table(self._children("", self.defs[name]), intro=self.defs[name])
        return "\n".join(lines).rstrip() + "\n"


def _placeholder(path: str, node: Mapping[str, Any]) -> str:
    if "enum" in node.get("propertyNames", {}):
        return "<key>"
    last = path.rsplit(".", 1)[-1].removesuffix("[]")
    return f"<{last[:-1]}>" if last.endswith("s") and len(last) > 1 else "<name>"


def _bounds(node: Mapping[str, Any]) -> str:
    parts = []
    for key, sign in (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"), ("exclusiveMaximum", "<")):
        if key in node:
            parts.append(f"{sign} {node[key]}")
    return f" ({', '.join(parts)})" if parts else ""


def _item_count(node: Mapping[str, Any]) -> str:
    low, high = node.get("minItems"), node.get("maxItems")
    if low is not None and high is not None:
        return f", {low} items" if low == high else f", {low} to {high} items"
    if low is not None:
        return f", at least {low} item" + ("s" if low > 1 else "")
    return f", at most {high} items" if high is not None else ""


def _code(value: Any) -> str:
    text = value if isinstance(value, str) and value.strip() == value and value else json.dumps(value)
    return f"`{text}`"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _cell(text: str) -> str:
    """Text for a table cell: ``|`` escaped (GitHub splits cells on it, inside code spans too) and, outside code spans,
    ``<`` written as ``&lt;``, so that ``<name>`` is not taken for an HTML tag."""
    parts = text.replace("|", "\\|").split("`")
    return "`".join(part if i % 2 else part.replace("<", "&lt;") for i, part in enumerate(parts))


def _table(rows: list[Row], intro: Mapping[str, Any] | None = None) -> list[str]:
    lines = [_one_line(intro.get("description", "")), ""] if intro and intro.get("description") else []
    lines += ["| key | type | default | description |", "|---|---|---|---|"]
    for row in rows:
        key = row.path.replace("|", "\\|")
        lines.append(f"| `{key}` | {_cell(row.type)} | {_cell(row.default)} | {_cell(row.description)} |")
    return lines + [""]


def render(schema: Mapping[str, Any] | None = None) -> str:
    """The Markdown page for ``schema`` (default: the project's config schema)."""
    schema = load_schema() if schema is None else schema
    return _Renderer(schema).page(schema)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m spurious.workflow.config_docs", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--out", type=Path, default=DOC_PATH, help=f"the page to write (default {DOC_PATH})")
    parser.add_argument("--check", action="store_true", help="only compare: exit 1 when the page differs")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not args.out.exists() or args.out.read_text() != text:
            print(f"{args.out} is stale: regenerate it with `{REGENERATE}`", file=sys.stderr)
            return 1
        return 0
    tmp = args.out.with_name(args.out.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
