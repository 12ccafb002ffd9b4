// The control plane's side of a sandbox's network: the namespace made before the runtime starts, the
// policy point's process started inside nothing (it stays in the host's namespaces) and stopped with the
// sandbox, live policy changes, and the audit records it sends back.
import { fork } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { InternalError, UnavailableError } from '@agentfense/protocol';
import type { NetworkAuditEvent } from './audit.js';
import { removeSandboxNetns, setUpSandboxNetns } from './netns.js';
import type { NetworkPolicy } from './policy.js';
import type { FromPolicyPoint, ToPolicyPoint } from './process-main.js';
import type { SecretSetOptions } from './secret-set.js';
import type { SandboxSecret } from './secrets.js';

/** Open connections per sandbox unless the control plane says otherwise. */
export const DEFAULT_MAX_CONNECTIONS = 512;
/** The policy point's V8 heap: its buffers are bounded by back-pressure; this bounds the rest. */
const HEAP_MB = 128;
const START_TIMEOUT_MS = 10_000;
const STOP_TIMEOUT_MS = 2_000;

export interface SandboxNetworkOptions {
  readonly sandboxId: string;
  /** The sandbox's state directory: the namespace's file is made there. */
  readonly stateDir: string;
  readonly policy: NetworkPolicy;
  /**
   * true: make the namespace (the runtime then starts the sandbox in it); false: the runtime already
   * published its sandbox's namespace at `netnsPathOf(stateDir)` and it is set up in place.
   */
  readonly create: boolean;
  readonly maxConnections?: number;
  /** Names the policy point resolves from this file before the host's resolver (tests, air-gapped hosts). */
  readonly hostsFile?: string;
  /** The sandbox's secrets and CA (docs/secrets.md): sent over the IPC channel, never argv or env. */
  readonly secrets?: SecretSetOptions;
  readonly onAudit: (events: readonly NetworkAuditEvent[]) => void;
  /**
   * Places the new process (its pid) before it opens a listener: the control plane moves it into the
   * sandbox's policy point cgroup there, so everything the sandbox makes it hold is charged to that.
   */
  readonly place?: (pid: number) => Promise<void>;
  /** The process ended without being asked to (the sandbox then has no way out at all). */
  readonly onExit?: (reason: string, exit: PolicyPointExit) => void;
}

/** How the policy point's process ended. */
export interface PolicyPointExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

export function netnsPathOf(stateDir: string): string {
  return join(stateDir, 'netns');
}

function entry(): string {
  // dist/host.js → dist/process-main.js; from the TS source (tests), the built file too.
  const url = import.meta.url.includes('/dist/') ? './process-main.js' : '../dist/process-main.js';
  return fileURLToPath(new URL(url, import.meta.url));
}

export class SandboxNetwork {
  readonly netnsPath: string;
  readonly #child: ChildProcess;
  #policy: NetworkPolicy;
  #nextId = 1;
  readonly #waiting = new Map<number, (closed: number) => void>();
  #stopping = false;

  private constructor(netnsPath: string, child: ChildProcess, policy: NetworkPolicy) {
    this.netnsPath = netnsPath;
    this.#child = child;
    this.#policy = policy;
  }

  get policy(): NetworkPolicy {
    return this.#policy;
  }

  get pid(): number | undefined {
    return this.#child.pid;
  }

