#!/usr/bin/env bash
# Build a TypeScript site policy into a WebAssembly component:
#   policies/typescript/build.sh POLICY_DIR/policy.ts OUT.wasm     (after `npm ci` here)
# 1. the proxops WIT is laid out for the tools (build/wit: policy.wit, deps/common);
# 2. jco generates the TypeScript declarations of the WIT (build/types);
# 3. tsc type-checks the SDK and the policies against them and emits JavaScript (build/js):
#    a contract change that breaks a policy fails here;
# 4. componentize-qjs (jco's QuickJS backend), synchronous, makes the component.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
policy="${1%.ts}"
out="$2"
mkdir -p build/wit/deps/common
cp ../../wit/policy/0.1.0/policy.wit build/wit/policy.wit
cp ../../wit/common/0.1.0/common.wit build/wit/deps/common/common.wit
bin=node_modules/.bin
"$bin/jco" guest-types build/wit -n policy -o build/types -q
"$bin/tsc" -p tsconfig.json
"$bin/componentize-qjs" --wit build/wit --world policy --sync \
  --js "build/js/$policy.js" --module-root build/js -o "$out" >/dev/null
