#!/usr/bin/env bash
# Makes the compose stack's NATS passwords, once, in docker/secrets/ (or
# the directory given): one random password each for the pipeline and
# the guard, as plain files (pipeline.pw for the pipeline and the CLI's
# --nats-password-file, guard.pw for yesguard's) and as the nats-server
# variables nats.conf includes (nats-passwords.conf). The directory is
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
pipeline=$(pw)
guard=$(pw)
printf '%s\n' "$pipeline" > "$dir/pipeline.pw"
printf '%s\n' "$guard" > "$dir/guard.pw"
printf 'YESGUARD_PIPELINE_PASSWORD: "%s"\nYESGUARD_GUARD_PASSWORD: "%s"\n' "$pipeline" "$guard" > "$dir/nats-passwords.conf"
chmod 644 "$dir/pipeline.pw" "$dir/guard.pw" "$dir/nats-passwords.conf"
echo "wrote $dir/pipeline.pw, $dir/guard.pw and $dir/nats-passwords.conf"
