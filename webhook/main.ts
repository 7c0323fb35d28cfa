// `drainguard webhook`: flags/env → TLS source → fastify HTTPS server (+ node-version cache).
import { parseArgs } from 'node:util';
import { systemClock } from '../shared/clock.ts';
import { type Parsed, parseBoolean, parseChoice, parseWholeNumber } from '../shared/contract-values.ts';
import { KubeClient } from '../shared/kube/client.ts';
import type { Pod } from '../shared/kube/types.ts';
import { createLogger, type Logger } from '../shared/log.ts';
import { Registry } from '../shared/metrics.ts';
import { VERSION } from '../shared/names.ts';
import { NodeVersions } from './node-versions.ts';
import { SIDECAR_MODES, type SidecarMode } from './plan/step.ts';
import { createWebhookApp } from './server.ts';
import { observeServing, type ServingPair, type TlsSource } from './tls.ts';
import { CertDirReloader } from './tls-cert-dir.ts';
import { SelfManagedTls, serviceDnsNames } from './tls-self-managed.ts';

export interface WebhookConfig {
  port: number;
  host: string;
  tlsCertDir?: string;
  tlsSelfManaged: boolean;
  /** Empty: the image of the webhook's own container, read from its pod (podName) at start. */
  sidecarImage: string;
  /** The webhook's own pod (downward API metadata.name). */
  podName?: string;
  sidecarMode: SidecarMode;
  kubeconfig?: string;
  context?: string;
  namespace: string;
  serviceName: string;
  secretName: string;
  webhookConfigName: string;
  tlsIpSans: string[];
  caDays: number;
  servingDays: number;
  rotateCheckSeconds: number;
  certPollSeconds: number;
  drainSeconds: number;
  logLevel: string;
}

// Each flag: its environment variable, default and help text; a flag wins over its variable.
const OPTIONS = {
  port: { env: 'DRAINGUARD_WEBHOOK_PORT', default: '8443', help: 'HTTPS port' },
  host: { env: 'DRAINGUARD_WEBHOOK_HOST', default: '0.0.0.0', help: 'listen address' },
  'tls-cert-dir': {
    env: 'DRAINGUARD_WEBHOOK_TLS_CERT_DIR',
    default: '',
    help: 'directory with tls.crt and tls.key (cert-manager); reloaded on change',
  },
  'tls-self-managed': {
    env: 'DRAINGUARD_WEBHOOK_TLS_SELF_MANAGED',
    default: 'false',
    help: 'generate a CA and serving cert, keep them in a Secret, patch caBundle',
  },
  'sidecar-image': {
    env: 'DRAINGUARD_SIDECAR_IMAGE',
    default: '',
    help: "image of the injected sidecar (default: the webhook's own image, read from --pod-name)",
  },
  'pod-name': {
    env: 'DRAINGUARD_WEBHOOK_POD_NAME',
    default: '',
    help: 'own pod (downward API): its webhook container image is injected unless --sidecar-image is given',
  },
  'sidecar-mode': { env: 'DRAINGUARD_SIDECAR_MODE', default: 'auto', help: 'auto | native | classic' },
  kubeconfig: {
    env: 'KUBECONFIG',
    default: '',
    help: 'kubeconfig file (default: $KUBECONFIG, its files merged as kubectl does; ~/.kube/config; in-cluster)',
  },
  context: {
    env: 'DRAINGUARD_WEBHOOK_KUBE_CONTEXT',
    default: '',
    help: "kubeconfig context (default: the kubeconfig's current-context)",
  },
  namespace: {
    env: 'DRAINGUARD_WEBHOOK_NAMESPACE',
    default: 'drainguard-system',
    help: 'own namespace (Secret, Service)',
  },
  'service-name': {
    env: 'DRAINGUARD_WEBHOOK_SERVICE',
    default: 'drainguard-webhook',
    help: 'Service name, for the certificate SANs',
  },
  'secret-name': {
    env: 'DRAINGUARD_WEBHOOK_SECRET',
    default: 'drainguard-webhook-tls',
    help: 'Secret for self-managed TLS',
  },
  'webhook-config-name': {
    env: 'DRAINGUARD_WEBHOOK_CONFIGURATION',
    default: 'drainguard',
    help: 'own MutatingWebhookConfiguration',
  },
  'tls-ip-san': {
    env: 'DRAINGUARD_WEBHOOK_TLS_IP_SANS',
    default: '',
    help: 'extra IP SANs, comma-separated (self-managed)',
  },
  'ca-days': { env: 'DRAINGUARD_WEBHOOK_CA_DAYS', default: '3650', help: 'CA lifetime (self-managed)' },
  'serving-days': {
    env: 'DRAINGUARD_WEBHOOK_SERVING_DAYS',
    default: '365',
    help: 'serving certificate lifetime (self-managed)',
  },
  'rotate-check-seconds': {
    env: 'DRAINGUARD_WEBHOOK_ROTATE_CHECK_SECONDS',
    default: '600',
    help: 'how often the Secret is re-read and rotated',
  },
  'cert-poll-seconds': {
    env: 'DRAINGUARD_WEBHOOK_CERT_POLL_SECONDS',
    default: '10',
    help: 'how often --tls-cert-dir is re-read',
  },
  'drain-seconds': {
    env: 'DRAINGUARD_WEBHOOK_DRAIN_SECONDS',
    default: '15',
    help: 'on SIGTERM: not ready, still serving, for this long before closing',
  },
  'log-level': { env: 'DRAINGUARD_LOG_LEVEL', default: 'info', help: 'debug | info | warn | error' },
} as const satisfies Record<string, { env: string; default: string; help: string }>;

