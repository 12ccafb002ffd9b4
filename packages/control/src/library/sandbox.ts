// The library's high-level API (contract §7): `await using sb = await Sandbox.fromLocal(dir)` links the
// directory as a codebase (nothing copied), creates and starts a sandbox over it, and on dispose destroys
// both records and the sandbox's data — the user's directory is never touched except by an explicit commit.
import type {
  CheckpointInfo,
  CheckpointOptions,
  ForkOptions,
  RestoreOptions,
} from '../sandboxes/checkpoints.js';
import type { NetworkAuditEvent, NetworkPolicyInput } from '@agentfense/network';
import { StringDecoder } from 'node:string_decoder';
import type { Logger } from 'pino';
import type {
  AuditEvent,
  ChangeEntry,
  CommitMode,
  CommitResult,
  ExecResult,
  ResourceLimits,
} from '@agentfense/protocol';
import type { ControlPlane } from '../control-plane.js';
import type { AuditQuery } from '@agentfense/audit-trail';
import type { RuntimeMap } from '../sandboxes/runtimes.js';
import type { SecretValueSource } from '../sandboxes/secret-values.js';
import type { SupervisionOptions } from '@agentfense/fuse-worker';
import type { SandboxExecOptions, SandboxInfo } from '../sandboxes/types.js';
import type { CreateSessionOptions } from '@agentfense/sessions';
import type { Session } from '@agentfense/sessions';
import { ExecStream } from './exec-stream.js';
import { SharedPlanes } from './shared-planes.js';
import type { PlaneLease } from './shared-planes.js';
import { LibrarySpares } from './spares.js';
import type { SecretSource } from '../secret-sources.js';
import type { SpareSpec } from '../sandboxes/spare.js';
import { decodeOutput, splitEncoding } from '@agentfense/sessions';
import type { BytesOutput, OutputEncoding, RunResult, TextOutput } from '@agentfense/sessions';

export interface FromLocalOptions {
  /** A preset name (default `agent-safe`); exclusive with `rules`. */
  readonly preset?: string;
  /** Explicit permission rules (contract §1). */
  readonly rules?: readonly unknown[];
  /** Default 'bwrap'. */
  readonly runtime?: string;
  /** Container image (docker runtime only). */
  readonly image?: string;
  /**
   * The network policy: absent/false = none (a loopback of its own), true = open (any public
   * destination), or `{ mode: 'allow', rules: [{ action: 'allow', host: 'registry.npmjs.org' }],
   * presets: ['model-apis'] }` (docs/network.md). Never the host's network.
   */
  readonly network?: boolean | NetworkPolicyInput;
  /**
   * Secrets the sandbox may use but never read (docs/secrets.md): `{ name: 'OPENAI_API_KEY', hosts:
   * ['api.openai.com'], env: 'OPENAI_API_KEY' }` (or `value`, `file`, `command: [argv]`). The sandbox
   * sees `NAME=af-secret-…`; the network policy must allow the hosts.
   */
  readonly secrets?: readonly SecretSource[];
  readonly resources?: ResourceLimits;
  readonly env?: Readonly<Record<string, string>>;
  readonly labels?: Readonly<Record<string, string>>;
  readonly expiresIn?: number;
  readonly auditAllowed?: boolean;
  /**
   * Data directory of the control plane (ignored with `controlPlane`). Calls that name the same one (and
   * the same `runtimes`, `supervision` and `logger`) share one control plane in this process.
   */
  readonly dataDir?: string;
  /** Use this control plane instead of the shared one (it is then never closed by destroy()). */
  readonly controlPlane?: ControlPlane;
  /** Options of the shared control plane (calls with other ones get a control plane of their own). */
  readonly runtimes?: RuntimeMap;
  readonly supervision?: SupervisionOptions;
  readonly logger?: Logger;
}

/** Options of `run`: the exec options (`timeoutMs`, `stdin`, `env`, `cwd`, `signal`, …) and the output encoding. */
export type RunOptions = SandboxExecOptions & TextOutput;
/** Options of `run` for output as bytes. */
export type RunBytesOptions = SandboxExecOptions & BytesOutput;
/** Options of `stream` (chunks arrive through the iterator, not callbacks). */
export type StreamOptions = Omit<SandboxExecOptions, 'onStdout' | 'onStderr'>;

