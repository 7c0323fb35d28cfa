import { systemClock } from '../shared/clock.ts';
import { ContractError, PRESTOP_PROFILES, parseSidecarEnv, type SidecarConfig } from '../shared/contract.ts';
import { type ApiError, countsAsApiDown, KubeClient } from '../shared/kube/client.ts';
import { EventRecorder } from '../shared/kube/events.ts';
import { inClusterTarget } from '../shared/kube/in-cluster.ts';
import { createLogger, type Logger } from '../shared/log.ts';
import { Registry } from '../shared/metrics.ts';
import { DrainWatcher } from './drain/watcher.ts';
import type { Feature, FeatureContext } from './feature.ts';
import { FEATURE_MODULES } from './features.ts';
import { SidecarServer } from './http.ts';
import { ToolRunner } from './runner.ts';

export interface RunningSidecar {
  config: SidecarConfig;
  address: { port: number; address: string };
  features: Feature[];
  /** Pre-stop work of every feature (bounded), then shut down. */
  shutdown(reason: string): Promise<void>;
}

/** How often one refused request (method, path, code) is logged again while it keeps failing. */
const REFUSAL_LOG_EVERY_MS = 5 * 60_000;

/**
 * Feeds every API call's outcome to the drain state's "API down" (the L2 fail-safe acts on it):
 * down only when the API server is unreachable, times out, sheds load or fails (countsAsApiDown).
 * A request the server refuses — 401/403 (RBAC, credentials), 404 on a watch (a CRD not
 * installed) — is a configuration error: logged (once per request every few minutes: the
 * informer retries it), never an outage.
 */
export function apiHealthReporter(opts: {
  log: Logger;
  apiResult: (ok: boolean) => void;
  now: () => number;
}): (ok: boolean, err?: ApiError) => void {
  const logged = new Map<string, number>();
  return (ok, err) => {
    const down = !ok && countsAsApiDown(err);
    opts.apiResult(!down);
    if (ok || down || !err) return;
    const refusal = err.code === 401 || err.code === 403 || (err.code === 404 && err.method === 'WATCH');
    if (!refusal) return;
    const key = `${err.method} ${err.path} ${err.code}`;
    const last = logged.get(key);
    if (last !== undefined && opts.now() - last < REFUSAL_LOG_EVERY_MS) return;
    logged.set(key, opts.now());
    opts.log.error(
      {
        method: err.method,
        path: err.path,
        code: err.code,
        reason: err.reason,
        err: err.detail,
        check: err.code === 404 ? 'that the resource (its CRD) exists' : "the sidecar's RBAC and credentials",
      },
      'API refused a request: a configuration error, not an outage',
    );
  };
}