  /** Makes the namespace and starts the policy point; resolves once its listeners are open. */
  static async start(options: SandboxNetworkOptions): Promise<SandboxNetwork> {
    const netnsPath = netnsPathOf(options.stateDir);
    if (options.create) await removeSandboxNetns(netnsPath); // a leftover of a crashed run
    await setUpSandboxNetns(netnsPath, { create: options.create });
    const child = fork(entry(), [], {
      execArgv: [`--max-old-space-size=${HEAP_MB}`],
      // With secrets, none of the control plane's environment (where an operator's keys may be) is copied.
      ...(options.secrets === undefined ? {} : { env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin' } }),
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
      serialization: 'advanced',
    });
    const network = new SandboxNetwork(netnsPath, child, options.policy);
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new UnavailableError('the network policy point did not start within 10 s')),
          START_TIMEOUT_MS,
        );
        child.once('exit', (code) =>
          reject(new UnavailableError(`the network policy point exited at start (status ${code})`)),
        );
        child.on('message', (message: FromPolicyPoint) => {
          if (message.type === 'ready') {
            clearTimeout(timer);
            resolve();
          } else if (message.type === 'error') {
            clearTimeout(timer);
            reject(new InternalError(`the network policy point could not start: ${message.message}`));
          } else if (message.type === 'audit') options.onAudit(message.events);
          else if (message.type === 'policy-applied') network.#waiting.get(message.id)?.(message.closed);
        });
        // Placed first: the listeners, and whatever the sandbox makes it hold, are charged to its cgroup.
        const { place } = options;
        const placed = place === undefined || child.pid === undefined ? Promise.resolve() : place(child.pid);
        placed.then(
          () =>
            network.#send({
              type: 'start',
              netnsPath,
              policy: options.policy,
              maxConnections: options.maxConnections ?? DEFAULT_MAX_CONNECTIONS,
              ...(options.hostsFile === undefined ? {} : { hostsFile: options.hostsFile }),
              ...(options.secrets === undefined ? {} : { secrets: options.secrets }),
            }),
          (err: unknown) => {
            clearTimeout(timer);
            reject(err instanceof Error ? err : new InternalError(String(err)));
          },
        );
      });
    } catch (err) {
      await network.stop();
      throw err;
    }
    child.removeAllListeners('exit');
    child.once('exit', (code, signal) => {
      if (!network.#stopping)
        options.onExit?.(`the network policy point exited (${signal ?? `status ${code}`})`, { code, signal });
    });
    return network;
  }

  #send(message: ToPolicyPoint): void {
    if (this.#child.connected) this.#child.send(message);
  }

  /** Applies a new policy; resolves with how many open connections it closed. */
  setPolicy(policy: NetworkPolicy): Promise<number> {
    this.#policy = policy;
    return this.#ask((id) => ({ type: 'policy', id, policy }));
  }

  /**
   * Gives the running policy point a secret's value (new or replacing one); resolves false when it
   * intercepts nothing (started without a CA) or did not answer.
   */
  async setSecret(secret: SandboxSecret): Promise<boolean> {
    return (await this.#ask((id) => ({ type: 'secret', id, secret }))) === 1;
  }

  /** Resolves once the policy point has sent every audit record it holds. */
  async flush(): Promise<void> {
    await this.#ask((id) => ({ type: 'flush', id }));
  }

  /** Sends a request and resolves with its acknowledgement (0 after 10 s without one). */
  #ask(message: (id: number) => ToPolicyPoint): Promise<number> {
    const id = this.#nextId++;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#waiting.delete(id);
        resolve(0);
      }, START_TIMEOUT_MS);
      this.#waiting.set(id, (closed) => {
        clearTimeout(timer);
        this.#waiting.delete(id);
        resolve(closed);
      });
      this.#send(message(id));
    });
  }

  /** Stops the policy point (its last audit records arrive first) and removes the namespace's file. */
  async stop(): Promise<void> {
    this.#stopping = true;
    const child = this.#child;
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      this.#send({ type: 'stop' });
      const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
      await exited;
      clearTimeout(timer);
    }
    await removeSandboxNetns(this.netnsPath);
  }
}

/** What the control plane configures for every sandbox's network. */
export interface NetworkOptions {
  readonly hostsFile?: string;
  readonly maxConnections?: number;
  /** The policy point's memory bound, which the control plane's cgroup for it enforces. */
  readonly memory?: NetworkMemoryOptions;
  /** Extra CAs (PEM) a host a secret is bound to may chain to, besides the system's (tests). */
  readonly upstreamCa?: string;
}

/** The policy point's memory bound's parts: `baseBytes + share x the sandbox's memory limit`. */
export interface NetworkMemoryOptions {
  /** What any policy point may use whatever its sandbox's limit (default 128 MiB). */
  readonly baseBytes?: number;
  /** The part of the sandbox's memory limit added to it (default 1/16). */
  readonly share?: number;
}
