/**
 * proxops site policies in TypeScript: the helpers the Rust policy SDK gives (the manifest
 * and plan views, size units, field paths, verdict builders), typed by the declarations jco
 * generates from proxops's WIT (`proxops:policy/policy@0.1.0`, in build/types). A contract
 * change that renames or removes what this SDK or a policy uses fails `tsc`, so the build.
 *
 * A policy module exports `checker`:
 *
 *     export const checker = exportPolicy({
 *       name: "require-owner", version: "0.1.0", description: "...",
 *       schema: { type: "object" }, defaults: { label: "owner" },
 *       checkManifest(settings, manifest) { ... return findings.verdict(); },
 *     });
 *
 * It is built with jco's QuickJS backend in synchronous mode (componentize-qjs --sync):
 * proxops's wasmtime build runs components without the component-model async ABI.
 */

import type * as Wit from "proxops:policy/checker@0.1.0";
import type { Diagnostic, Operation } from "proxops:common/types@0.1.0";

export type Verdict = Wit.Verdict;
export type Violation = Wit.Violation;
export type ManifestView = Wit.ManifestView;
export type ActionView = Wit.ActionView;
export type { Diagnostic, Operation };
/** What the component exports, exactly as the WIT declares it. */
export type Checker = typeof Wit;

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type Settings = { [key: string]: Json };

export const KIB = 1024;
export const MIB = KIB * 1024;
export const GIB = MIB * 1024;
export const TIB = GIB * 1024;

/** A manifest document (the JSON of the YAML as written; secrets are references). */
export class Doc {
  constructor(readonly value: Json) {}

  /** Parse the JSON text the host sends; anything unparsable reads as an empty document. */
  static parse(text: string): Doc {
    try {
      return new Doc(JSON.parse(text) as Json);
    } catch {
      return new Doc(null);
    }
  }

  /** The value at a dotted path with optional indexes (`spec.networks[1].bridge`). */
  get(path: string): Json | undefined {
    let cur: Json | undefined = this.value;
    for (const part of path.split(".").filter((p) => p !== "")) {
      const bracket = part.indexOf("[");
      const key = bracket < 0 ? part : part.slice(0, bracket);
      const indexes = bracket < 0 ? "" : part.slice(bracket);
      if (key !== "") {
        if (cur === null || typeof cur !== "object" || Array.isArray(cur) || !(key in cur)) {
          return undefined;
        }
        cur = cur[key];
      }
      for (const index of indexes.split("[").filter((s) => s !== "")) {
        if (!/^[0-9]+\]$/.test(index) || !Array.isArray(cur)) {
          return undefined;
        }
        const n = Number(index.slice(0, -1));
        if (n >= cur.length) {
          return undefined;
        }
        cur = cur[n];
      }
    }
    return cur;
  }

  strAt(path: string): string | undefined {
    const v = this.get(path);
    return typeof v === "string" ? v : undefined;
  }

  /** An unsigned integer, also when written as a string of digits. */
  u64At(path: string): number | undefined {
    const v = this.get(path);
    if (typeof v === "number") {
      return Number.isInteger(v) && v >= 0 ? v : undefined;
    }
    if (typeof v === "string" && /^[0-9]+$/.test(v.trim())) {
      return Number(v.trim());
    }
    return undefined;
  }

  /** A flag: true, 1 or "1"/"true"/"yes"/"on" read as true (and their opposites as false). */
  boolAt(path: string): boolean | undefined {
    const v = this.get(path);
    if (typeof v === "boolean") {
      return v;
    }
    if (typeof v === "number") {
      return Number.isInteger(v) && v >= 0 ? v !== 0 : undefined;
    }
    if (typeof v === "string") {
      const word = v.toLowerCase();
      if (["1", "true", "yes", "on"].includes(word)) return true;
      if (["0", "false", "no", "off"].includes(word)) return false;
    }
    return undefined;
  }

  /** The entries of a list (empty when absent or not a list). */
  listAt(path: string): Json[] {
    const v = this.get(path);
    return Array.isArray(v) ? v : [];
  }

  kind(): string | undefined {
    return this.strAt("kind");
  }

  name(): string | undefined {
    return this.strAt("metadata.name");
  }

  /** `spec.tags`, lower-cased (PVE tags are case-insensitive). */
  tags(): string[] {
    return this.listAt("spec.tags")
      .filter((t): t is string => typeof t === "string")
      .map((t) => t.toLowerCase());
  }

  /** `metadata.annotations.<key>` (keys may contain dots and slashes). */
  annotation(key: string): string | undefined {
    return this.entry("annotations", key);
  }

  /** `metadata.labels.<key>`. */
  label(key: string): string | undefined {
    return this.entry("labels", key);
  }

  private entry(map: string, key: string): string | undefined {
    const m = this.get(`metadata.${map}`);
    if (m === null || typeof m !== "object" || Array.isArray(m)) return undefined;
    const v = m[key];
    return typeof v === "string" ? v : undefined;
  }
}

/** Findings collected by a check; `verdict()` turns them into the answer. */
export class Findings {
  readonly denials: Violation[] = [];
  readonly warnings: Violation[] = [];

  /** A violation that must stop the apply (in enforce mode). */
  deny(path: string, message: string): void {
    this.denials.push({ path, message });
  }

