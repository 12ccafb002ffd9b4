// What a start adds for a sandbox with secrets (docs/secrets.md): a CA made in memory for this start,
// the files that make the sandbox trust it (the system's CAs plus it, bound over the system bundle, and
// the CA alone for Node), the variables that name them, and each secret's placeholder variable.
import { readFileSync } from 'node:fs';
import { createSandboxCa } from '@agentfense/network';
import type { SandboxCaPem, SecretBinding } from '@agentfense/network';
import type { HeldSecrets } from './secrets.js';

/** Debian's system bundle: the sandbox's /etc copy of it is what most TLS clients read. */
const SYSTEM_BUNDLE = '/etc/ssl/certs/ca-certificates.crt';
/** The sandbox CA alone (NODE_EXTRA_CA_CERTS adds to Node's own list). */
const CA_FILE = SYSTEM_BUNDLE;

export interface SecretStart {
  /**
   * Made for every declared secret's hosts, whether or not this process holds its value: a value given
   * later (setSecret) is then used at once, without a restart.
   */
  readonly ca: SandboxCaPem;
  readonly files: { dest: string; content: string }[];
  /** Placed after the sandbox's own env: a secret's name always carries its placeholder. */
  readonly env: Record<string, string>;
}

export function secretStart(
  sandboxId: string,
  held: Pick<HeldSecrets, 'placeholders'>,
  declared: readonly SecretBinding[],
): SecretStart | undefined {
  // Every secret's placeholder is set, usable or not: the agent's view stays the same either way.
  if (declared.length === 0) return undefined;
  // Constrained to the bound hosts: even its key could sign for nothing else the sandbox would accept.
  const ca = createSandboxCa({ sandboxId, hosts: declared.flatMap((s) => s.hosts) });
  let system = '';
  try {
    system = readFileSync(SYSTEM_BUNDLE, 'utf8');
  } catch {
    // No system bundle on the host: the sandbox then trusts its own CA alone.
  }
  const bundle = `${system}${system.endsWith('\n') || system === '' ? '' : '\n'}${ca.cert}`;
  return {
    ca,
    files: [{ dest: SYSTEM_BUNDLE, content: bundle }],
    env: {
      SSL_CERT_FILE: SYSTEM_BUNDLE,
      CURL_CA_BUNDLE: SYSTEM_BUNDLE,
      REQUESTS_CA_BUNDLE: SYSTEM_BUNDLE,
      GIT_SSL_CAINFO: SYSTEM_BUNDLE,
      NODE_EXTRA_CA_CERTS: CA_FILE,
      ...held.placeholders,
    },
  };
}
