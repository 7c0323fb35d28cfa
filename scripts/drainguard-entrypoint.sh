#!/bin/sh
# Container entrypoint (Dockerfile): the bundled CLI under /app, or under $DRAINGUARD_APP (tests).
exec node "${DRAINGUARD_APP:-/app}/drainguard.mjs" "$@"
