// The runtime contract shared by bwrap and Docker: how the control plane starts an isolated environment
// around a sandbox's /workspace and runs processes in it. Both runtimes pass one contract test suite
// (test/runtime/contract.ts); anything a caller can observe is specified here.
import { availableParallelism } from 'node:os';
import type { OutputCallback } from './runtime/output-stream.js';

/** Resource limits of a sandbox; every field optional (absent = no limit). Same names as the HTTP API. */
export interface ResourceLimits {
  /** Memory limit in bytes (the command is OOM-killed above it). */
  readonly memoryBytes?: number;
  /** CPU quota in microseconds per 100 ms period (50_000 = half a core). */
  readonly cpuQuota?: number;
  /** Relative CPU weight (cgroup v1 cpu.shares scale, 1024 = default). */
  readonly cpuShares?: number;
  /** Maximum number of processes/threads. */
  readonly pidsLimit?: number;
  /**
   * Bytes the sandbox's delta (its writes under /workspace) may hold; enforced by the worker (ENOSPC /
   * EDQUOT), passed to it as MountParams.diskQuotaBytes.
   */
  readonly diskBytes?: number;
  /** Size of the sandbox's private /tmp (a tmpfs; its pages count against memoryBytes too). */
  readonly tmpBytes?: number;
}

const GiB = 1024 ** 3;

/**
 * The limits every sandbox gets unless it asks otherwise (docs/contract.md §4; ControlPlane option
 * `defaultResources` and `serve --default-*` flags replace them):
 * - pidsLimit 1024: a build with `make -j` and a language server fit; a fork bomb does not.
 * - memoryBytes 4 GiB: a TypeScript or Rust build fits; one sandbox cannot push the host into swap/OOM.
 * - cpuQuota: all host CPUs but one (at least one core), so the control plane and workers stay responsive.
 * - diskBytes 10 GiB: a node_modules or a target/ directory fits; the host disk does not fill up.
 * - tmpBytes 1 GiB: /tmp is RAM (tmpfs), charged to the memory limit as well.
 */
export function defaultResources(hostCpus: number = availableParallelism()): DefaultResources {
  return {
    pidsLimit: 1024,
    memoryBytes: 4 * GiB,
    cpuQuota: Math.max(1, hostCpus - 1) * CPU_PERIOD_US,
    diskBytes: 10 * GiB,
    tmpBytes: 1 * GiB,
  };
}

/** The CFS period the contract's cpuQuota is expressed against (µs): 100_000 = one full core. */
export const CPU_PERIOD_US = 100_000;

/** The limits that have a default (cpuShares has none: the kernel's 1024 is the default weight). */
export type DefaultResources = Required<Omit<ResourceLimits, 'cpuShares'>>;

/** The defaults on this host (computed once when the module loads). */
export const DEFAULT_RESOURCES: DefaultResources = defaultResources();

/** Which limits a runtime actually enforces for a sandbox, and how (reported back to the user). */
export interface EnforcedLimits {
  readonly memoryBytes: number | null;
  readonly cpuQuota: number | null;
  readonly cpuShares: number | null;
  readonly pidsLimit: number | null;
  /** Size of the private /tmp tmpfs (absent: the runtime does not report it). */
  readonly tmpBytes?: number | null;
  /** The delta's quota (enforced by the worker; filled in by the control plane). */
  readonly diskBytes?: number | null;
  /** How they are enforced, e.g. 'cgroup-v1', 'cgroup-v2', 'docker', or 'none'. */
  readonly mechanism: string;
}

/** Nothing enforced: no limit asked for, or none the host can enforce. */
export const NO_LIMITS: EnforcedLimits = {
  memoryBytes: null,
  cpuQuota: null,
  cpuShares: null,
  pidsLimit: null,
  mechanism: 'none',
};

