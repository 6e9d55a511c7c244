#!/usr/bin/env bash
# Kept for existing callers: the same as `scripts/with-node.sh 24 [command...]`.
set -euo pipefail
exec bash "$(dirname "$0")/with-node.sh" 24 "$@"