/** A running sandbox over a local directory. */
export class Sandbox implements AsyncDisposable {
  readonly id: string;
  readonly codebaseId: string;
  readonly controlPlane: ControlPlane;
  /** This sandbox's use of the shared control plane (none when one was passed in). */
  readonly #lease: PlaneLease | undefined;
  /** What fromLocal was asked for (a spare for the next identical call is made from it). */
  readonly #spec: SpareSpec;
  /** The sandboxes over this codebase record (this one and its forks): the last one gone deletes it. */
  readonly #codebase: { holders: number };
  readonly #fork: boolean;
  #destroyed: Promise<void> | undefined;

  /** Spare sandboxes of the shared control planes (spares.ts), removed before their plane closes. */
  static readonly #spares = new LibrarySpares();
  /** The control planes fromLocal opens itself, one per data directory (shared-planes.ts). */
  static readonly #planes = new SharedPlanes({ beforeClose: (plane) => Sandbox.#spares.close(plane) });

  private constructor(options: {
    id: string;
    codebaseId: string;
    controlPlane: ControlPlane;
    lease: PlaneLease | undefined;
    spec: SpareSpec;
    codebase?: { holders: number };
    /** Made by fork(): no spare is made for it (fromLocal was never asked for it). */
    fork?: boolean;
  }) {
    this.#fork = options.fork === true;
    this.id = options.id;
    this.codebaseId = options.codebaseId;
    this.controlPlane = options.controlPlane;
    this.#lease = options.lease;
    this.#spec = options.spec;
    this.#codebase = options.codebase ?? { holders: 0 };
    this.#codebase.holders++;
  }

