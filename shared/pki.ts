// X.509 for the webhook's self-managed TLS and the test harness: a CA and serving
// certificates signed by it. node-forge does the ASN.1; RSA keys come from Node's native
// crypto (node-forge's pure-JS generator takes ~1 s per key).
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { isIP } from 'node:net';
import forge from 'node-forge';

export interface CertPair {
  certPem: string;
  keyPem: string;
}

export interface ServingCertOptions {
  dnsNames?: string[];
  ipAddresses?: string[];
  days: number;
  /** Subject CN; defaults to the first DNS name (or IP). */
  commonName?: string;
}

const DAY_MS = 86_400_000;
// Back-date validity a little: clocks of the API server and the webhook are rarely in step.
const BACKDATE_MS = 5 * 60_000;

function rsaKeys(): {
  privateKey: forge.pki.rsa.PrivateKey;
  publicKey: forge.pki.rsa.PublicKey;
  keyPem: string;
} {
  const { privateKey } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
  const key = forge.pki.privateKeyFromPem(privateKey) as forge.pki.rsa.PrivateKey;
  const publicKey = forge.pki.setRsaPublicKey(key.n, key.e);
  return { privateKey: key, publicKey, keyPem: forge.pki.privateKeyToPem(key) };
}

function serial(): string {
  // Positive, 16 bytes: the top bit cleared so DER does not read it as negative.
  const b = randomBytes(16);
  b[0] = (b[0] as number) & 0x7f;
  return b.toString('hex');
}

function validity(cert: forge.pki.Certificate, days: number, now: number): void {
  if (!Number.isFinite(days) || days <= 0) throw new Error(`days must be a positive number, got ${days}`);
  cert.validity.notBefore = new Date(now - BACKDATE_MS);
  cert.validity.notAfter = new Date(now + days * DAY_MS);
}

/** A self-signed CA (RSA 2048, SHA-256) that may sign serving certificates. */
export function createCA(commonName: string, days: number, now = Date.now()): CertPair {
  const keys = rsaKeys();
  const cert = forge.pki.createCertificate();
  cert.publicKey = keys.publicKey;
  cert.serialNumber = serial();
  validity(cert, days, now);
  const attrs = [{ name: 'commonName', value: commonName }];
  cert.setSubject(attrs);
  cert.setIssuer(attrs);
  cert.setExtensions([
    { name: 'basicConstraints', cA: true, critical: true },
    { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    { name: 'subjectKeyIdentifier' },
  ]);
  cert.sign(keys.privateKey, forge.md.sha256.create());
  return { certPem: forge.pki.certificateToPem(cert), keyPem: keys.keyPem };
}

/** A serving certificate (serverAuth) for the given DNS names and IP addresses, signed by ca. */
export function createServingCert(ca: CertPair, opts: ServingCertOptions, now = Date.now()): CertPair {
  const dnsNames = opts.dnsNames ?? [];
  const ipAddresses = opts.ipAddresses ?? [];
  if (dnsNames.length === 0 && ipAddresses.length === 0)
    throw new Error('createServingCert: give at least one of dnsNames, ipAddresses');
  const badIp = ipAddresses.find((ip) => isIP(ip) === 0);
  if (badIp !== undefined) throw new Error(`createServingCert: ipAddresses: ${badIp} is not an IP address`);
  const cn = opts.commonName ?? dnsNames[0] ?? ipAddresses[0] ?? 'drainguard';
  return signLeaf(ca, [{ name: 'commonName', value: cn.slice(0, 64) }], opts.days, now, [
    { name: 'extKeyUsage', serverAuth: true },
    {
      name: 'subjectAltName',
      altNames: [
        ...dnsNames.map((value) => ({ type: 2, value })),
        ...ipAddresses.map((ip) => ({ type: 7, ip })),
      ],
    },
  ]);
}

/**
 * A client certificate (clientAuth): Kubernetes reads the user from CN and groups from O
 * (the lab's API server authenticates to kubelets with one).
 */
export function createClientCert(
  ca: CertPair,
  opts: { commonName: string; organization?: string; days: number },
  now = Date.now(),
): CertPair {
  const subject = [
    { name: 'commonName', value: opts.commonName.slice(0, 64) },
    ...(opts.organization ? [{ name: 'organizationName', value: opts.organization }] : []),
  ];
  return signLeaf(ca, subject, opts.days, now, [{ name: 'extKeyUsage', clientAuth: true }]);
}

function signLeaf(
  ca: CertPair,
  subject: forge.pki.CertificateField[],
  days: number,
  now: number,
  extensions: object[],
): CertPair {
  const caCert = forge.pki.certificateFromPem(ca.certPem);
  const caKey = forge.pki.privateKeyFromPem(ca.keyPem);
  const keys = rsaKeys();
  const cert = forge.pki.createCertificate();
  cert.publicKey = keys.publicKey;
  cert.serialNumber = serial();
  validity(cert, days, now);
  cert.setSubject(subject);
  cert.setIssuer(caCert.subject.attributes);
  cert.setExtensions([
    { name: 'basicConstraints', cA: false },
    { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
    ...extensions,
    { name: 'authorityKeyIdentifier', keyIdentifier: caCert.generateSubjectKeyIdentifier().getBytes() },
  ]);
  cert.sign(caKey, forge.md.sha256.create());
  return { certPem: forge.pki.certificateToPem(cert), keyPem: keys.keyPem };
}

/** notAfter of a PEM certificate (the first one in the text), in ms since the epoch. */
export function certNotAfter(certPem: string): number {
  return forge.pki.certificateFromPem(certPem).validity.notAfter.getTime();
}