export async function startSidecar(env: NodeJS.ProcessEnv, log?: Logger): Promise<RunningSidecar> {
  const config = parseSidecarEnv(env);
  const logger = log ?? createLogger('drainguard-sidecar', config.logLevel);
  const clock = systemClock;
  const metrics = new Registry();
  const apiErrors = metrics.counter(
    'drainguard_api_errors_total',
    'Failed API calls by HTTP code (0 = unreachable).',
  );
  let drain: DrainWatcher | undefined;
  const apiHealth = apiHealthReporter({
    log: logger,
    apiResult: (ok) => drain?.apiResult(ok),
    now: () => clock.now(),
  });
  // In a pod: the lean service-account client. Elsewhere (tests, development) a kubeconfig, through
  // client-node, loaded only then: it costs ~21 MiB RSS (make bench-sidecar: 64.3 vs 85.4 MiB with KUBECONFIG).
  const access =
    (env.KUBECONFIG ? undefined : inClusterTarget(env)) ??
    (await import('../shared/kube/kubeconfig.ts')).kubeconfigAuth({ env });
  const client = new KubeClient(access, {
    userAgent: `drainguard-sidecar/${config.nodeName}`,
    onResult: (ok, err) => {
      if (!ok) apiErrors.inc({ code: String(err?.code ?? 0) });
      apiHealth(ok, err);
    },
  });
  drain = new DrainWatcher({
    client,
    nodeName: config.nodeName,
    podName: config.podName,
    podNamespace: config.podNamespace,
    drainTaints: config.drainTaints,
    drainSignal: config.drainSignal,
    log: logger,
    clock,
    ...(config.guardedContainer ? { guardedContainer: config.guardedContainer } : {}),
    ...(config.podUid ? { podUid: config.podUid } : {}),
  });
  // Shows from outside that the sidecar reached the API server with its own credentials.
  const apiView = metrics.gauge(
    'drainguard_api_view_synced',
    '1 while the Node and own Pod are read from the API server and it answers; 0 before and during outages.',
  );
  const showApiView = () =>
    apiView.set({}, drain?.current.synced && drain.current.apiDownSince === undefined ? 1 : 0);
  showApiView();
  drain.subscribe(showApiView);
  const ctx: FeatureContext = {
    config,
    log: logger,
    client,
    events: new EventRecorder(client, 'drainguard-sidecar', config.nodeName, logger),
    runner: new ToolRunner({ log: logger, observeOnly: config.observeOnly }),
    drain,
    metrics,
    clock,
  };
  const features: Feature[] = [];
  for (const feature of config.features) {
    const load = FEATURE_MODULES[feature];
    if (!load) {
      logger.error({ feature }, 'feature is not available in this build; running without it');
      continue;
    }
    const factory = await load(config);
    features.push(factory({ ...ctx, log: logger.child({ feature: feature }) }));
  }
  let running = false;
  let prestopRun: Promise<Record<string, unknown>> | undefined;
  const prestop = () => {
    drain.markTerminating();
    // One pre-stop per process: /prestop and SIGTERM may both arrive; both wait for the same work.
    prestopRun ??= Promise.all(
      features.map(async (c) => {
        try {
          return [c.name, await c.prestop()] as const;
        } catch (e) {
          logger.error({ feature: c.name, err: (e as Error).message }, 'prestop failed');
          return [c.name, { error: (e as Error).message }] as const;
        }
      }),
    ).then((entries) => Object.fromEntries(entries));
    return prestopRun;
  };
  // Forget a finished pre-stop once the pod is not terminating any more (the guarded container
  // was restarted after its hook): a later deletion must run it again.
  drain.subscribe((next, prev) => {
    if (prev.terminating && !next.terminating) prestopRun = undefined;
  });
  /** The kubelet's preStop hook: withdraw only if the pod is really going away. */
  const hook = async (): Promise<Record<string, unknown>> => {
    const { going, why } = await drain.goingAway();
    if (!going) {
      logger.warn({ why }, 'preStop hook without a deletion or drain: nothing withdrawn');
      return { outcome: 'not-going-away', why };
    }
    logger.info({ why }, 'preStop hook: pod going away');
    return prestop();
  };
  const server = new SidecarServer({
    port: config.port,
    host: config.bindAddress,
    log: logger,
    metrics,
    ready: () => running,
    ...(PRESTOP_PROFILES.has(config.profile) ? { prestop: hook } : {}),
  });
  const address = await server.listen();
  drain.start();
  for (const c of features) await c.start();
  running = true;
  logger.info(
    {
      profile: config.profile,
      features: config.features,
      port: address.port,
      observeOnly: config.observeOnly,
    },
    'sidecar running',
  );
  let stopping: Promise<void> | undefined;
  const shutdown = (reason: string) => {
    stopping ??= (async () => {
      logger.info({ reason }, 'shutting down');
      const summary = await prestop();
      logger.info({ summary }, 'pre-stop work done');
      await Promise.all(features.map((c) => c.stop()));
      await drain.stop();
      await server.close();
      client.close();
    })();
    return stopping;
  };
  return { config, address, features, shutdown };
}

export async function run(argv: string[]): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    const { CONTRACT } = await import('../shared/contract.ts');
    process.stdout.write(
      'Usage: drainguard sidecar\n\nConfigured by environment variables (the webhook sets them):\n' +
        CONTRACT.map(
          (v) =>
            `  ${v.env}${v.default ? ` (default ${v.default})` : v.required ? ' (required)' : ''}\n      ${v.description}`,
        ).join('\n') +
        '\n',
    );
    return 0;
  }
  let sidecar: RunningSidecar;
  try {
    sidecar = await startSidecar(process.env);
  } catch (e) {
    if (e instanceof ContractError) {
      process.stderr.write(`drainguard sidecar: ${e.message}\n`);
      return 2;
    }
    throw e;
  }
  return new Promise<number>((resolve) => {
    const onSignal = (sig: string) => {
      sidecar.shutdown(sig).then(
        () => resolve(0),
        () => resolve(1),
      );
    };
    process.once('SIGTERM', () => onSignal('SIGTERM'));
    process.once('SIGINT', () => onSignal('SIGINT'));
  });
}
