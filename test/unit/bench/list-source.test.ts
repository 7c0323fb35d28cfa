import t from 'tap';
import { metricSum } from '../../bench/api/list-source.ts';

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
