//! `proxops policy new NAME --lang python|typescript`: a policy project in the operator's
//! language that builds to a `.wasm` with one command, carrying proxops's WIT and the SDK of
//! its language (the same files as `policies/python` and `policies/typescript`, compiled in),
//! a small working policy (every manifest needs an owner label) and a test suite.

use std::path::{Path, PathBuf};

use crate::scaffold;

const COMMON_WIT: &str = include_str!("../../../wit/common/0.1.0/common.wit");
const POLICY_WIT: &str = include_str!("../../../wit/policy/0.1.0/policy.wit");
const PYTHON_SDK: &str = include_str!("../../../policies/python/proxops_policy/__init__.py");
const TYPESCRIPT_SDK: &str = include_str!("../../../policies/typescript/sdk/index.ts");
const TYPESCRIPT_PACKAGE: &str = include_str!("../../../policies/typescript/package.json");

/// A policy language `policy new` scaffolds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    Rust,
    Python,
    Typescript,
}

impl Lang {
    pub fn as_str(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Python => "python",
            Lang::Typescript => "typescript",
        }
    }
}

/// The suite and its fixtures every scaffold ships (the policy at `wasm`, relative to it).
pub(crate) fn suite(wasm: &str) -> Vec<(&'static str, String)> {
    let vm = |labels: &str| {
        format!(
            "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: web\n{labels}spec:\n  node: pve01\n  vmid: 100\n"
        )
    };
    vec![
        (
            "tests/policy-tests.yaml",
            format!(
                "# proxops policy test --suite tests/policy-tests.yaml (after building the policy)\n\
                 policy: ../{wasm}\n\
                 settings: {{label: owner}}\n\
                 tests:\n  \
                 - name: a VM without an owner is denied\n    manifest: vm/lab/unowned.yaml\n    expect: deny\n    path: metadata.labels.owner\n    message: needs the label `owner`\n  \
                 - name: a VM with an owner is allowed\n    manifest: vm/lab/owned.yaml\n    expect: allow\n  \
                 - name: the label is a setting\n    settings: {{label: team}}\n    manifest: vm/lab/owned.yaml\n    expect: deny\n    path: metadata.labels.team\n"
            ),
        ),
        ("tests/vm/lab/unowned.yaml", vm("")),
        ("tests/vm/lab/owned.yaml", vm("  labels: {owner: ops}\n")),
    ]
}

/// The files of a policy project in `lang` (not Rust), each with its path.
fn files(lang: Lang, name: &str) -> Vec<(&'static str, String)> {
    let fill = |t: &str| t.replace("{{ship}}", SHIP).replace("{{name}}", name);
    let mut files = match lang {
        Lang::Python => vec![
            ("app.py", fill(PYTHON_APP)),
            ("proxops_policy/__init__.py", PYTHON_SDK.to_string()),
            ("wit/common/common.wit", COMMON_WIT.to_string()),
            ("wit/policy/policy.wit", POLICY_WIT.to_string()),
            ("build.sh", fill(PYTHON_BUILD)),
            ("README.md", fill(PYTHON_README)),
            (".gitignore", format!("/{name}.wasm\n__pycache__/\n")),
        ],
        Lang::Typescript => vec![
            ("policy.ts", fill(TYPESCRIPT_POLICY)),
            ("sdk/index.ts", TYPESCRIPT_SDK.to_string()),
            ("wit/policy.wit", POLICY_WIT.to_string()),
            ("wit/deps/common/common.wit", COMMON_WIT.to_string()),
            ("package.json", typescript_package(name)),
            ("tsconfig.json", TYPESCRIPT_TSCONFIG.to_string()),
            ("build.sh", fill(TYPESCRIPT_BUILD)),
            ("README.md", fill(TYPESCRIPT_README)),
            (
                ".gitignore",
                format!("/node_modules\n/build\n/{name}.wasm\n"),
            ),
        ],
        Lang::Rust => unreachable!("the Rust scaffold is policy_cmd::scaffold"),
    };
    files.extend(suite(&format!("{name}.wasm")));
    files
}