/** What a runtime needs to start a sandbox environment. */
export interface RuntimeStartOptions {
  /** `sb_<uuid>`; used for names (cgroups, containers), never trusted as a path by itself. */
  readonly sandboxId: string;
  /**
   * Host directory that is bound at /workspace. It is the FUSE mountpoint, placed inside a directory
   * that is a shared mount, so a worker restarted under a running sandbox propagates into it.
   */
  readonly workspaceHostPath: string;
  /**
   * The file of the sandbox's network namespace (a network policy's, packages/network). With the trait
   * `netns: 'joins'` the host made the namespace there and every process of the sandbox runs in it; with
   * `'publishes'` the runtime binds the namespace its sandbox already has (a loopback only) there before
   * start() returns, for the host to police. Absent: a private namespace with only a loopback. A sandbox
   * never shares the host's network namespace.
   */
  readonly netns?: string;
  readonly resources?: ResourceLimits;
  /** Container image (Docker only). */
  readonly image?: string;
  /** Environment given to every process of this sandbox, before per-exec `env`. */
  readonly env?: Readonly<Record<string, string>>;
  /** Host directory for runtime scratch state (cgroup names, container ids); owned by the control plane. */
  readonly stateDir: string;
  /**
   * The host uid/gid of this sandbox alone, leased host-wide by the control plane (trait
   * `perSandboxUser`): every process of the sandbox runs under it, so per-uid kernel limits (inotify,
   * message queues, RLIMIT_NPROC) are the sandbox's own. Absent: the runtime's shared default user.
   */
  readonly user?: HostUser;
  /**
   * Read-only files made visible at `dest` inside (the sandbox's CA bundle when it has secrets); their
   * contents are public, only root may change them. A runtime that cannot give them refuses the start, as
   * it refuses a `dest` validateSandboxFiles refuses (a runtime's own mount points included).
   */
  readonly files?: readonly { readonly dest: string; readonly content: string }[];
}

/** A host uid and gid (numeric; never 0). */
export interface HostUser {
  readonly uid: number;
  readonly gid: number;
}

/** A host user a runtime set aside for one sandbox before its start (SandboxRuntime.reserveUser). */
export interface ReservedUser extends HostUser {
  /** The lease owner the runtime took the uid under; the control plane moves the lease to the sandbox. */
  readonly leaseOwner: string;
}

/** One command to run inside a started sandbox. */
export interface ExecOptions {
  /** A string runs through `/bin/sh -c`; an array is the argv itself (no shell). */
  readonly command: string | readonly string[];
  /** Bytes written to the command's stdin, then stdin is closed. Absent: stdin is empty. */
  readonly stdin?: string | Uint8Array;
  /** Extra environment for this command (on top of the sandbox's). */
  readonly env?: Readonly<Record<string, string>>;
  /** Working directory inside the sandbox; default `/workspace`. */
  readonly cwd?: string;
  /** Kill the whole process tree after this many milliseconds; the result says `timedOut`. */
  readonly timeoutMs?: number;
  /** Aborting kills the process tree like a timeout (result: `cancelled`). */
  readonly signal?: AbortSignal;
  /**
   * Streaming: called with each chunk as it arrives (the result still holds the output, up to the cap).
   * A returned promise is back-pressure: no more of that output is read until it settles, so a command
   * whose output is not taken blocks on its pipe, as it would writing to a terminal nobody reads.
   */
  readonly onStdout?: OutputCallback;
  readonly onStderr?: OutputCallback;
  /**
   * false: the result's stdout and stderr are empty and the output cap does not apply; the streaming
   * callbacks are the only consumers (a stream of any length, its memory bounded by back-pressure).
   * Default true.
   */
  readonly keepOutput?: boolean;
}

/** How a command ran: which wrapper and the wrapped argv with host paths replaced by placeholders. */
export interface ExecAudit {
  readonly runtime: 'bwrap' | 'docker';
  /** e.g. ['bwrap', '--unshare-user', ..., '--bind', '<workspace>', '/workspace', ...]. */
  readonly argv: readonly string[];
  readonly limits: EnforcedLimits;
}

/** The outcome of one command. */
export interface ExecResult {
  readonly stdout: Buffer;
  readonly stderr: Buffer;
  /** The exit status; null when killed by a signal. */
  readonly exitCode: number | null;
  /** The signal that ended it (e.g. 'SIGKILL'), or null. */
  readonly signal: string | null;
  readonly timedOut: boolean;
  readonly cancelled: boolean;
  /** The kernel's OOM killer ended it (memory limit). */
  readonly oomKilled: boolean;
  readonly durationMs: number;
  readonly audit: ExecAudit;
}

/** A long-lived process inside the sandbox (sessions use this): raw pipes, no timeout. */
export interface SpawnOptions {
  readonly argv: readonly string[];
  readonly env?: Readonly<Record<string, string>>;
  readonly cwd?: string;
}

/** A process started with `spawn`. */
export interface SandboxProcess {
  readonly pid: number;
  readonly stdin: NodeJS.WritableStream;
  readonly stdout: NodeJS.ReadableStream;
  readonly stderr: NodeJS.ReadableStream;
  /** Resolves when the process (and, for bwrap, its namespace) is gone. Never rejects. */
  wait(): Promise<{ exitCode: number | null; signal: string | null }>;
  /** Kills the whole process tree. Idempotent. */
  kill(): Promise<void>;
  readonly audit: ExecAudit;
}

