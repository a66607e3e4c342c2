#!/usr/bin/env bash
# Makes the compose stack's secrets, once, in docker/secrets/ (or the
# directory given): one random NATS password each for the pipeline and
# the guard, as plain files (pipeline.pw for the pipeline and the CLI's
# --nats-password-file, guard.pw for yesguard's) and as the nats-server
# variables nats.conf includes (nats-passwords.conf); and two gRPC bearer
# tokens, pipeline.tok (Check, Complete, Redeem) and auditor.tok
# (ListDecisions and the /calls pages), with tokens.yaml, the hashes-only
# file yesguard's --grpc-tokens reads (as `yesguard token` writes it); and
# approval-key.pem, the Ed25519 key yesguard signs approvals with
# (--approval-key-file: what `openssl genpkey -algorithm ed25519` writes,
# made here with bash alone), so a re-created container signs with the
# same key. The directory is
# 0700 (nobody else on the host reads it); the files are 0644 so that the
# containers' users (yesguard runs as 65532) can read their bind mounts.
# It never overwrites: delete the directory to rotate, then restart the
# stack.
set -euo pipefail
dir=${1:-"$(dirname "$0")/secrets"}
if [[ -e "$dir/nats-passwords.conf" ]]; then
  echo "$dir already holds the passwords; delete it to make new ones" >&2
  exit 0
fi
umask 077
mkdir -p "$dir"
chmod 700 "$dir"
pw() { od -An -tx1 -N24 /dev/urandom | tr -d ' \n'; }
tok() { od -An -tx1 -N32 /dev/urandom | tr -d ' \n'; }
sha() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }
pipeline=$(pw)
guard=$(pw)
printf '%s\n' "$pipeline" > "$dir/pipeline.pw"
printf '%s\n' "$guard" > "$dir/guard.pw"
printf 'YESGUARD_PIPELINE_PASSWORD: "%s"\nYESGUARD_GUARD_PASSWORD: "%s"\n' "$pipeline" "$guard" > "$dir/nats-passwords.conf"
pipetok=$(tok)
audittok=$(tok)
printf '%s\n' "$pipetok" > "$dir/pipeline.tok"
printf '%s\n' "$audittok" > "$dir/auditor.tok"
{
  echo "# yesguard tokens: hashes only (docker/secrets.sh); the tokens are in"
  echo "# pipeline.tok and auditor.tok beside this file."
  echo "tokens:"
  echo "  - name: compose-pipeline"
  echo "    sha256: $(sha "$pipetok")"
  echo "    roles: [pipeline]"
  echo "  - name: compose-auditor"
  echo "    sha256: $(sha "$audittok")"
  echo "    roles: [auditor]"
} > "$dir/tokens.yaml"
# PKCS#8 of an Ed25519 key: a fixed 16-byte prefix, then the 32-byte seed.
der="302e020100300506032b657004220420$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')"
{
  echo "-----BEGIN PRIVATE KEY-----"
  printf "$(printf '%s' "$der" | sed 's/../\\x&/g')" | base64
  echo "-----END PRIVATE KEY-----"
} > "$dir/approval-key.pem"
chmod 644 "$dir/pipeline.pw" "$dir/guard.pw" "$dir/nats-passwords.conf" "$dir/tokens.yaml" "$dir/approval-key.pem"
echo "wrote $dir/pipeline.pw, $dir/guard.pw, $dir/nats-passwords.conf, $dir/pipeline.tok, $dir/auditor.tok, $dir/tokens.yaml and $dir/approval-key.pem"
