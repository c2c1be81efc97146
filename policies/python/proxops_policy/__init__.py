"""proxops site policies in Python: the helpers the Rust policy SDK gives, over the bindings
componentize-py generates from proxops's WIT (`proxops:policy/policy@0.1.0`).

A policy module subclasses `SitePolicy` and exports it:

    from proxops_policy import Doc, Findings, SitePolicy, export

    class RequireOwner(SitePolicy):
        NAME = "require-owner"
        VERSION = "0.1.0"
        DESCRIPTION = "every manifest carries an owner label"
        SCHEMA = {"type": "object", "additionalProperties": False,
                  "properties": {"label": {"type": "string", "minLength": 1}}}
        DEFAULTS = {"label": "owner"}

        def check_manifest(self, settings, manifest):
            f = Findings()
            if not Doc.parse(manifest.document).label(settings["label"]):
                f.deny(f"metadata.labels.{settings['label']}", "every manifest needs an owner")
            return f.verdict()

    Checker = export(RequireOwner)

The WIT types come from the generated `wit_world` package, so a contract change that renames
or removes what this SDK uses fails at build (componentize) or on the first call in the
example suites CI runs.
"""

import json
import re

from wit_world import exports
from wit_world.exports import checker
from wit_world.imports import types
from componentize_py_types import Err

__all__ = [
    "Doc", "Findings", "SitePolicy", "export", "object_path", "settings_error",
    "parse_size", "format_size", "operation_name", "checker", "types",
]

KIB, MIB, GIB, TIB = 1 << 10, 1 << 20, 1 << 30, 1 << 40


class Doc:
    """A manifest document (the JSON of the YAML as written; secrets are references) with
    path-based accessors, as the Rust SDK's `Doc`."""

    def __init__(self, value):
        self.value = value

    @staticmethod
    def parse(text):
        """Parse the JSON text the host sends; anything unparsable reads as an empty document."""
        try:
            return Doc(json.loads(text))
        except (ValueError, TypeError):
            return Doc(None)

    def get(self, path):
        """The value at a dotted path with optional indexes (`spec.networks[1].bridge`), or None."""
        cur = self.value
        for part in (p for p in path.split(".") if p):
            key, _, rest = part.partition("[")
            if key:
                if not isinstance(cur, dict) or key not in cur:
                    return None
                cur = cur[key]
            for index in (i for i in ("[" + rest).split("[") if i) if rest else []:
                if not index.endswith("]") or not index[:-1].isdigit():
                    return None
                n = int(index[:-1])
                if not isinstance(cur, list) or n >= len(cur):
                    return None
                cur = cur[n]
        return cur

    def str_at(self, path):
        v = self.get(path)
        return v if isinstance(v, str) else None

    def u64_at(self, path):
        """An unsigned integer, also when written as a string of digits."""
        v = self.get(path)
        if isinstance(v, bool):
            return None
        if isinstance(v, int):
            return v if v >= 0 else None
        if isinstance(v, str) and v.strip().isdigit():
            return int(v.strip())
        return None

    def bool_at(self, path):
        """A flag: true, 1 or "1"/"true"/"yes"/"on" read as True (and their opposites as False)."""
        v = self.get(path)
        if isinstance(v, bool):
            return v
        if isinstance(v, int):
            return v != 0 if v >= 0 else None
        if isinstance(v, str):
            return {"1": True, "true": True, "yes": True, "on": True,
                    "0": False, "false": False, "no": False, "off": False}.get(v.lower())
        return None

    def list_at(self, path):
        """The entries of a list (empty when absent or not a list)."""
        v = self.get(path)
        return v if isinstance(v, list) else []

    def kind(self):
        return self.str_at("kind")

    def name(self):
        return self.str_at("metadata.name")

    def tags(self):
        """`spec.tags`, lower-cased (PVE tags are case-insensitive)."""
        return [t.lower() for t in self.list_at("spec.tags") if isinstance(t, str)]

    def annotation(self, key):
        """`metadata.annotations.<key>` (keys may contain dots and slashes)."""
        v = ((self.get("metadata") or {}).get("annotations") or {}).get(key)
        return v if isinstance(v, str) else None

    def label(self, key):
        v = ((self.get("metadata") or {}).get("labels") or {}).get(key)
        return v if isinstance(v, str) else None


class Findings:
    """Findings collected by a check; `verdict()` turns them into the answer."""

    def __init__(self):
        self.denials = []
        self.warnings = []

    def deny(self, path, message):
        """A violation that must stop the apply (in enforce mode)."""
        self.denials.append(checker.Violation(path=path, message=message))

    def warn(self, path, message):
        """A finding shown to the operator that never stops anything."""
        self.warnings.append(checker.Violation(path=path, message=message))

    def is_empty(self):
        return not self.denials and not self.warnings

    def verdict(self):
        """Deny with every denial when there is one (warnings are then dropped: a verdict
        carries one severity), else warn with the warnings, else allow."""
        if self.denials:
            return checker.Verdict_Deny(self.denials)
        if self.warnings:
            return checker.Verdict_Warn(self.warnings)
        return checker.Verdict_Allow()


