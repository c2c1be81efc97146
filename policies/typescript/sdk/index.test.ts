/**
 * The TypeScript SDK's helpers, on the cases the Rust SDK's tests use (policies/sdk/src/
 * size.rs, doc.rs, findings.rs), so that a policy ported between the languages reads
 * manifests alike. Built by `tsc` with the SDK; run with `node build/js/sdk/index.test.js`
 * (tests/e2e/foreign_policies.rs does).
 */

import { Doc, Findings, formatSize, objectPath, parseSize } from "./index.js";

let failures = 0;
function check(what: string, got: unknown, want: unknown): void {
  if (JSON.stringify(got) !== JSON.stringify(want)) {
    failures += 1;
    console.error(`FAIL ${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
  }
}

const sizes: [string, number | null][] = [
  ["8GiB", 8 * 2 ** 30], ["512MiB", 512 * 2 ** 20], ["1.5GiB", 3 * 2 ** 29],
  [" 2 TiB ", 2 * 2 ** 40], ["4096B", 4096], ["1.3B", null], ["8GB", null],
  ["GiB", null], ["-1GiB", null], ["8", null], ["99999999999999999999TiB", null],
];
for (const [text, want] of sizes) {
  let got: number | null;
  try {
    got = parseSize(text);
  } catch {
    got = null;
  }
  check(`parseSize(${JSON.stringify(text)})`, got, want);
}
check("formatSize 1536MiB", formatSize(3 * 2 ** 29), "1536MiB");
check("formatSize 16GiB", formatSize(16 * 2 ** 30), "16GiB");
check("formatSize 0", formatSize(0), "0B");

const d = new Doc({
  kind: "VM",
  metadata: { name: "web", annotations: { "proxops.io/approve": "ticket-1" } },
  spec: {
    tags: ["Prod"], memory: "2GiB", cpu: { cores: "4" },
    networks: [{ bridge: "vmbr0" }, { bridge: "vmbr1", vlan: 30 }],
    options: { protection: true },
  },
});
check("kind", d.kind(), "VM");
check("name", d.name(), "web");
check("strAt", d.strAt("spec.networks[1].bridge"), "vmbr1");
check("u64At vlan", d.u64At("spec.networks[1].vlan"), 30);
check("u64At cores", d.u64At("spec.cpu.cores"), 4);
check("get past the end", d.get("spec.networks[2]"), undefined);
check("boolAt", d.boolAt("spec.options.protection"), true);
check("tags", d.tags(), ["prod"]);
check("annotation", d.annotation("proxops.io/approve"), "ticket-1");
check("label", d.label("x"), undefined);
check("listAt", d.listAt("spec.networks").length, 2);
check("parse", Doc.parse("not json").kind(), undefined);

const f = new Findings();
check("allow", f.verdict().tag, "allow");
f.warn("a", "w");
check("warn", f.verdict().tag, "warn");
f.deny("b", "d");
check("deny", f.verdict(), { tag: "deny", val: [{ path: "b", message: "d" }] });
check("objectPath", objectPath("VM", "web-01"), "VM/web-01");
check("objectPath field", objectPath("VM", "web-01", "net0"), "VM/web-01:net0");

if (failures > 0) {
  throw new Error(`${failures} SDK checks failed`);
}
console.log("sdk: all checks passed");
