import { systemClock } from '../shared/clock.ts';
import { PRESTOP_PROFILES, type SidecarConfig } from '../shared/contract.ts';
import { ContractError, parseSidecarEnv } from '../shared/contract-env.ts';
import { type ApiError, countsAsApiDown } from '../shared/kube/api-error.ts';
import { KubeClient } from '../shared/kube/client.ts';
import { EventRecorder } from '../shared/kube/events.ts';
import { inClusterTarget } from '../shared/kube/in-cluster.ts';
import { createLogger, type Logger } from '../shared/log.ts';
import { Registry } from '../shared/metrics.ts';
import { ApiHealth } from './api-health.ts';
import { terminationDeadline } from './drain/state.ts';
import { DrainWatcher } from './drain/watcher.ts';
import type { Feature, FeatureContext } from './feature.ts';
import { COMPANION_MODULES, FEATURE_MODULES } from './features.ts';
import { SidecarServer } from './http.ts';
import { ToolRunner } from './runner.ts';
import { logUnhandledRejections } from './unhandled.ts';

export interface RunningSidecar {
  config: SidecarConfig;
  address: { port: number; address: string };
  /** The /metrics-only listener on the node's IP (hostNetwork pods), when it listens. */
  metricsAddress?: { port: number; address: string };
  features: Feature[];
  /** Whether start-up finished (false: a stop signal came first; see StartOptions.signal). */
  started: boolean;
  /**
   * Pre-stop work of every feature, then shut down; all of it bounded by the grace period left
   * (from the own Pod's deletion, else the handover budget): at its end every API request, retry
   * and tool still running is abandoned.
   */
  shutdown(reason: string): Promise<void>;
}

export interface StartOptions {
  /**
   * A stop signal (SIGTERM) that may come before start-up has finished: start-up then returns at
   * once, unfinished, and the caller shuts down what has started.
   */
  signal?: AbortSignal;
  /**
   * The sidecar is the process (run()): an unhandled promise rejection is logged and counted
   * instead of ending it (unhandled.ts). Off where a test runs sidecars in its own process.
   */
  ownsProcess?: boolean;
}

/** Left of the grace period for the last steps of a shutdown (informers, server, exit) before the kill. */
const EXIT_MARGIN_MS = 1_000;

/** How often one refused request (method, path, code) is logged again while it keeps failing. */
const REFUSAL_LOG_EVERY_MS = 5 * 60_000;

