#!/bin/sh
# A kubeconfig `exec` credential plugin for the tests: prints an ExecCredential of apiVersion $1
# carrying $PLUGIN_TOKEN (expiring at $PLUGIN_EXPIRY when set) and logs each call, with the
# KUBERNETES_EXEC_INFO it was given, as one line of $PLUGIN_CALLS. $PLUGIN_FAIL: fail with it.
# $PLUGIN_FIRST_TOKEN: the token of the first call only (a credential revoked before it expired).
set -eu
token=$PLUGIN_TOKEN
if [ -n "${PLUGIN_FIRST_TOKEN:-}" ] && [ ! -s "$PLUGIN_CALLS" ]; then token=$PLUGIN_FIRST_TOKEN; fi
printf '%s\n' "${KUBERNETES_EXEC_INFO:-}" >>"$PLUGIN_CALLS"
if [ -n "${PLUGIN_FAIL:-}" ]; then
  printf '%s\n' "$PLUGIN_FAIL" >&2
  exit 3
fi
expiry=''
if [ -n "${PLUGIN_EXPIRY:-}" ]; then expiry=",\"expirationTimestamp\":\"$PLUGIN_EXPIRY\""; fi
printf '{"apiVersion":"%s","kind":"ExecCredential","status":{"token":"%s"%s}}\n' "$1" "$token" "$expiry"