type OptName = keyof typeof OPTIONS;

export function usage(): string {
  return (
    'Usage: drainguard webhook --sidecar-image IMAGE (--tls-cert-dir DIR | --tls-self-managed) [options]\n\n' +
    Object.entries(OPTIONS)
      .map(
        ([k, o]) =>
          `  --${k.padEnd(22)} ${o.help}${o.default ? ` (default ${o.default})` : ''}; env ${o.env}`,
      )
      .join('\n') +
    '\n'
  );
}

export class ConfigError extends Error {}

/** A value read by the contract's parser; a bad one is a ConfigError naming the flag or variable. */
function valid<T>(where: string, raw: string, parsed: Parsed<T>): T {
  if ('problem' in parsed) throw new ConfigError(`${where}=${JSON.stringify(raw)}: ${parsed.problem}`);
  return parsed.value;
}

export function parseConfig(argv: string[], env: NodeJS.ProcessEnv): WebhookConfig {
  const { values } = parseArgs({
    args: argv,
    options: Object.fromEntries(
      Object.keys(OPTIONS).map((k) => [k, { type: k === 'tls-self-managed' ? 'boolean' : 'string' }]),
    ) as Record<OptName, { type: 'string' | 'boolean' }>,
    strict: true,
    allowPositionals: false,
  });
  const get = (k: OptName): string => {
    const v = (values as Record<string, string | boolean | undefined>)[k];
    if (v !== undefined) return String(v);
    return env[OPTIONS[k].env] ?? OPTIONS[k].default;
  };
  const int = (k: OptName, min: number, max: number) =>
    valid(`--${k}`, get(k), parseWholeNumber(get(k), min, max));
  const mode = get('sidecar-mode');
  const sidecarMode = valid('--sidecar-mode', mode, parseChoice(mode, SIDECAR_MODES));
  // A boolean flag is never malformed: only the environment variable can be.
  const selfManaged = get('tls-self-managed');
  const tlsSelfManaged = valid(OPTIONS['tls-self-managed'].env, selfManaged, parseBoolean(selfManaged));
  const cfg: WebhookConfig = {
    port: int('port', 0, 65535),
    host: get('host'),
    tlsSelfManaged,
    sidecarImage: get('sidecar-image'),
    sidecarMode,
    namespace: get('namespace'),
    serviceName: get('service-name'),
    secretName: get('secret-name'),
    webhookConfigName: get('webhook-config-name'),
    tlsIpSans: get('tls-ip-san')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
    caDays: int('ca-days', 1, 36500),
    servingDays: int('serving-days', 1, 3650),
    rotateCheckSeconds: int('rotate-check-seconds', 1, 86400),
    certPollSeconds: int('cert-poll-seconds', 1, 3600),
    drainSeconds: int('drain-seconds', 0, 300),
    logLevel: get('log-level'),
  };
  if (get('tls-cert-dir')) cfg.tlsCertDir = get('tls-cert-dir');
  // Only the flag names one file; $KUBECONFIG may list several, which the kubeconfig loader merges.
  const kubeconfig = (values as Record<string, unknown>).kubeconfig;
  if (typeof kubeconfig === 'string' && kubeconfig) cfg.kubeconfig = kubeconfig;
  if (get('context')) cfg.context = get('context');
  if (get('pod-name')) cfg.podName = get('pod-name');
  if (!cfg.sidecarImage && !cfg.podName)
    throw new ConfigError(
      '--sidecar-image (or DRAINGUARD_SIDECAR_IMAGE) is required unless --pod-name (DRAINGUARD_WEBHOOK_POD_NAME, from the downward API) names the webhook pod, whose own image is then injected',
    );
  if (!cfg.tlsCertDir === !cfg.tlsSelfManaged)
    throw new ConfigError('give exactly one of --tls-cert-dir DIR and --tls-self-managed');
  return cfg;
}

