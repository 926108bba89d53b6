#!/usr/bin/env bash
# The peers of `npm run bench:peers`, each pinned (bench/peers/requirements-PEER.txt) into a virtual
# environment of its own under .venv-peers/ (ignored by git; Ray Serve, KServe and BentoML pin
# different versions of the same libraries), and perf_analyzer with the Python clients
# (scripts/python-clients.sh). A folder that already holds its pins is kept. Nothing is installed
# outside the repository. The first run downloads about 1 GB (Ray alone about 700 MB).
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/python-clients.sh
for peer in ray kserve bentoml; do
  venv=".venv-peers/$peer"
  pins="$(cat "bench/peers/requirements-$peer.txt"; python3 --version)"
  if [ -f "$venv/.pins" ] && [ "$(cat "$venv/.pins")" = "$pins" ]; then continue; fi
  start=$SECONDS
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-input --no-deps --only-binary=:all: -r "bench/peers/requirements-$peer.txt"
  "$venv/bin/pip" check --disable-pip-version-check
  printf '%s' "$pins" >"$venv/.pins"
  echo "bench:peers: $peer installed into $venv in $((SECONDS - start)) s"
done
