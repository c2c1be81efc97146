#!/usr/bin/env bash
# Build a Python site policy into a WebAssembly component with componentize-py:
#   policies/python/build.sh POLICY_DIR OUT.wasm
# POLICY_DIR holds app.py (its `Checker` is the export); the proxops_policy SDK next to this
# script and the proxops WIT (wit/common, wit/policy) are found from here.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
wit="$here/../../wit"
dir="$(cd "$1" && pwd)"
out="$2"
exec componentize-py -q -d "$wit/common/0.1.0" -d "$wit/policy/0.1.0" -w proxops:policy/policy \
  componentize app -p "$dir" -p "$here" -o "$out"