export interface RunningWebhook {
  port: number;
  config: WebhookConfig;
  metrics: Registry;
  /** Current serving pair (for tests). */
  serving(): ServingPair;
  kubeletVersions(): ReadonlyMap<string, string> | undefined;
  /** Readiness false, keep serving for --drain-seconds (SIGTERM, before close). */
  drain(): Promise<void>;
  close(): Promise<void>;
}

/** The webhook container's image in the webhook's own pod (the container named webhook, or the only one). */
export async function readOwnImage(client: KubeClient, namespace: string, podName: string): Promise<string> {
  let pod: Pod;
  try {
    pod = await client.get<Pod>(`/api/v1/namespaces/${namespace}/pods/${podName}`, {
      retries: 5,
      timeoutMs: 10_000,
    });
  } catch (e) {
    throw new ConfigError(
      `cannot read the own pod ${namespace}/${podName} to learn the sidecar image (${(e as Error).message}); grant get on pods in ${namespace} or set --sidecar-image`,
    );
  }
  const containers = (pod.spec?.containers ?? []) as { name: string; image?: string }[];
  const own =
    containers.find((c) => c.name === 'webhook') ?? (containers.length === 1 ? containers[0] : undefined);
  if (!own?.image)
    throw new ConfigError(
      `pod ${namespace}/${podName} has no container named webhook with an image; set --sidecar-image`,
    );
  return own.image;
}

/** Cluster access, when the configuration needs it; none is fatal only when the webhook cannot work without. */
async function connect(cfg: WebhookConfig, logger: Logger): Promise<KubeClient | undefined> {
  const required = cfg.tlsSelfManaged || !cfg.sidecarImage;
  if (!required && cfg.sidecarMode !== 'auto') return undefined;
  try {
    const { kubeconfigAuth } = await import('../shared/kube/kubeconfig.ts');
    return new KubeClient(kubeconfigAuth({ kubeconfig: cfg.kubeconfig, context: cfg.context }), {
      userAgent: `drainguard-webhook/${VERSION}`,
    });
  } catch (e) {
    if (required) throw e;
    logger.warn(
      { err: (e as Error).message },
      'no cluster access: --sidecar-mode auto injects classic sidecars',
    );
    return undefined;
  }
}

