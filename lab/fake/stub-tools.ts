// Host tools of an empty host for sidecars that run observe-only off a real node (make bench-api,
// the bed's handover-reads e2e): the read-only calls answer, nothing is changed.
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Host tools of an empty host: the sidecar's read-only calls answer, nothing is changed. */
export function stubTools(dir: string): string {
  const bin = join(dir, 'stub-bin');
  mkdirSync(bin, { recursive: true });
  const script = `#!/bin/sh
# make bench-api: host tools of an empty host (the API cost is measured, not the host's).
case "$(basename "$0") $*" in
  "ebtables -V") echo "ebtables 1.8.7 (nf_tables)" ;;
  "ebtables -t nat -L") printf 'Bridge table: nat\\n\\nBridge chain: PREROUTING, entries: 0, policy: ACCEPT\\n\\nBridge chain: OUTPUT, entries: 0, policy: ACCEPT\\n\\nBridge chain: POSTROUTING, entries: 0, policy: ACCEPT\\n' ;;
  nft*-j*) echo '{"nftables": [{"metainfo": {"version": "1.0.6", "json_schema_version": 1}}]}' ;;
  *-j*) echo '[]' ;;
esac
exit 0
`;
  for (const tool of ['ip', 'nft', 'ebtables', 'ebtables-restore', 'bridge']) {
    writeFileSync(join(bin, tool), script);
    chmodSync(join(bin, tool), 0o755);
  }
  return bin;
}
