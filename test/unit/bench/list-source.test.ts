import t from 'tap';
import { metricSum, nodeListCounts } from '../../bench/api/list-source.ts';

const TEXT = `# HELP apiserver_cache_list_total [ALPHA] Number of LIST requests served from watch cache
apiserver_cache_list_total{index="",resource_prefix="/minions"} 7
apiserver_cache_list_total{index="",resource_prefix="/pods"} 40
apiserver_cache_list_total{index="spec.nodeName",resource_prefix="/pods"} 2
etcd_requests_total{group="",operation="listWithCount",resource="nodes",type="/registry/minions"} 3
etcd_requests_total{group="",operation="get",resource="nodes",type="/registry/minions"} 11
up 1
`;

t.test('metricSum adds the samples whose labels match, and only those', async (t) => {
  t.equal(metricSum(TEXT, 'apiserver_cache_list_total', { resource_prefix: '/minions' }), 7);
  t.equal(metricSum(TEXT, 'apiserver_cache_list_total', { resource_prefix: '/pods' }), 42);
  t.equal(
    metricSum(TEXT, 'etcd_requests_total', { operation: 'listWithCount', type: '/registry/minions' }),
    3,
  );
  t.equal(metricSum(TEXT, 'etcd_requests_total', { operation: 'list' }), 0, 'no such operation');
  t.equal(metricSum(TEXT, 'up', {}), 1, 'a sample without labels');
  t.equal(metricSum(TEXT, 'apiserver_cache_list', {}), 0, 'a name prefix is not the name');
});

t.test("the Node lists by source, in 1.20's labels and in a current server's", async (t) => {
  t.strictSame(nodeListCounts(TEXT), { cache: 7, etcd: 3 }, '1.20: one scheme, counted once');
  const current = `apiserver_cache_list_total{group="",index="",resource="nodes"} 5
apiserver_cache_list_total{group="",index="",resource="pods"} 9
apiserver_cache_list_total{group="apps",index="",resource="nodes"} 100
etcd_requests_total{group="",operation="list",resource="nodes"} 2
etcd_requests_total{group="",operation="listWithCount",resource="nodes"} 1
etcd_requests_total{group="",operation="listOnlyKeys",resource="nodes"} 8
etcd_requests_total{group="",operation="get",resource="nodes"} 4
apiserver_watch_cache_consistent_read_total{fallback="false",group="",resource="nodes",success="true"} 3
apiserver_watch_cache_consistent_read_total{fallback="true",group="",resource="nodes",success="true"} 6
`;
  t.strictSame(
    nodeListCounts(current),
    { cache: 8, etcd: 3 },
    '1.37: group and resource, lists only; a consistent read the cache served counts, a fallback not',
  );
});
