// Public shapes of sandboxes: states, create options, records and exec options.
import type { EnforcedLimits, ExecOptions, PermissionRule, ResourceLimits } from '@agentfense/protocol';
import type { NetworkPolicy, NetworkPolicyInput, SecretBinding } from '@agentfense/network';
import type { SecretSource } from '../secret-sources.js';

/** contract §6: PENDING → RUNNING ⇄ STOPPED; any → ERROR. */
export const SANDBOX_STATES = ['PENDING', 'RUNNING', 'STOPPED', 'ERROR'] as const;
export type SandboxState = (typeof SANDBOX_STATES)[number];

/** What `createSandbox` takes. */
export interface CreateSandboxOptions {
  readonly codebaseId: string;
  /** Explicit rules (validated now; the error names the rule's index). Exclusive with `preset`. */
  readonly rules?: readonly unknown[];
  /** A preset name; `agent-safe` when neither this nor `rules` is given. */
  readonly preset?: string;
  /** A key of the control plane's `runtimes` map; default 'bwrap'. */
  readonly runtime?: string;
  /** Container image (docker runtime only); default the runtime's base image. */
  readonly image?: string;
  /**
   * The network policy: `false`/absent = none (a loopback of its own only), `true` = open (any public
   * destination), or `{ mode, rules, presets }` (docs/network.md). Never the host's network.
   */
  readonly network?: boolean | NetworkPolicyInput;
  readonly resources?: ResourceLimits;
  /** Stored and filterable; keys and values are strings. */
  readonly labels?: Readonly<Record<string, string>>;
  /** Seconds until the reaper destroys the sandbox. */
  readonly expiresIn?: number;
  /** Environment of every command in the sandbox (before per-exec env). Never reported back. */
  readonly env?: Readonly<Record<string, string>>;
  /** Audit allowed accesses too (denials always are). */
  readonly auditAllowed?: boolean;
  /**
   * Secrets the sandbox may use but never read (docs/secrets.md): each bound to hosts, its value given
   * or read (in this process) from `env`, `file` or `command`; the sandbox gets `NAME=<placeholder>`,
   * and its policy point puts the value into HTTPS requests to those hosts. Values stay in this
   * process's memory; the store keeps each binding and source, so a control plane opened later reads a
   * value again from its source (one given by value cannot be: the sandbox then starts without it).
   */
  readonly secrets?: readonly SecretSource[];
}

/** Where a kept secret's value is read again by a process that does not hold it. */
export type SecretOrigin =
  { readonly env: string } | { readonly file: string } | { readonly command: readonly string[] };

/** A secret as the store keeps it: binding, placeholder and source, never its value. */
export interface StoredSecret extends SecretBinding {
  readonly placeholder: string;
  /** null: given by value, which is never stored. */
  readonly source: SecretOrigin | null;
}

/** A secret as a sandbox's record shows it: where it may be used and where its value comes from. */
export interface SecretInfo extends SecretBinding {
  /** `value`: given by value, so a control plane opened later cannot read it again. */
  readonly source: 'env' | 'file' | 'command' | 'value';
}

/** A sandbox as clients see it. Times are ISO 8601 strings. */
export interface SandboxInfo {
  readonly id: string;
  readonly codebaseId: string;
  readonly state: SandboxState;
  /** Why it is in this state (the ERROR reason, what stopped it); null when nothing to say. */
  readonly stateReason: string | null;
  readonly runtime: string;
  /** Container image (docker); null: the runtime's default. */
  readonly image: string | null;
  readonly rules: readonly PermissionRule[];
  /** Whether the sandbox reaches anything beyond its own loopback (network mode other than none). */
  readonly network: boolean;
  /** The network policy in force (mode and rules, presets expanded). */
  readonly networkPolicy: NetworkPolicy;
  /** Its secrets' names, bindings and sources (never a value). */
  readonly secrets: readonly SecretInfo[];
  readonly resources: ResourceLimits;
  /** The limits the runtime enforced at the last start, and how (null before the first start). */
  readonly limits: EnforcedLimits | null;
  readonly labels: Readonly<Record<string, string>>;
  readonly auditAllowed: boolean;
  readonly expiresAt: string | null;
  readonly createdAt: string;
  readonly updatedAt: string;
  readonly startedAt: string | null;
  readonly stoppedAt: string | null;
  /** Worker restarts under this sandbox since it was created. */
  readonly restartCount: number;
  readonly lastRestartAt: string | null;
  readonly lastRestartReason: string | null;
  /** The control-plane process that runs it (null when nobody does). */
  readonly ownerPid: number | null;
  readonly workerPid: number | null;
}

/** Filters and pagination of `listSandboxes`. */
export interface ListSandboxesOptions {
  readonly codebaseId?: string;
  readonly state?: SandboxState;
  /** Every given label must match exactly. */
  readonly labels?: Readonly<Record<string, string>>;
  /** 1..1000, default 100. */
  readonly pageSize?: number;
  /** The `nextPageToken` of the previous page. */
  readonly pageToken?: string;
  /** Only sandboxes over codebases API clients may reach (what the HTTP, gRPC and /mcp faces list). */
  readonly apiVisibleOnly?: boolean;
}

/** One page of a listing. */
export interface Page<T> {
  readonly items: readonly T[];
  /** Pass as `pageToken` for the next page; null on the last page. */
  readonly nextPageToken: string | null;
}

/** Options of `exec` (the runtime's, without the command, which is given separately). */
export type SandboxExecOptions = Omit<ExecOptions, 'command'>;
