#!/bin/sh
# A kubeconfig `exec` credential plugin for the tests: prints an ExecCredential of apiVersion $1
# carrying $PLUGIN_TOKEN (expiring at $PLUGIN_EXPIRY when set) and logs each call, with the
# KUBERNETES_EXEC_INFO it was given, as one line of $PLUGIN_CALLS. $PLUGIN_FAIL: fail with it.
set -eu
printf '%s\n' "${KUBERNETES_EXEC_INFO:-}" >>"$PLUGIN_CALLS"
if [ -n "${PLUGIN_FAIL:-}" ]; then
  printf '%s\n' "$PLUGIN_FAIL" >&2
  exit 3
fi
expiry=''
if [ -n "${PLUGIN_EXPIRY:-}" ]; then expiry=",\"expirationTimestamp\":\"$PLUGIN_EXPIRY\""; fi
printf '{"apiVersion":"%s","kind":"ExecCredential","status":{"token":"%s"%s}}\n' "$1" "$PLUGIN_TOKEN" "$expiry"