/** A running sandbox environment. */
export interface RuntimeInstance {
  readonly sandboxId: string;
  readonly limits: EnforcedLimits;
  exec(options: ExecOptions): Promise<ExecResult>;
  spawn(options: SpawnOptions): Promise<SandboxProcess>;
  /** Kills every process of the sandbox and releases its resources (cgroups, container). Idempotent. */
  stop(): Promise<void>;
  /**
   * Whether the instance's processes and connections on the host keep the control plane's event loop
   * alive (yes by default). A sandbox started ahead and idle (the library's spare) need not: its process
   * closes it before exiting. Optional: without it the instance always keeps the process alive.
   */
  keepProcessAlive?(keep: boolean): void;
}

/**
 * What the control plane must know about a runtime to drive it, so it never branches on runtime names
 * (a runtime an embedder registers states its own needs).
 */
export interface RuntimeTraits {
  /**
   * The sandbox's processes reach the workspace with a host uid other than the worker's (root): the FUSE
   * mount needs `allow_other`.
   */
  readonly needsAllowOther: boolean;
  /**
   * The host uid/gid the worker reports as owner of every file, so the kernel's mode-bit checks apply to
   * the sandbox's user as the owner; null: the worker's own uid/gid (a runtime that maps its user to it).
   */
  readonly hostOwner: { readonly uid: number; readonly gid: number } | null;
  /**
   * start() runs the sandbox under RuntimeStartOptions.user when given (a uid of its own); false: every
   * sandbox runs as the runtime's shared user (a control plane that is not root).
   */
  readonly perSandboxUser: boolean;
  /**
   * start() does not touch the workspace path (each command binds it when it starts), so the control
   * plane may start the runtime while the worker is still mounting; false: start after the mount.
   */
  readonly startsBeforeMount: boolean;
  /** Takes RuntimeStartOptions.image; a sandbox asking another runtime for an image is refused. */
  readonly acceptsImage: boolean;
  /**
   * Long-lived processes (sessions) see a worker that was restarted and remounted under them (the control
   * plane then has each session re-enter its cwd); false: the control plane closes them (reason
   * `worker-restarted`) when the worker restarts.
   */
  readonly sessionsSurviveWorkerRestart: boolean;
  /** How a network policy's namespace comes to be (RuntimeStartOptions.netns). */
  readonly netns: 'joins' | 'publishes';
}

/** A way of isolating commands (bwrap, docker). */
export interface SandboxRuntime {
  readonly name: 'bwrap' | 'docker';
  readonly traits: RuntimeTraits;
  /** Throws UnavailableError naming what is missing and how to fix it. */
  check(): Promise<void>;
  start(options: RuntimeStartOptions): Promise<RuntimeInstance>;
  /**
   * Removes what a crashed control plane may have left of this runtime in a sandbox's stateDir (mounts
   * in particular), so the directory can be removed recursively. Called before any unmount/removal of a
   * sandbox's directories, whether or not this process started it. Idempotent; no-op when clean.
   */
  clearLeftovers(stateDir: string): Promise<void>;
  /**
   * Sets aside something started ahead for this sandbox (docker: an idle pooled container, whose uid was
   * leased when it was created) and returns its user, which the control plane then gives the sandbox
   * (mount owner, RuntimeStartOptions.user); undefined: nothing ready, the control plane leases a uid.
   * What is set aside and not started within a minute is removed. Optional.
   */
  reserveUser?(options: {
    readonly sandboxId: string;
    readonly image?: string;
    readonly resources?: ResourceLimits;
  }): Promise<ReservedUser | undefined>;
  /**
   * Removes what this runtime keeps ahead of time (docker's idle pooled containers). Sandboxes already
   * started are not affected (stop them first). Idempotent; optional: a runtime that keeps nothing
   * ahead need not have it.
   */
  close?(): Promise<void>;
  /**
   * Sandboxes of this kind are about to start (a control plane opened to start one at once): get ready
   * for them in the background, e.g. docker starts filling its container pool for that image and /tmp
   * size now. Optional; never throws (a failure shows in the start itself).
   */
  prepare?(kind: { readonly image?: string; readonly resources?: ResourceLimits }): void;
  /**
   * Finds and removes what crashed processes of this runtime left outside any sandbox's stateDir (docker:
   * pooled containers whose owner process is gone), resolving a description of each thing removed.
   * Called by `agentfense gc`; optional.
   */
  collectGarbage?(): Promise<string[]>;
}