function tlsSource(
  cfg: WebhookConfig,
  client: KubeClient | undefined,
  log: Logger,
  metrics: Registry,
): TlsSource {
  if (cfg.tlsCertDir)
    return new CertDirReloader({ dir: cfg.tlsCertDir, log, pollMs: cfg.certPollSeconds * 1000, metrics });
  return new SelfManagedTls({
    client: client as KubeClient,
    namespace: cfg.namespace,
    secretName: cfg.secretName,
    webhookConfigName: cfg.webhookConfigName,
    dnsNames: serviceDnsNames(cfg.serviceName, cfg.namespace),
    ipAddresses: cfg.tlsIpSans,
    caDays: cfg.caDays,
    servingDays: cfg.servingDays,
    rotateCheckMs: cfg.rotateCheckSeconds * 1000,
    log,
    clock: systemClock,
  });
}

export async function startWebhook(cfg: WebhookConfig, log?: Logger): Promise<RunningWebhook> {
  const logger = log ?? createLogger('drainguard-webhook', cfg.logLevel);
  const metrics = new Registry();
  const client = await connect(cfg, logger);
  // The sidecar is this very image unless told otherwise: one tag to set (kustomize's image
  // transformer rewrites the container, never an env value), and injected pods never drift from it.
  const ownImage = !cfg.sidecarImage;
  const sidecarImage = ownImage
    ? await readOwnImage(client as KubeClient, cfg.namespace, cfg.podName ?? '')
    : cfg.sidecarImage;
  const tls = observeServing(tlsSource(cfg, client, logger, metrics), metrics);
  let pair = await tls.load();
  const nodes = client && cfg.sidecarMode === 'auto' ? new NodeVersions(client, logger) : undefined;
  await nodes?.start();

  let draining = false;
  const app = createWebhookApp({
    draining: () => draining,
    log: logger,
    metrics,
    https: pair,
    planner: () => {
      const kubeletVersions = nodes?.kubeletVersions;
      const apiServerVersion = nodes?.apiServer;
      return {
        image: sidecarImage,
        mode: cfg.sidecarMode,
        version: VERSION,
        ...(kubeletVersions ? { kubeletVersions } : {}),
        ...(apiServerVersion ? { apiServerVersion } : {}),
        ownNamespace: cfg.namespace,
        selfLabels: { 'app.kubernetes.io/name': 'drainguard', 'app.kubernetes.io/component': 'webhook' },
      };
    },
    ready: () => nodes?.synced ?? true,
  });
  await app.listen({ port: cfg.port, host: cfg.host });
  const port = (app.server.address() as { port: number }).port;
  await tls.start((p) => {
    pair = p;
    // New handshakes get the new pair; open connections keep theirs, so none fails mid-reload.
    (app.server as unknown as { setSecureContext(o: object): void }).setSecureContext({
      cert: p.cert,
      key: p.key,
      minVersion: 'TLSv1.2',
    });
  });
  logger.info(
    {
      port,
      tls: tls.kind,
      sidecarMode: cfg.sidecarMode,
      image: sidecarImage,
      imageFrom: ownImage ? 'own pod' : 'configuration',
    },
    'webhook serving',
  );
  return {
    port,
    config: cfg,
    metrics,
    serving: () => pair,
    kubeletVersions: () => nodes?.kubeletVersions,
    // SIGTERM: readiness goes false first so the endpoints controller and kube-proxy (and the API
    // server's endpoint cache) stop sending here; the period is time for that to propagate, which the
    // pod cannot observe. In-flight and new requests are answered throughout, then it closes.
    drain: async () => {
      draining = true;
      logger.info({ drainSeconds: cfg.drainSeconds }, 'draining: not ready, still serving');
      await new Promise((r) => setTimeout(r, cfg.drainSeconds * 1000));
    },
    close: async () => {
      tls.stop();
      await nodes?.stop();
      await app.close();
      client?.close();
    },
  };
}

export async function run(argv: string[]): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(usage());
    return 0;
  }
  let cfg: WebhookConfig;
  try {
    cfg = parseConfig(argv, process.env);
  } catch (e) {
    process.stderr.write(`drainguard webhook: ${(e as Error).message}\n\n${usage()}`);
    return 2;
  }
  const hook = await startWebhook(cfg);
  return new Promise<number>((resolve) => {
    const stop = () => {
      hook
        .drain()
        .then(() => hook.close())
        .then(
          () => resolve(0),
          () => resolve(1),
        );
    };
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
  });
}