  /**
   * Links `dir` as a codebase, creates a sandbox over it with the given policy, and starts it. Without
   * `controlPlane`, sandboxes of one data directory share one control plane in this process, opened by
   * the first call and closed a while after the last of them is destroyed (`closeIdle()` closes it now).
   */
  static async fromLocal(dir: string, options: FromLocalOptions = {}): Promise<Sandbox> {
    const lease =
      options.controlPlane === undefined
        ? await Sandbox.#planes.acquire({
            dataDir: options.dataDir,
            runtimes: options.runtimes,
            supervision: options.supervision,
            logger: options.logger,
            // The first call starts its sandbox at once: its worker spawns, its runtime checks the host and
            // (docker) starts a container for it while the data directory opens.
            prewarm: {
              runtime: options.runtime ?? 'bwrap',
              ...(options.image === undefined ? {} : { image: options.image }),
              ...(options.resources === undefined ? {} : { resources: options.resources }),
            },
          })
        : undefined;
    const cp = options.controlPlane ?? (lease as PlaneLease).plane;
    const spec: SpareSpec = {
      dir,
      options: pick(options, [
        'preset',
        'rules',
        'runtime',
        'image',
        'network',
        'resources',
        'env',
        'labels',
        'expiresIn',
        'auditAllowed',
      ]),
    };
    let codebaseId: string | undefined;
    let sandboxId: string | undefined;
    try {
      // Read by the control plane at create (this process), which keeps each source for a later start.
      const secrets = options.secrets ?? [];
      // A spare started ahead for exactly this request (library/spares.ts): only on the shared plane, and
      // never for one with secrets (a spare has none; secrets are never part of a spare's spec).
      const taken =
        lease === undefined || secrets.length > 0 ? undefined : await Sandbox.#spares.take(cp, spec);
      if (taken !== undefined) {
        return new Sandbox({
          id: taken.sandboxId,
          codebaseId: taken.codebaseId,
          controlPlane: cp,
          lease,
          spec,
        });
      }
      codebaseId = (await cp.linkCodebase({ path: dir })).id;
      sandboxId = (
        await cp.createSandbox({ codebaseId, ...spec.options, ...(secrets.length > 0 ? { secrets } : {}) })
      ).id;
      await cp.startSandbox(sandboxId);
      return new Sandbox({ id: sandboxId, codebaseId, controlPlane: cp, lease, spec });
    } catch (err) {
      if (sandboxId !== undefined) await cp.destroySandbox(sandboxId).catch(() => undefined);
      if (codebaseId !== undefined) await cp.deleteCodebase(codebaseId).catch(() => undefined);
      await lease?.release();
      throw err;
    }
  }

  /**
   * Closes the control planes fromLocal opened that no sandbox uses any more, now instead of after their
   * idle period (`AGENTFENSE_LIBRARY_IDLE` seconds, default 30): before removing their data directory, for
   * instance. They also close by themselves when the process has nothing else to do.
   */
  static closeIdle(): Promise<void> {
    return Sandbox.#planes.closeIdle();
  }

  /** The sandbox's current record (state, restarts, labels...). */
  info(): Promise<SandboxInfo> {
    return this.controlPlane.getSandbox(this.id);
  }

  /**
   * Runs a command (a string through `/bin/sh -c`, or an argv array) and returns its result: stdout and
   * stderr as UTF-8 strings, or as Buffers with `{ encoding: 'buffer' }`. `timeoutMs` kills the command's
   * process tree (the result says `timedOut`).
   */
  run(command: string | readonly string[], options?: RunOptions): Promise<RunResult>;
  run(command: string | readonly string[], options: RunBytesOptions): Promise<ExecResult>;
  async run(
    command: string | readonly string[],
    options: SandboxExecOptions & { readonly encoding?: OutputEncoding } = {},
  ): Promise<RunResult | ExecResult> {
    const { encoding, rest } = splitEncoding(options);
    const result = await this.controlPlane.run(this.id, command, { ...rest, encoding: 'buffer' });
    return encoding === 'buffer' ? result : decodeOutput(result);
  }

  /** @deprecated Use `run(command, { ...options, encoding: 'buffer' })` (same result: output as Buffers). */
  exec(command: string | readonly string[], options: SandboxExecOptions = {}): Promise<ExecResult> {
    return this.run(command, { ...options, encoding: 'buffer' });
  }

  /**
   * Runs a command and delivers its output as it comes: iterate the returned stream for
   * `{ stream: 'stdout' | 'stderr', data }` chunks (strings, or Buffers with `{ encoding: 'buffer' }`);
   * `await stream.result` for the exit code and the full output, in the same encoding.
   */
  stream(
    command: string | readonly string[],
    options?: StreamOptions & TextOutput,
  ): ExecStream<string, RunResult>;
  stream(
    command: string | readonly string[],
    options: StreamOptions & BytesOutput,
  ): ExecStream<Buffer, ExecResult>;
  stream(
    command: string | readonly string[],
    options: StreamOptions & { readonly encoding?: OutputEncoding } = {},
  ): ExecStream<string, RunResult> | ExecStream<Buffer, ExecResult> {
    const { encoding, rest } = splitEncoding(options);
    const bytes = (onStdout: (chunk: Buffer) => void, onStderr: (chunk: Buffer) => void) =>
      this.run(command, { ...rest, onStdout, onStderr, encoding: 'buffer' });
    if (encoding === 'buffer') return new ExecStream<Buffer, ExecResult>(bytes);
    return new ExecStream<string, RunResult>(async (onStdout, onStderr) => {
      // One decoder per stream: a character split across chunks is delivered whole, in the later chunk.
      const out = new StringDecoder('utf8');
      const err = new StringDecoder('utf8');
      const text = (decoder: StringDecoder, deliver: (chunk: string) => void) => (chunk: Buffer) => {
        const data = decoder.write(chunk);
        if (data !== '') deliver(data);
      };
      const result = await bytes(text(out, onStdout), text(err, onStderr));
      const tailOut = out.end();
      const tailErr = err.end();
      if (tailOut !== '') onStdout(tailOut);
      if (tailErr !== '') onStderr(tailErr);
      return decodeOutput(result);
    });
  }

  /** @deprecated Use `stream(command, { ...options, encoding: 'buffer' })` (same chunks and result: Buffers). */
  execStream(command: string | readonly string[], options: StreamOptions = {}): ExecStream {
    return this.stream(command, { ...options, encoding: 'buffer' });
  }

  /** A persistent shell in this sandbox (`cd`, `export`, functions persist); closed when the sandbox stops. */
  session(options?: CreateSessionOptions): Promise<Session> {
    return this.controlPlane.createSession(this.id, options);
  }

  changes(): Promise<readonly ChangeEntry[]> {
    return this.controlPlane.changes(this.id);
  }
  diff(options?: { paths?: readonly string[] }): Promise<{ diff: string; binary: readonly string[] }> {
    return this.controlPlane.diff(this.id, options);
  }
  /** Applies the changes to the directory (conflicts reported unless `mode: 'last-writer-wins'`). */
  commit(options?: { mode?: CommitMode; paths?: readonly string[] }): Promise<CommitResult> {
    return this.controlPlane.commit(this.id, options);
  }
  discard(options?: { paths?: readonly string[] }): Promise<void> {
    return this.controlPlane.discard(this.id, options);
  }
  /** Freezes the files as they are now; `restore(checkpoint.id)` comes back to them. No copying. */
  checkpoint(options?: CheckpointOptions): Promise<CheckpointInfo> {
    return this.controlPlane.checkpoint(this.id, options);
  }
  /** This sandbox's checkpoints, oldest first. */
  checkpoints(): Promise<CheckpointInfo[]> {
    return this.controlPlane.listCheckpoints(this.id);
  }
  /** Puts the files back to a checkpoint (changes since dropped, or kept as a checkpoint: `keepCurrent`). */
  restore(checkpointId: string, options?: RestoreOptions): Promise<{ kept?: CheckpointInfo }> {
    return this.controlPlane.restoreCheckpoint(this.id, checkpointId, options);
  }
  deleteCheckpoint(checkpointId: string): Promise<void> {
    return this.controlPlane.deleteCheckpoint(this.id, checkpointId);
  }
  /**
   * New started sandboxes whose files start as this one's now (or as `checkpointId`), each with changes
   * of its own; its settings unless given. Each is destroyed on its own; the directory's record goes
   * with the last of them.
   */
  async fork(options: ForkOptions = {}): Promise<Sandbox[]> {
    const infos = await this.controlPlane.forkSandbox(this.id, { ...options, start: true });
    return infos.map(
      (info) =>
        new Sandbox({
          id: info.id,
          codebaseId: this.codebaseId,
          controlPlane: this.controlPlane,
          lease: this.#lease?.share(),
          spec: this.#spec,
          codebase: this.#codebase,
          fork: true,
        }),
    );
  }
  /** Reads a file as the sandbox sees it (codebase path: `/src/a.ts` or `src/a.ts`), through the rules. */
  readFile(path: string): Promise<Buffer> {
    return this.controlPlane.readFile(this.id, codebasePath(path));
  }
  /** Writes a file into the sandbox's changes, through the rules. */
  writeFile(path: string, data: Uint8Array | string): Promise<void> {
    return this.controlPlane.writeFile(this.id, codebasePath(path), data);
  }
  /** Replaces the rules; they take effect at once. */
  async setRules(
    policy: readonly unknown[] | { rules?: readonly unknown[]; preset?: string },
  ): Promise<void> {
    await this.controlPlane.setRules(
      this.id,
      Array.isArray(policy) ? { rules: policy } : (policy as { rules?: readonly unknown[]; preset?: string }),
    );
  }
  /** Replaces the network policy; connections it no longer allows are closed at once. */
  async setNetwork(policy: boolean | NetworkPolicyInput): Promise<void> {
    await this.controlPlane.setNetwork(this.id, policy);
  }
  /**
   * Gives (or replaces) the value of one of its declared secrets, running or not: `{ value }`, or `{ env }`,
   * `{ file }`, `{ command }` read in this process (docs/secrets.md). A running sandbox uses it at once.
   */
  async setSecret(name: string, source: SecretValueSource): Promise<void> {
    await this.controlPlane.setSecret(this.id, name, source);
  }
  audit(query?: AuditQuery): Promise<AuditEvent[]> {
    return this.controlPlane.audit(this.id, query);
  }
  /** The network's records: each connection (name, address, port, rule, bytes) and refused DNS question. */
  networkAudit(query?: AuditQuery): Promise<NetworkAuditEvent[]> {
    return this.controlPlane.audit(this.id, { ...query, kind: 'network' });
  }

  /**
   * Destroys the sandbox (its changes are dropped unless committed) and removes the linked codebase
   * record; the shared control plane closes a while after its last sandbox is destroyed. Idempotent.
   */
  destroy(): Promise<void> {
    this.#destroyed ??= (async () => {
      try {
        // The next identical call may find a spare (on the shared plane, for a request that repeats): it
        // starts now, alongside this teardown, to be ready sooner.
        if (this.#lease !== undefined && !this.#fork) Sandbox.#spares.finished(this.controlPlane, this.#spec);
        await this.controlPlane.destroySandbox(this.id);
        if (--this.#codebase.holders === 0) await this.controlPlane.deleteCodebase(this.codebaseId);
      } finally {
        await this.#lease?.release();
      }
    })();
    return this.#destroyed;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.destroy();
  }
}

function codebasePath(path: string): string {
  return path.startsWith('/') ? path : `/${path}`;
}

function pick<T extends object, K extends keyof T>(obj: T, keys: readonly K[]): Partial<Pick<T, K>> {
  const out: Partial<Pick<T, K>> = {};
  for (const key of keys) if (obj[key] !== undefined) out[key] = obj[key];
  return out;
}