/// The package.json of a scaffolded TypeScript policy: the toolchain versions of
/// policies/typescript/package.json (the ones proxops's CI builds with).
fn typescript_package(name: &str) -> String {
    let pinned: serde_json::Value =
        serde_json::from_str(TYPESCRIPT_PACKAGE).expect("policies/typescript/package.json");
    let package = serde_json::json!({
        "name": name,
        "version": "0.1.0",
        "private": true,
        "type": "module",
        "description": "a proxops site policy",
        "scripts": {"build": "./build.sh"},
        "devDependencies": pinned["devDependencies"],
    });
    format!(
        "{}\n",
        serde_json::to_string_pretty(&package).expect("JSON")
    )
}

/// Write the project for `lang` into `dir` (absent or empty). Returns `dir`.
pub fn scaffold(lang: Lang, name: &str, dir: &Path) -> anyhow::Result<PathBuf> {
    scaffold::check_target("policy", name, dir)?;
    scaffold::write_files(dir, &files(lang, name))
}

/// What to run next, for the message after `policy new`.
pub fn next_steps(lang: Lang, name: &str, dir: &Path) -> String {
    let d = dir.display();
    match lang {
        Lang::Python => format!(
            "Next:\n  pip install componentize-py==0.25.1\n  cd {d}\n  ./build.sh\n  proxops policy test --suite tests/policy-tests.yaml\n  sha256sum {name}.wasm"
        ),
        Lang::Typescript => format!(
            "Next (Node.js 20 or later):\n  cd {d}\n  npm install\n  npm run build\n  proxops policy test --suite tests/policy-tests.yaml\n  sha256sum {name}.wasm"
        ),
        Lang::Rust => unreachable!("the Rust scaffold prints its own"),
    }
}

/// How a scaffold's README says to ship the policy (every language the same).
pub(crate) const SHIP: &str = r#"Then copy the .wasm into your repository and list it in `proxops.yaml`:

```yaml
policies:
  - file: policies/{{name}}.wasm
    sha256: <the sha256sum above>
    mode: warn            # start with warn, move to enforce when the findings are right
    settings: {label: owner}
```
"#;

const PYTHON_APP: &str = r#""""{{name}}: a proxops site policy in Python. It requires every manifest to carry a
label (by default `owner`), so that every VM has someone to ask.

