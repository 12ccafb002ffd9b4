// What one policy point holds of its sandbox's secrets: the secrets (values in this process's memory
// only), the leaf certificates of its CA, and the CAs an upstream must chain to. Only hosts a secret is
// bound to are intercepted; every other TLS connection stays an opaque tunnel.
import { rootCertificates } from 'node:tls';
import { LeafCertificates } from './ca.js';
import type { SandboxCaPem } from './ca.js';
import { hostMatches } from './secrets.js';
import type { SandboxSecret } from './secrets.js';

export interface SecretSetOptions {
  readonly secrets: readonly SandboxSecret[];
  readonly ca: SandboxCaPem;
  /** Extra CAs an upstream may chain to besides the system's (PEM; tests, private registries). */
  readonly upstreamCa?: string;
}

export class SecretSet {
  #secrets: readonly SandboxSecret[];
  readonly leaves: LeafCertificates;
  /** The CAs an upstream certificate must chain to: the system's, plus the operator's extra ones. */
  readonly upstreamCa: readonly string[];

  constructor(options: SecretSetOptions) {
    this.#secrets = options.secrets;
    this.leaves = new LeafCertificates(options.ca);
    this.upstreamCa =
      options.upstreamCa === undefined ? [...rootCertificates] : [...rootCertificates, options.upstreamCa];
  }

  /** The secrets with a value here: read at each use, so a value given later counts from then on. */
  get secrets(): readonly SandboxSecret[] {
    return this.#secrets;
  }

  /**
   * Gives a secret its value, or replaces it (the control plane's setSecret). Its hosts must be among
   * the ones the CA was made for, which the control plane checks: a secret is declared at create.
   */
  put(secret: SandboxSecret): void {
    this.#secrets = [...this.#secrets.filter((s) => s.name !== secret.name), secret];
  }

  /** Whether connections to `host` are intercepted: a secret is bound to it. */
  bound(host: string | undefined): boolean {
    return host !== undefined && this.secrets.some((s) => hostMatches(s.hosts, host));
  }

  /** The secrets a request to `host` may carry. */
  forRequest(host: string, method: string, path: string): SandboxSecret[] {
    return this.secrets.filter(
      (s) =>
        hostMatches(s.hosts, host) &&
        (s.methods === undefined || s.methods.includes(method)) &&
        (s.paths === undefined || s.paths.some((p) => path.startsWith(p))),
    );
  }
}
