#!/usr/bin/env bash
# Triton's and KServe's Python clients and Triton's perf_analyzer, for
# test/integration/python-clients.test.ts: the pinned sets of test/python/requirements*.txt, with
# pip, into .venv-clients/ (ignored by git). Nothing is installed outside that folder. A folder that
# already holds exactly these pins is kept as it is, so a second run takes a second.
# Needs python3 with venv (Debian: python3-venv) and, for perf_analyzer, libb64-0d; .ci/run
# installs both.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-clients
stamp="$venv/.pins"
pins="$(cat test/python/requirements.txt test/python/requirements-perf-analyzer.txt; python3 --version)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$pins" ]; then
  echo "python clients: $venv already holds the pinned set"
  exit 0
fi
start=$SECONDS
rm -rf "$venv"
python3 -m venv "$venv"
pip=("$venv/bin/pip" install --quiet --disable-pip-version-check --no-input --no-deps --only-binary=:all:)
"${pip[@]}" -r test/python/requirements.txt
"$venv/bin/pip" check --disable-pip-version-check
"${pip[@]}" --target "$venv/perf-analyzer" -r test/python/requirements-perf-analyzer.txt
# The stamp is written last: an install cut short is redone in full next time.
printf '%s' "$pins" >"$stamp"
echo "python clients: installed into $venv in $((SECONDS - start)) s"
