#!/usr/bin/env bash
# CI for the TypeScript client (@yesguard/client) and its LiveKit example:
# install from the lockfiles, fail on generated code that drifted from
# proto/, build, type-check, and run the tests against a real guard built
# from this repository. Needs Go and Node 20 (with its npm), nothing else.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$here"

echo "== node $(node --version), npm $(npm --version)"

echo "== npm ci (from package-lock.json)"
npm ci --no-audit --no-fund

echo "== generated code: drift from proto/"
# Regenerated from scratch, so that a file whose .proto is gone shows too.
rm -rf src/gen
(cd "$root" && go tool -modfile=tools/go.mod buf generate --template clients/typescript/buf.gen.yaml)
if ! git -C "$root" diff --exit-code -- clients/typescript/src/gen; then
  echo "generated TypeScript differs from proto/: run, from the repository root,"
  echo "  go tool -modfile=tools/go.mod buf generate --template clients/typescript/buf.gen.yaml"
  echo "and commit clients/typescript/src/gen"
  exit 1
fi
untracked="$(git -C "$root" ls-files --others --exclude-standard -- clients/typescript/src/gen)"
if [ -n "$untracked" ]; then
  echo "buf generate made files that are not committed:"; echo "$untracked"; exit 1
fi

echo "== build (dist/)"
rm -rf dist build
npm run build

echo "== type-check (package and tests)"
npx tsc --noEmit -p tsconfig.json

echo "== tests against a real guard"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$root" && go build -o "$work/yesguard" ./cmd/yesguard)
export YESGUARD_BIN="$work/yesguard"
# npm test as a user types it: it builds the tests first (pretest), then
# runs one test file at a time (each starts its own guard, and the
# machine is shared).
npm test

echo "== example: LiveKit Agents (Node), against the real @livekit/agents"
cd examples/livekit
npm ci --no-audit --no-fund
rm -rf build
npx tsc --noEmit -p tsconfig.json
npm test
