import t from 'tap';
import { kubeletVersions } from '../../../webhook/node-versions.ts';

t.test('kubeletVersions: by node name; a node without nodeInfo counts as an unknown version', async (t) => {
  t.strictSame(
    kubeletVersions([
      { metadata: { name: 'a' }, status: { nodeInfo: { kubeletVersion: 'v1.30.4' } } },
      { metadata: { name: 'b' } },
      { metadata: {} },
    ] as never[]),
    new Map([
      ['a', 'v1.30.4'],
      ['b', ''],
    ]),
  );
});
