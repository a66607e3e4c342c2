#!/usr/bin/env bash
# CI for the Python client (the yesguard package): install its runtime and
# generators from Debian (bookworm) for the Debian interpreter, fail on
# generated code that drifted from proto/, install the package into a
# fresh virtual environment, and run the tests against a real guard built
# from this repository. Needs Go and apt-get, nothing else.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$here"
py=/usr/bin/python3

echo "== Python client: Debian's runtime and generators, drift, a fresh venv, tests against a real guard"
echo "== Debian packages"
# The runtime the tests use, and the generators of the same versions
# (buf.gen.yaml): protoc 3.21.12 for protobuf 3.21.12, grpc_python_plugin
# 1.51.1 for grpcio 1.51.1.
need=(python3 python3-venv python3-pip python3-setuptools python3-grpcio python3-protobuf python3-pytest python3-cryptography
  python3-mypy protobuf-compiler protobuf-compiler-grpc)
missing=()
for p in "${need[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
fi
"$py" -c 'import sys, grpc, google.protobuf, cryptography, pytest; print("python", sys.version.split()[0], "grpcio", grpc.__version__, "protobuf", google.protobuf.__version__, "cryptography", cryptography.__version__, "pytest", pytest.__version__)'
echo "protoc: $(protoc --version), grpc_python_plugin: $(dpkg-query -W -f='${Version}' protobuf-compiler-grpc)"

echo "== generated code: drift from proto/"
# Regenerated from scratch, so that a file whose .proto is gone shows too.
rm -f src/yesguard/v1/*_pb2.py src/yesguard/v1/*_pb2.pyi src/yesguard/v1/*_pb2_grpc.py
(cd "$root" && go tool -modfile=tools/go.mod buf generate --template clients/python/buf.gen.yaml)
if ! git -C "$root" diff --exit-code -- clients/python/src/yesguard/v1; then
  echo "generated Python differs from proto/: run, from the repository root,"
  echo "  go tool -modfile=tools/go.mod buf generate --template clients/python/buf.gen.yaml"
  echo "and commit clients/python/src/yesguard/v1"
  exit 1
fi
untracked="$(git -C "$root" ls-files --others --exclude-standard -- clients/python/src/yesguard/v1)"
if [ -n "$untracked" ]; then
  echo "buf generate made files that are not committed:"; echo "$untracked"; exit 1
fi

echo "== type-check (mypy, pyproject.toml's [tool.mypy])"
"$py" -m mypy

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "== install into a fresh virtual environment (the README's way)"
"$py" -m venv --system-site-packages "$work/venv"
"$work/venv/bin/pip" install --quiet --no-build-isolation --no-index "$here"
(cd "$work" && "$work/venv/bin/python" -c 'import yesguard, yesguard.approval; print("installed yesguard", yesguard.__version__, "from", yesguard.__file__)')
rm -rf "$here/build" "$here"/src/*.egg-info

echo "== tests against a real guard"
(cd "$root" && go build -o "$work/yesguard" ./cmd/yesguard)
export YESGUARD_BIN="$work/yesguard"
# The README's quickstart runs with the virtual environment's interpreter.
export YESGUARD_QUICKSTART_PYTHON="$work/venv/bin/python"
"$py" -m pytest -p no:cacheprovider -ra tests/
