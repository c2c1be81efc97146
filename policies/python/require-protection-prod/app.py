"""require-protection-prod, in Python: a VM tagged `prod` must have PVE's protection flag set
(`spec.options.protection: true`, wire `protection=1`). The port of
policies/require-protection-prod (Rust); tests/e2e/foreign_policies.rs runs both on the same
inputs and requires the same verdicts.

Settings (all optional):
- `tags`: tags that mark production (default ["prod"], compared case-insensitively);
- `kinds`: kinds checked (default ["VM"]).

Build (from this folder): ../build.sh . require-protection-prod.wasm
"""

from proxops_policy import Doc, Findings, SitePolicy, export, object_path, settings_error


class RequireProtectionProd(SitePolicy):
    NAME = "require-protection-prod"
    VERSION = "0.1.0"
    DESCRIPTION = "VMs tagged prod must set protection=1"
    SCHEMA = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "tags": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1,
                     "description": "Tags that mark a production VM (case-insensitive)."},
            "kinds": {"type": "array", "items": {"type": "string", "minLength": 1},
                      "description": "Kinds checked; default [VM]."},
        },
    }
    DEFAULTS = {"tags": ["prod"], "kinds": ["VM"]}

    def validate_settings(self, settings):
        errors = []
        unknown = sorted(set(settings) - {"tags", "kinds"})
        for key in unknown:
            errors.append(settings_error(key, f"invalid settings: unknown field `{key}`"))
        for i, t in enumerate(settings["tags"]):
            if not t.strip() or ";" in t or "," in t:
                errors.append(settings_error(f"tags[{i}]", f"`{t}` is not a PVE tag"))
        if not settings["tags"]:
            errors.append(settings_error("tags", "at least one tag is needed, or the policy checks nothing"))
        return errors

    @staticmethod
    def prod_tag(settings, kind, doc):
        """The production tag `doc` carries, if any."""
        if kind not in settings["kinds"]:
            return None
        tags = doc.tags()
        return next((t.lower() for t in settings["tags"] if t.lower() in tags), None)

    def check_manifest(self, settings, manifest):
        doc = Doc.parse(manifest.document)
        f = Findings()
        tag = self.prod_tag(settings, manifest.kind, doc)
        if tag is not None and doc.bool_at("spec.options.protection") is not True:
            f.deny("spec.options.protection",
                   f"{manifest.kind} {manifest.name} is tagged `{tag}`: "
                   "set spec.options.protection: true (PVE protection=1)")
        return f.verdict()

    def check_plan(self, settings, actions):
        f = Findings()
        for a in actions:
            if a.document is None:
                continue
            tag = self.prod_tag(settings, a.kind, Doc.parse(a.document))
            if tag is None:
                continue
            for c in a.changes:
                if c.key == "protection" and (c.new is None or c.new == "0"):
                    f.deny(object_path(a.kind, a.name, "protection"),
                           f"`{a.summary}` would turn protection off on a VM tagged `{tag}`")
        return f.verdict()


Checker = export(RequireProtectionProd)