Build: ./build.sh (componentize-py), then test: proxops policy test --suite tests/policy-tests.yaml
"""

from proxops_policy import Doc, Findings, SitePolicy, export, settings_error


class Policy(SitePolicy):
    NAME = "{{name}}"
    VERSION = "0.1.0"
    DESCRIPTION = "every manifest carries an owner label"
    # JSON Schema (2020-12) of the settings; proxops checks settings against it at load.
    SCHEMA = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "label": {"type": "string", "minLength": 1,
                      "description": "Label every manifest must carry."},
        },
    }
    DEFAULTS = {"label": "owner"}

    def validate_settings(self, settings):
        if not settings["label"].strip():
            return [settings_error("label", "label must be a non-empty string")]
        return []

    def check_manifest(self, settings, manifest):
        label = settings["label"]
        f = Findings()
        if not (Doc.parse(manifest.document).label(label) or "").strip():
            f.deny(f"metadata.labels.{label}", f"every manifest needs the label `{label}`")
        return f.verdict()

    # Plans are not this policy's business; a check_plan(self, settings, actions) finding
    # names its object in its path: object_path("VM", "web-01", "memory").


Checker = export(Policy)
"#;

const PYTHON_BUILD: &str = r#"#!/usr/bin/env bash
# Build this policy into {{name}}.wasm (needs componentize-py: pip install componentize-py==0.25.1).
set -euo pipefail
cd "$(dirname "$0")"
componentize-py -q -d wit/common -d wit/policy -w proxops:policy/policy \
  componentize app -p . -o {{name}}.wasm
echo "built {{name}}.wasm"
"#;

const PYTHON_README: &str = r#"# {{name}}

A proxops site policy in Python (world `proxops:policy/policy`, WIT in `wit/`), built into a
WebAssembly component by [componentize-py](https://pypi.org/project/componentize-py/).
`proxops_policy/` is proxops's Python SDK (`Doc`, `Findings`, `SitePolicy`, `parse_size`, …).

    pip install componentize-py==0.25.1
    ./build.sh                                          # -> {{name}}.wasm
    proxops policy test --suite tests/policy-tests.yaml # the declarative tests
    sha256sum {{name}}.wasm

{{ship}}
The component embeds a Python interpreter (about 18 MB): proxops compiles it once into its
component cache (the first `plan` shows it) and starts it from there. See the proxops policy
author's guide (docs/policies.md) for the world, modes, limits and suites.
"#;

const TYPESCRIPT_POLICY: &str = r#"/**
 * {{name}}: a proxops site policy in TypeScript. It requires every manifest to carry a label
 * (by default `owner`), so that every VM has someone to ask.
 *
 * Build: npm run build, then test: proxops policy test --suite tests/policy-tests.yaml
 */

import { Doc, Findings, exportPolicy, settingsError } from "./sdk/index.js";

export const checker = exportPolicy({
  name: "{{name}}",
  version: "0.1.0",
  description: "every manifest carries an owner label",
  // JSON Schema (2020-12) of the settings; proxops checks settings against it at load.
  schema: {
    $schema: "https://json-schema.org/draft/2020-12/schema",
    type: "object",
    additionalProperties: false,
    properties: {
      label: { type: "string", minLength: 1, description: "Label every manifest must carry." },
    },
  },
  defaults: { label: "owner" },

  validateSettings(settings) {
    const label = settings.label;
    return typeof label === "string" && label.trim() !== ""
      ? []
      : [settingsError("label", "label must be a non-empty string")];
  },

  checkManifest(settings, manifest) {
    const label = String(settings.label);
    const f = new Findings();
    if ((Doc.parse(manifest.document).label(label) ?? "").trim() === "") {
      f.deny(`metadata.labels.${label}`, `every manifest needs the label \`${label}\``);
    }
    return f.verdict();
  },

  // Plans are not this policy's business; a checkPlan(settings, actions) finding names its
  // object in its path: objectPath("VM", "web-01", "memory").
});
"#;

const TYPESCRIPT_TSCONFIG: &str = r#"{
  "compilerOptions": {
    "target": "ES2022",
    "module": "ES2022",
    "moduleResolution": "bundler",
    "strict": true,
    "noUnusedLocals": true,
    "noImplicitReturns": true,
    "rootDir": ".",
    "outDir": "build/js",
    "types": []
  },
  "include": ["sdk/**/*.ts", "policy.ts", "build/types/**/*.d.ts"]
}
"#;

const TYPESCRIPT_BUILD: &str = r#"#!/usr/bin/env bash
# Build this policy into {{name}}.wasm (after `npm install`): jco generates the TypeScript
# declarations of the WIT, tsc type-checks the policy against them (a contract change fails
# here), and componentize-qjs (jco's QuickJS backend, synchronous) makes the component.
set -euo pipefail
cd "$(dirname "$0")"
bin=node_modules/.bin
"$bin/jco" guest-types wit -n policy -o build/types -q
"$bin/tsc" -p tsconfig.json
"$bin/componentize-qjs" --wit wit --world policy --sync \
  --js build/js/policy.js --module-root build/js -o {{name}}.wasm >/dev/null
echo "built {{name}}.wasm"
"#;

const TYPESCRIPT_README: &str = r#"# {{name}}

A proxops site policy in TypeScript (world `proxops:policy/policy`, WIT in `wit/`), built into
a WebAssembly component by jco's QuickJS backend
([componentize-qjs](https://www.npmjs.com/package/componentize-qjs)) in synchronous mode.
`sdk/` is proxops's TypeScript SDK (`Doc`, `Findings`, `exportPolicy`, `parseSize`, …), typed
by the declarations jco generates from the WIT.

    npm install                                         # Node.js 20 or later
    npm run build                                       # -> {{name}}.wasm
    proxops policy test --suite tests/policy-tests.yaml # the declarative tests
    sha256sum {{name}}.wasm

{{ship}}
See the proxops policy author's guide (docs/policies.md) for the world, modes, limits and suites.
"#;