  /** A finding shown to the operator that never stops anything. */
  warn(path: string, message: string): void {
    this.warnings.push({ path, message });
  }

  isEmpty(): boolean {
    return this.denials.length === 0 && this.warnings.length === 0;
  }

  /** Deny with every denial when there is one (a verdict carries one severity), else warn,
   * else allow. */
  verdict(): Verdict {
    if (this.denials.length > 0) return { tag: "deny", val: this.denials };
    if (this.warnings.length > 0) return { tag: "warn", val: this.warnings };
    return { tag: "allow" };
  }
}

/** The path of a check-plan finding about one object: `Kind/name` or `Kind/name:field`. */
export function objectPath(kind: string, name: string, field = ""): string {
  return field === "" ? `${kind}/${name}` : `${kind}/${name}:${field}`;
}

/** A settings error at `path` (empty for the whole mapping). */
export function settingsError(path: string, message: string): Diagnostic {
  return { path, message, severity: "error" };
}

const UNITS: { [unit: string]: number } = { B: 1, KiB: KIB, MiB: MIB, GiB: GIB, TiB: TIB };

/** Bytes of a binary size such as `8GiB` or `1.5GiB` (whole bytes); throws an Error with the
 * Rust SDK's messages. Exact up to 2^53 bytes (8 PiB), JavaScript's safe integers. */
export function parseSize(text: string): number {
  const s = text.trim();
  const m = /^([0-9.]*)\s*(.*)$/.exec(s);
  const number = m?.[1] ?? "";
  const unit = m?.[2] ?? "";
  const notASize = new Error(`\`${text}\` is not a size; write it like 8GiB or 512MiB`);
  if (number === "" || !(unit in UNITS) || !/^[0-9]+(\.[0-9]+)?$/.test(number)) {
    throw notASize;
  }
  const [whole, frac = ""] = number.split(".");
  const factor = BigInt(UNITS[unit]);
  let total = BigInt(whole) * factor;
  if (frac !== "") {
    const scaled = BigInt(frac) * factor;
    const den = 10n ** BigInt(frac.length);
    if (frac.length > 18 || scaled % den !== 0n) {
      throw new Error(`\`${text}\` is not a whole number of bytes`);
    }
    total += scaled / den;
  }
  if (total > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new Error(`\`${text}\` is too large`);
  }
  return Number(total);
}

/** `8GiB`, `1536MiB`: the largest binary unit that shows `n` bytes exactly. */
export function formatSize(n: number): string {
  for (const [unit, suffix] of [[TIB, "TiB"], [GIB, "GiB"], [MIB, "MiB"], [KIB, "KiB"]] as const) {
    if (n !== 0 && n % unit === 0) return `${n / unit}${suffix}`;
  }
  return `${n}B`;
}

/** What a policy implements; every check is optional (allow). */
export interface SitePolicy {
  name: string;
  version: string;
  description: string;
  /** JSON Schema (2020-12) of the settings; the host checks settings against it at load. */
  schema: Json;
  /** Merged under the settings before every call. */
  defaults?: Settings;
  validateSettings?(settings: Settings): Diagnostic[];
  checkManifest?(settings: Settings, manifest: ManifestView): Verdict;
  checkPlan?(settings: Settings, actions: ActionView[]): Verdict;
}

function parseSettings(text: string, defaults: Settings): Settings {
  const t = text.trim();
  const value: Json = t === "" || t === "null" ? {} : (JSON.parse(t) as Json);
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new Error("expected a mapping");
  }
  return { ...defaults, ...value };
}

/** The `checker` export for `policy`. Settings that do not parse at a check deny, never
 * allow; a failing validate-settings returns its diagnostics (thrown, as the WIT result's
 * error). */
export function exportPolicy(policy: SitePolicy): Checker {
  const defaults = policy.defaults ?? {};
  // Settings, or the deny that stands for them when they do not parse.
  const settingsOr = (text: string): { settings: Settings } | { denied: Verdict } => {
    try {
      return { settings: parseSettings(text, defaults) };
    } catch (e) {
      const f = new Findings();
      f.deny("", `invalid settings: ${(e as Error).message}`);
      return { denied: f.verdict() };
    }
  };
  return {
    metadata: () => ({
      name: policy.name,
      version: policy.version,
      settingsSchema: JSON.stringify(policy.schema),
      description: policy.description,
    }),
    validateSettings(text: string): void {
      let settings: Settings;
      try {
        settings = parseSettings(text, defaults);
      } catch (e) {
        throw [settingsError("", `invalid settings: ${(e as Error).message}`)];
      }
      const errors = policy.validateSettings?.(settings) ?? [];
      if (errors.length > 0) {
        throw errors;
      }
    },
    checkManifest(manifest: ManifestView, text: string): Verdict {
      const s = settingsOr(text);
      if ("denied" in s) return s.denied;
      return policy.checkManifest?.(s.settings, manifest) ?? { tag: "allow" };
    },
    checkPlan(actions: ActionView[], text: string): Verdict {
      const s = settingsOr(text);
      if ("denied" in s) return s.denied;
      return policy.checkPlan?.(s.settings, actions) ?? { tag: "allow" };
    },
  };
}
