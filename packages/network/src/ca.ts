// A sandbox's certificate authority: made in memory when a sandbox with secrets starts, trusted only
// inside that sandbox, and used by its policy point alone to present certificates for the hosts a
// secret is bound to. Its key is never written to disk (docs/secrets.md). Keys come from Node's own
// generator; node-forge builds and signs the certificates (no hand-written ASN.1).
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import forge from 'node-forge';

/** The CA as it crosses the policy point's IPC channel: PEM texts. */
export interface SandboxCaPem {
  readonly cert: string;
  readonly key: string;
}

const CA_DAYS = 30;
const LEAF_DAYS = 7;

function rsaKeys(): { privateKey: forge.pki.rsa.PrivateKey; publicKey: forge.pki.rsa.PublicKey } {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const key = forge.pki.privateKeyFromPem(privateKey.export({ type: 'pkcs1', format: 'pem' }).toString());
  const rsa = key;
  return { privateKey: rsa, publicKey: forge.pki.setRsaPublicKey(rsa.n, rsa.e) };
}

function dates(cert: forge.pki.Certificate, days: number): void {
  // An hour back: a sandbox clock a little behind the host's still accepts it.
  cert.validity.notBefore = new Date(Date.now() - 3_600_000);
  cert.validity.notAfter = new Date(Date.now() + days * 86_400_000);
}

/** A new CA for sandbox `sandboxId`: its certificate and key, PEM. */
export function createSandboxCa(sandboxId: string): SandboxCaPem {
  const keys = rsaKeys();
  const cert = forge.pki.createCertificate();
  cert.publicKey = keys.publicKey;
  cert.serialNumber = `01${randomBytes(15).toString('hex')}`;
  dates(cert, CA_DAYS);
  const subject = [
    { name: 'commonName', value: `AgentFense sandbox CA ${sandboxId}` },
    { name: 'organizationName', value: 'AgentFense' },
  ];
  cert.setSubject(subject);
  cert.setIssuer(subject);
  cert.setExtensions([
    { name: 'basicConstraints', cA: true, pathLenConstraint: 0, critical: true },
    { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
    { name: 'subjectKeyIdentifier' },
  ]);
  cert.sign(keys.privateKey, forge.md.sha256.create());
  return { cert: forge.pki.certificateToPem(cert), key: forge.pki.privateKeyToPem(keys.privateKey) };
}

/** Leaf certificates for bound hosts, signed by the sandbox's CA on first use and kept. */
export class LeafCertificates {
  readonly #caCert: forge.pki.Certificate;
  readonly #caKey: forge.pki.rsa.PrivateKey;
  // One key for every leaf of the sandbox: a key per host would cost a key generation per new host.
  readonly #leafKeys = rsaKeys();
  readonly #leafKeyPem: string;
  readonly #cache = new Map<string, { key: string; cert: string }>();

  constructor(ca: SandboxCaPem) {
    this.#caCert = forge.pki.certificateFromPem(ca.cert);
    this.#caKey = forge.pki.privateKeyFromPem(ca.key);
    this.#leafKeyPem = forge.pki.privateKeyToPem(this.#leafKeys.privateKey);
  }

  /** The key and certificate chain (leaf, CA) presented for `host`. */
  for(host: string): { key: string; cert: string } {
    const cached = this.#cache.get(host);
    if (cached !== undefined) return cached;
    const cert = forge.pki.createCertificate();
    cert.publicKey = this.#leafKeys.publicKey;
    cert.serialNumber = `01${randomBytes(15).toString('hex')}`;
    dates(cert, LEAF_DAYS);
    cert.setSubject([{ name: 'commonName', value: host }]);
    cert.setIssuer(this.#caCert.subject.attributes);
    cert.setExtensions([
      { name: 'basicConstraints', cA: false, critical: true },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      { name: 'subjectAltName', altNames: [{ type: 2, value: host }] },
    ]);
    cert.sign(this.#caKey, forge.md.sha256.create());
    const made = {
      key: this.#leafKeyPem,
      cert: `${forge.pki.certificateToPem(cert)}${forge.pki.certificateToPem(this.#caCert)}`,
    };
    this.#cache.set(host, made);
    return made;
  }
}
