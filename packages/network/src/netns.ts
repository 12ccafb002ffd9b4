// The sandbox's network namespace, made on the host side before anything runs in it: a namespace of the
// host's user namespace (the agent holds no capability over it, whatever it holds in its own), kept by
// a bind mount on a file in the sandbox's state directory so that every process of the sandbox joins the
// same one. Inside it: a loopback, every other destination routed to that loopback, and nftables rules
// that send TCP to the policy point's listener and DNS to its resolver, and refuse the rest (UDP, other
// protocols). The agent's own loopback traffic stays its own.
import { execFile } from 'node:child_process';
import { closeSync, existsSync, openSync, rmSync } from 'node:fs';
import { promisify } from 'node:util';
import { InternalError } from '@agentfense/protocol';

const run = promisify(execFile);

/** Where the policy point listens inside every sandbox namespace (a loopback it owns from the start). */
export const PROXY_PORT = 3128;
export const DNS_PORT = 53;
export const PROXY_URL = `http://127.0.0.1:${PROXY_PORT}`;

/** Every destination outside the namespace's own loopback is local (so it reaches the NAT hook). */
const ROUTES = ['link set lo up', 'route add local 0.0.0.0/0 dev lo'];
/** The same for IPv6, where the namespace has it (Docker turns IPv6 off in `--network none` containers). */
const ROUTES_V6 = 'route add local ::/0 dev lo\n';

// Redirect (NAT, before routing the reply) keeps the original destination in conntrack, where the
// listener reads it (SO_ORIGINAL_DST). The filter then refuses anything not redirected and not to the
// loopback: UDP other than DNS, ICMP, SCTP, …
const RULESET = `
table inet agentfense {
  chain nat_out {
    type nat hook output priority -100; policy accept;
    ip daddr 127.0.0.0/8 return
    ip6 daddr ::1 return
    udp dport 53 redirect to :${DNS_PORT}
    tcp dport 53 redirect to :${DNS_PORT}
    meta l4proto tcp redirect to :${PROXY_PORT}
  }
  chain filter_out {
    type filter hook output priority 0; policy accept;
    ct state established,related accept
    ip daddr 127.0.0.0/8 accept
    ip6 daddr ::1 accept
    reject
  }
}
`;

async function withInput(file: string, args: readonly string[], input: string): Promise<void> {
  const child = run(file, args, { timeout: 10_000 });
  child.child.stdin?.end(input);
  await child;
}

/**
 * Sets up the namespace bound at `path`: made here (`create`, a new file) for a runtime that starts its
 * sandbox inside it (bwrap), or one the runtime published there (Docker's container namespace, which
 * holds only a loopback and af-init, nothing of the agent's yet).
 */
export async function setUpSandboxNetns(path: string, options: { create: boolean }): Promise<void> {
  try {
    if (options.create) {
      closeSync(openSync(path, 'wx', 0o600));
      await withInput('unshare', [`--net=${path}`, '--', 'ip', '-batch', '-'], ROUTES.join('\n') + '\n');
    } else {
      await withInput('nsenter', [`--net=${path}`, '--', 'ip', '-batch', '-'], ROUTES.join('\n') + '\n');
    }
    await withInput('nsenter', [`--net=${path}`, '--', 'ip', '-batch', '-'], ROUTES_V6).catch(
      () => undefined,
    );
    await withInput('nsenter', [`--net=${path}`, '--', 'nft', '-f', '-'], RULESET);
  } catch (err) {
    await removeSandboxNetns(path);
    throw new InternalError(
      `could not set up the sandbox's network namespace (needs root, unshare, ip and nft: \`bash scripts/setup\` installs nftables): ${(err as Error).message}`,
      { cause: err },
    );
  }
}

/** Unmounts and removes the namespace's file; idempotent. The namespace ends with its last user. */
export async function removeSandboxNetns(path: string): Promise<void> {
  if (!existsSync(path)) return;
  await run('umount', ['-l', path]).catch(() => undefined);
  rmSync(path, { force: true });
}

/**
 * The environment every command of a sandbox with a network policy starts with: programs that honour
 * proxy variables use the policy point as their proxy (CONNECT for HTTPS); the rest is redirected to it
 * by the namespace's NAT anyway.
 */
export const PROXY_ENV: Readonly<Record<string, string>> = {
  HTTP_PROXY: PROXY_URL,
  HTTPS_PROXY: PROXY_URL,
  http_proxy: PROXY_URL,
  https_proxy: PROXY_URL,
  NO_PROXY: 'localhost,127.0.0.1,::1',
  no_proxy: 'localhost,127.0.0.1,::1',
};
