// What the tests of the policy point's C paths (accept, CONNECT, plain HTTP) share: clients started
// inside a policed namespace, a bounded wait, the fields of an audit record that say what was decided,
// a policy point made in a namespace of its own with exactly the named features on and off, whatever
// the caller's environment says (the environment is put back at once: the point reads it when made),
// and a keep-alive HTTP destination that records what reached it.
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { openSocketInNetns } from '@agentfense/network';
import type { NetworkAuditEvent } from '@agentfense/network';
import { PolicyPoint } from '../../packages/network/src/policy-point.js';
import { removeSandboxNetns, setUpSandboxNetns } from '../../packages/network/src/netns.js';
import type { NetworkPolicy } from '../../packages/network/src/policy.js';

/** A client inside `ns`; `input` is written to its stdin (closed after). */
export function inNs(ns: string, argv: string[], input = ''): Promise<{ out: string; code: number | null }> {
  return new Promise((resolve, reject) => {
    const child = spawn('nsenter', [`--net=${ns}`, '--', ...argv], { stdio: ['pipe', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ out, code }));
    child.stdin.end(input);
  });
}

/** Waits up to 5 s for `check`. */
export async function until(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 200 && !check(); i++) await new Promise((r) => setTimeout(r, 25));
  if (!check()) throw new Error(`timed out waiting for ${what}`);
}

/** The fields of an audit record that say what was decided (time, duration and bytes aside). */
export const decided = (e: NetworkAuditEvent): Record<string, unknown> => {
  const { time: _time, durationMs: _duration, bytesUp: _up, bytesDown: _down, ...rest } = e;
  return rest;
};

export interface FastPathPointOptions {
  /** The namespace is made at `<dir>/<name>`. */
  readonly dir: string;
  readonly name: string;
  readonly policy: NetworkPolicy;
  readonly hostsFile: string;
  readonly maxConnections: number;
  /** AGENTFENSE_NETWORK_ENABLE and _DISABLE while the point is made (empty: unset). */
  readonly enable: readonly string[];
  readonly disable: readonly string[];
  readonly audit: (event: NetworkAuditEvent) => void;
}

/** A policy point policing a fresh namespace; `close` stops it and removes the namespace. */
export async function fastPathPoint(
  options: FastPathPointOptions,
): Promise<{ point: PolicyPoint; ns: string; close: () => Promise<void> }> {
  const ns = join(options.dir, options.name);
  await setUpSandboxNetns(ns, { create: true });
  const keys = ['AGENTFENSE_NETWORK_ENABLE', 'AGENTFENSE_NETWORK_DISABLE'] as const;
  const saved = keys.map((key) => process.env[key]);
  [options.enable, options.disable].forEach((list, i) => {
    if (list.length === 0) delete process.env[keys[i]!];
    else process.env[keys[i]!] = list.join(',');
  });
  try {
    const point = new PolicyPoint({
      netnsPath: ns,
      policy: options.policy,
      maxConnections: options.maxConnections,
      hostsFile: options.hostsFile,
      audit: options.audit,
    });
    return {
      point,
      ns,
      close: async () => {
        point.close();
        await removeSandboxNetns(ns);
      },
    };
  } catch (err) {
    await removeSandboxNetns(ns);
    throw err;
  } finally {
    keys.forEach((key, i) => {
      if (saved[i] === undefined) delete process.env[key];
      else process.env[key] = saved[i];
    });
  }
}

/** A plain-HTTP destination in the test net (keepAliveDestination). */
export interface KeepAliveDestination {
  /** Every connection's bytes in order, since the start or the last clear(). */
  readonly received: string;
  clear(): void;
  close(): void;
}

/**
 * A destination on `port` in the namespace `nsPath` that answers every head with a 200 and keeps the
 * connection open for 300 ms after each answer (a keep-alive timeout), whatever the request's Connection
 * header says: so a client can send a second request on the connection a first one opened.
 */
export function keepAliveDestination(nsPath: string, port: number): KeepAliveDestination {
  let received = '';
  const server = createServer((socket) => {
    let pending = '';
    let idle: NodeJS.Timeout | undefined;
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1');
      pending += chunk.toString('latin1');
      while (pending.includes('\r\n\r\n')) {
        pending = pending.slice(pending.indexOf('\r\n\r\n') + 4);
        socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
        clearTimeout(idle);
        idle = setTimeout(() => socket.end(), 300);
      }
    });
    socket.on('close', () => clearTimeout(idle));
    socket.on('error', () => socket.destroy());
  });
  server.listen({ fd: openSocketInNetns(nsPath, { family: 4, type: 'tcp', address: '0.0.0.0', port }) });
  return {
    get received() {
      return received;
    },
    clear: () => {
      received = '';
    },
    close: () => server.close(),
  };
}