def object_path(kind, name, field=""):
    """The path of a check-plan finding about one object: `Kind/name` or `Kind/name:field`."""
    return f"{kind}/{name}:{field}" if field else f"{kind}/{name}"


def settings_error(path, message):
    """A settings error at `path` (empty for the whole mapping)."""
    return types.Diagnostic(path=path, message=message, severity=types.Severity.ERROR)


_SIZE = re.compile(r"^([0-9.]*)\s*(.*)$")
_UNITS = {"B": 1, "KiB": KIB, "MiB": MIB, "GiB": GIB, "TiB": TIB}


def parse_size(text):
    """Bytes of a binary size such as `8GiB` or `1.5GiB` (whole bytes); raises ValueError
    with the Rust SDK's messages."""
    s = text.strip()
    number, unit = _SIZE.match(s).groups()
    if not s or not number:
        raise ValueError(f"`{text}` is not a size; write it like 8GiB or 512MiB")
    if unit not in _UNITS:
        raise ValueError(f"`{text}` is not a size; write it like 8GiB or 512MiB")
    whole, _, frac = number.partition(".")
    if not whole.isdigit() or (frac and not frac.isdigit()) or number.endswith("."):
        raise ValueError(f"`{text}` is not a size; write it like 8GiB or 512MiB")
    total = int(whole) * _UNITS[unit]
    if frac:
        scaled = int(frac) * _UNITS[unit]
        den = 10 ** len(frac)
        if len(frac) > 18 or scaled % den:
            raise ValueError(f"`{text}` is not a whole number of bytes")
        total += scaled // den
    if total >= 1 << 64:
        raise ValueError(f"`{text}` is too large")
    return total


def format_size(n):
    """`8GiB`, `1536MiB`: the largest binary unit that shows `n` bytes exactly."""
    for unit, suffix in ((TIB, "TiB"), (GIB, "GiB"), (MIB, "MiB"), (KIB, "KiB")):
        if n and n % unit == 0:
            return f"{n // unit}{suffix}"
    return f"{n}B"


def operation_name(op):
    """The operation of a planned action as a lower-case word (`create`, `mark-template`)."""
    return op.name.lower().replace("_", "-")


class SitePolicy:
    """Subclass it: NAME, VERSION, DESCRIPTION, SCHEMA (a JSON Schema as a dict), DEFAULTS
    (merged under the settings), and any of validate_settings, check_manifest, check_plan.
    Settings arrive as a dict; the host has checked them against SCHEMA at load."""

    NAME = ""
    VERSION = "0.1.0"
    DESCRIPTION = ""
    SCHEMA = {"type": "object"}
    DEFAULTS = {}

    def validate_settings(self, settings):
        """Return a list of `settings_error(path, message)`; empty when valid."""
        return []

    def check_manifest(self, settings, manifest):
        return checker.Verdict_Allow()

    def check_plan(self, settings, actions):
        return checker.Verdict_Allow()


def _settings(text):
    text = (text or "").strip()
    value = json.loads(text) if text and text != "null" else {}
    if not isinstance(value, dict):
        raise ValueError("invalid settings: expected a mapping")
    return value


def export(policy_class):
    """The `Checker` class componentize-py exports for `policy_class` (assign it to a
    module-level `Checker`). Settings that do not parse at a check deny, never allow."""
    policy = policy_class()

    def settings_or_denial(text):
        try:
            merged = dict(policy_class.DEFAULTS)
            merged.update(_settings(text))
            return merged, None
        except ValueError as e:
            f = Findings()
            f.deny("", f"invalid settings: {e}")
            return None, f.verdict()

    class Checker(exports.Checker):
        def metadata(self):
            return checker.PolicyInfo(
                name=policy_class.NAME,
                version=policy_class.VERSION,
                settings_schema=json.dumps(policy_class.SCHEMA),
                description=policy_class.DESCRIPTION,
            )

        def validate_settings(self, settings):
            merged, denial = settings_or_denial(settings)
            if denial is not None:
                raise Err([settings_error("", denial.value[0].message)])
            errors = policy.validate_settings(merged)
            if errors:
                raise Err(errors)

        def check_manifest(self, manifest, settings):
            merged, denial = settings_or_denial(settings)
            return denial if denial is not None else policy.check_manifest(merged, manifest)

        def check_plan(self, actions, settings):
            merged, denial = settings_or_denial(settings)
            return denial if denial is not None else policy.check_plan(merged, actions)

    return Checker
