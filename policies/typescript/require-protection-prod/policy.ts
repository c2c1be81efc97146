/**
 * require-protection-prod, in TypeScript: a VM tagged `prod` must have PVE's protection flag
 * set (`spec.options.protection: true`, wire `protection=1`). The port of
 * policies/require-protection-prod (Rust); tests/e2e/foreign_policies.rs runs both on the
 * same inputs and requires the same verdicts.
 *
 * Settings (all optional): `tags` (default ["prod"], case-insensitive), `kinds` (default ["VM"]).
 */

import { Doc, Findings, exportPolicy, objectPath, settingsError } from "../sdk/index.js";
import type { Diagnostic, Settings } from "../sdk/index.js";

const strings = (v: Settings[string]): string[] =>
  Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : [];

/** The production tag `doc` carries, if any. */
function prodTag(settings: Settings, kind: string, doc: Doc): string | undefined {
  if (!strings(settings.kinds).includes(kind)) return undefined;
  const tags = doc.tags();
  return strings(settings.tags)
    .map((t) => t.toLowerCase())
    .find((t) => tags.includes(t));
}

export const checker = exportPolicy({
  name: "require-protection-prod",
  version: "0.1.0",
  description: "VMs tagged prod must set protection=1",
  schema: {
    $schema: "https://json-schema.org/draft/2020-12/schema",
    type: "object",
    additionalProperties: false,
    properties: {
      tags: {
        type: "array", items: { type: "string", minLength: 1 }, minItems: 1,
        description: "Tags that mark a production VM (case-insensitive).",
      },
      kinds: {
        type: "array", items: { type: "string", minLength: 1 },
        description: "Kinds checked; default [VM].",
      },
    },
  },
  defaults: { tags: ["prod"], kinds: ["VM"] },

  validateSettings(settings): Diagnostic[] {
    const errors: Diagnostic[] = [];
    for (const key of Object.keys(settings).filter((k) => k !== "tags" && k !== "kinds").sort()) {
      errors.push(settingsError(key, `invalid settings: unknown field \`${key}\``));
    }
    strings(settings.tags).forEach((t, i) => {
      if (t.trim() === "" || t.includes(";") || t.includes(",")) {
        errors.push(settingsError(`tags[${i}]`, `\`${t}\` is not a PVE tag`));
      }
    });
    if (strings(settings.tags).length === 0) {
      errors.push(settingsError("tags", "at least one tag is needed, or the policy checks nothing"));
    }
    return errors;
  },

  checkManifest(settings, manifest) {
    const doc = Doc.parse(manifest.document);
    const f = new Findings();
    const tag = prodTag(settings, manifest.kind, doc);
    if (tag !== undefined && doc.boolAt("spec.options.protection") !== true) {
      f.deny(
        "spec.options.protection",
        `${manifest.kind} ${manifest.name} is tagged \`${tag}\`: set spec.options.protection: true (PVE protection=1)`,
      );
    }
    return f.verdict();
  },

  checkPlan(settings, actions) {
    const f = new Findings();
    for (const a of actions) {
      if (a.document === undefined || a.document === null) continue;
      const tag = prodTag(settings, a.kind, Doc.parse(a.document));
      if (tag === undefined) continue;
      for (const c of a.changes) {
        if (c.key === "protection" && (c.new === undefined || c.new === null || c.new === "0")) {
          f.deny(
            objectPath(a.kind, a.name, "protection"),
            `\`${a.summary}\` would turn protection off on a VM tagged \`${tag}\``,
          );
        }
      }
    }
    return f.verdict();
  },
});
