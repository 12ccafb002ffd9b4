// A sandbox's certificate authority: made in memory when a sandbox with secrets starts, trusted only
// inside that sandbox, and used by its policy point alone to present certificates for the hosts a
// secret is bound to. Its key is never written to disk (docs/secrets.md). Keys come from Node's own
// generator; node-forge builds and signs the certificates. The CA is name-constrained to those hosts:
// forge has no builder for that extension, so its value is encoded here with forge.asn1.
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

export interface SandboxCaOptions {
  readonly sandboxId: string;
  /**
   * The hosts the sandbox's secrets are bound to (names or `*.domain`): the only names a certificate
   * under this CA may carry (name constraints below).
   */
  readonly hosts: readonly string[];
}

/**
 * The permitted DNS subtrees for `hosts`. A subtree covers a name and every name below it (RFC 5280
 * §4.2.1.10), so `*.example.com` becomes `example.com`: a dNSName constraint has no wildcard form, and
 * the leading-dot form (below only) is not one every verifier reads the same way.
 */
export function permittedSubtrees(hosts: readonly string[]): string[] {
  const bases = hosts.map((h) => (h.startsWith('*.') ? h.slice(2) : h));
  return [...new Set(bases)].sort();
}

/**
 * The DER of a NameConstraints value (RFC 5280 §4.2.1.10): permitted dNSName subtrees `names`, and every
 * IPv4 and IPv6 address excluded (iPAddress 0.0.0.0/0 and ::/0), so a certificate under this CA can
 * name neither another host nor an address.
 */
function nameConstraintsDer(names: readonly string[]): string {
  const { asn1 } = forge;
  const ctx = (tag: number, constructed: boolean, value: string | forge.asn1.Asn1[]): forge.asn1.Asn1 =>
    asn1.create(asn1.Class.CONTEXT_SPECIFIC, tag, constructed, value);
  // GeneralSubtree ::= SEQUENCE { base GeneralName } (minimum 0 and no maximum: both left out).
  const subtree = (base: forge.asn1.Asn1): forge.asn1.Asn1 =>
    asn1.create(asn1.Class.UNIVERSAL, asn1.Type.SEQUENCE, true, [base]);
  // GeneralName dNSName [2] IA5String and iPAddress [7] OCTET STRING (address then mask), both IMPLICIT.
  const dns = (name: string): forge.asn1.Asn1 => subtree(ctx(2, false, name));
  const anyAddress = (bytes: number): forge.asn1.Asn1 => subtree(ctx(7, false, '\0'.repeat(bytes * 2)));
  const value = asn1.create(asn1.Class.UNIVERSAL, asn1.Type.SEQUENCE, true, [
    ctx(0, true, names.map(dns)), // permittedSubtrees
    ctx(1, true, [anyAddress(4), anyAddress(16)]), // excludedSubtrees
  ]);
  return asn1.toDer(value).getBytes();
}

/** A new CA for a sandbox and the hosts its secrets are bound to: its certificate and key, PEM. */
export function createSandboxCa(options: SandboxCaOptions): SandboxCaPem {
  const { sandboxId } = options;
  const names = permittedSubtrees(options.hosts);
  // An empty permitted list would mean "no constraint" to some verifiers: a CA for no host is refused.
  if (names.length === 0) throw new Error('a sandbox CA needs at least one bound host');
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
    // Critical: a verifier that cannot read it must refuse the CA rather than trust it unconstrained.
    { id: '2.5.29.30', critical: true, value: nameConstraintsDer(names) },
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