/**
 * Feeds every API call's outcome to the sidecar's API health (api-health.ts; the L2 fail-safe acts on it):
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

export async function startSidecar(
  env: NodeJS.ProcessEnv,
  log?: Logger,
  opts: StartOptions = {},
): Promise<RunningSidecar> {
  const config = parseSidecarEnv(env);
  const logger = log ?? createLogger('drainguard-sidecar', config.logLevel);
  const clock = systemClock;
  // Aborted when the grace period is spent or the shutdown is done: every API request, retry and
  // tool still running then is abandoned, so nothing keeps the process past its grace period.
  const lifetime = new AbortController();
  const metrics = new Registry();
  const apiErrors = metrics.counter(
    'drainguard_api_errors_total',
    'Failed API calls by HTTP code (0 = unreachable).',
  );
  const unguard = opts.ownsProcess
    ? logUnhandledRejections(
        logger,
        metrics.counter(
          'drainguard_unhandled_rejections_total',
          'Promise rejections nobody handled (bugs), logged instead of ending the process.',
        ),
      )
    : undefined;
  // Re-opening the watches is the client's; it is made below (called only once requests run).
  const api = new ApiHealth({ clock, log: logger, reopenWatches: (why) => client.reopenWatches(why) });
  const apiHealth = apiHealthReporter({
    log: logger,
    apiResult: (ok) => api.result(ok),
    now: () => clock.now(),
  });
  // In a pod: the lean service-account client. Elsewhere (tests, development) a kubeconfig, through
  // client-node, loaded only then: it costs ~21 MiB RSS (make bench-sidecar: 64.3 vs 85.4 MiB with KUBECONFIG).
  const access =
    (env.KUBECONFIG ? undefined : inClusterTarget(env)) ??
    (await import('../shared/kube/kubeconfig.ts')).kubeconfigAuth({ env });
  const client = new KubeClient(access, {
    userAgent: `drainguard-sidecar/${config.nodeName}`,
    signal: lifetime.signal,
    onResult: (ok, err) => {
      if (!ok) apiErrors.inc({ code: String(err?.code ?? 0) });
      apiHealth(ok, err);
    },
  });
  const drain = new DrainWatcher({
    api,
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
  const showApiView = () => apiView.set({}, drain.current.synced && api.up ? 1 : 0);
  showApiView();
  drain.subscribe(showApiView);
  api.subscribe(showApiView);
  const ctx: FeatureContext = {
    config,
    log: logger,
    client,
    events: new EventRecorder(client, 'drainguard-sidecar', config.nodeName, logger),
    runner: new ToolRunner({ log: logger, observeOnly: config.observeOnly, signal: lifetime.signal }),
    drain,
    api,
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
    for (const c of (await COMPANION_MODULES[feature]?.(config)) ?? [])
      features.push(c.createFeature({ ...ctx, log: logger.child({ feature: c.name }) }));
  }
  drain.handOverRestarts(features.some((f) => f.restarting !== undefined));
  /** A hook's work in every feature that has it, at once: a summary per feature, failures included. */
  const eachFeature = async (
    work: (c: Feature) => Promise<Record<string, unknown>> | undefined,
  ): Promise<Record<string, unknown>> => {
    const entries = await Promise.all(
      features.map(async (c) => {
        try {
          const r = work(c);
          return r === undefined ? undefined : ([c.name, await r] as const);
        } catch (e) {
          logger.error({ feature: c.name, err: (e as Error).message }, 'prestop failed');
          return [c.name, { error: (e as Error).message }] as const;
        }
      }),
    );
    return Object.fromEntries(entries.filter((e) => e !== undefined));
  };
  let running = false;
  let prestopRun: Promise<Record<string, unknown>> | undefined;
  /** `presumed`: a hook that could not read the own Pod (drain/watcher.ts goingAway). */
  const prestop = (presumed = false) => {
    drain.markTerminating({ presumed });
    // One pre-stop per process: /prestop and SIGTERM may both arrive; both wait for the same work.
    prestopRun ??= eachFeature((c) => c.prestop());
    return prestopRun;
  };
  // Forget a finished pre-stop once the pod is not terminating any more (the guarded container
  // was restarted after its hook): a later deletion must run it again.
  drain.subscribe((next, prev) => {
    if (prev.terminating && !next.terminating) prestopRun = undefined;
  });
  /** The kubelet's preStop hook: withdraw only if the pod is really going away. */
  const hook = async (): Promise<Record<string, unknown>> => {
    const { going, why, presumed } = await drain.goingAway();
    if (!going) {
      if (!drain.markGuardedStopping()) {
        logger.warn({ why }, 'preStop hook without a deletion or drain: nothing withdrawn');
        return { outcome: 'not-going-away', why };
      }
      // A probe failure's restart: hand over until the new container serves (drain/guarded.ts).
      logger.info({ why }, 'preStop hook of a container restart: handing over until it serves again');
      const done = await eachFeature((c) => c.restarting?.());
      return { outcome: 'restarting', why, ...done };
    }
    logger.info(
      { why, ...(presumed ? { presumed } : {}) },
      presumed
        ? 'preStop hook: pod presumed going away (own Pod unreadable); a restart of the guarded container seen here would say otherwise'
        : 'preStop hook: pod going away',
    );
    return prestop(presumed === true);
  };
  const server = new SidecarServer({
    port: config.port,
    host: config.bindAddress,
    log: logger,
    metrics,
    ready: () => running,
    ...(PRESTOP_PROFILES.has(config.profile) ? { prestop: hook } : {}),
  });
  // hostNetwork: the server above is on 127.0.0.1; Prometheus scrapes /metrics, and nothing else,
  // on the node's IP.
  const metricsServer =
    config.metricsPort !== 0
      ? new SidecarServer({
          port: config.metricsPort,
          host: config.metricsAddress,
          log: logger,
          metrics,
          ready: () => running,
          serves: 'metrics',
        })
      : undefined;
  let address = { port: config.port, address: config.bindAddress };
  let metricsAddress: RunningSidecar['metricsAddress'];
  const startup = (async () => {
    address = await server.listen();
    // Not scraped is bad, an unguarded speaker worse: a port held by another process is an error
    // in the log (and a target down in Prometheus), never a sidecar that does not start.
    metricsAddress = await metricsServer?.listen().catch((e: unknown) => {
      logger.error(
        {
          err: (e as Error).message,
          address: config.metricsAddress,
          port: config.metricsPort,
          check:
            'what else listens on that port on the node; annotation drainguard.io/metrics-port picks another',
        },
        '/metrics cannot listen on the node: not served there',
      );
      return undefined;
    });
    drain.start();
    for (const c of features) {
      if (opts.signal?.aborted) return false;
      await c.start();
    }
    return true;
  })();
  // A stop signal ends the wait for start-up (a feature's start may wait on a tool or the API).
  const stopSignalled = new Promise<false>((resolve) => {
    if (opts.signal?.aborted) resolve(false);
    opts.signal?.addEventListener('abort', () => resolve(false), { once: true });
  });
  const started = await Promise.race([startup, stopSignalled]);
  if (started) {
    running = true;
    logger.info(
      {
        profile: config.profile,
        features: config.features,
        port: address.port,
        ...(metricsAddress ? { metrics: `${metricsAddress.address}:${metricsAddress.port}` } : {}),
        observeOnly: config.observeOnly,
      },
      'sidecar running',
    );
  } else {
    // What has not started is stopped all the same; the unfinished start is abandoned with the lifetime.
    void startup.catch(() => {});
    logger.warn(
      { profile: config.profile, features: config.features },
      `${String(opts.signal?.reason ?? 'stop signal')} during start-up: shutting down what has started`,
    );
  }
  let stopping: Promise<void> | undefined;
  const shutdown = (reason: string) => {
    stopping ??= (async () => {
      const now = clock.now();
      const deadline = terminationDeadline(drain.pod, now, config.handoverBudgetSeconds) - EXIT_MARGIN_MS;
      logger.info({ reason, graceLeftMs: deadline + EXIT_MARGIN_MS - now }, 'shutting down');
      let timer: NodeJS.Timeout | undefined;
      const graceSpent = new Promise<'grace-spent'>((resolve) => {
        timer = setTimeout(() => resolve('grace-spent'), Math.max(0, deadline - now));
      });
      const summary = await Promise.race([prestop(), graceSpent]);
      if (summary === 'grace-spent') {
        logger.warn(
          { graceMs: deadline + EXIT_MARGIN_MS - now },
          'grace period spent: pre-stop work, API requests, retries and tools still running are abandoned',
        );
        lifetime.abort('grace period spent');
      } else logger.info({ summary }, 'pre-stop work done');
      await Promise.race([Promise.all(features.map((c) => c.stop())), graceSpent]);
      clearTimeout(timer);
      // Whatever is still running now (an unfinished start, a retry) has nobody to report to.
      lifetime.abort('shut down');
      await drain.stop();
      await Promise.all([server.close(), metricsServer?.close()]);
      client.close();
      unguard?.();
    })();
    return stopping;
  };
  return {
    config,
    address,
    ...(metricsAddress ? { metricsAddress } : {}),
    features,
    started: started === true,
    shutdown,
  };
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
  // The handlers come first: a pod deleted while start-up is still under way (a tool that hangs,
  // an API server that does not answer) is shut down as cleanly as one deleted later.
  const stop = new AbortController();
  const onSignal = (sig: NodeJS.Signals) => {
    if (!stop.signal.aborted) stop.abort(sig);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  let sidecar: RunningSidecar;
  try {
    sidecar = await startSidecar(process.env, undefined, { signal: stop.signal, ownsProcess: true });
  } catch (e) {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
    if (e instanceof ContractError) {
      process.stderr.write(`drainguard sidecar: ${e.message}\n`);
      return 2;
    }
    throw e;
  }
  if (!stop.signal.aborted)
    await new Promise((resolve) => stop.signal.addEventListener('abort', resolve, { once: true }));
  const code = await sidecar.shutdown(String(stop.signal.reason)).then(
    () => 0,
    () => 1,
  );
  // Everything is stopped and every request abandoned; a timer or socket nobody owns any more
  // must not keep the container alive until the kill.
  setTimeout(() => process.exit(code), EXIT_MARGIN_MS).unref();
  return code;
}
