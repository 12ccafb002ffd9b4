// Sandbox rows: prepared statements over `sandboxes` and `sandbox_labels`.
import type { Statement } from 'better-sqlite3';
import { NotFoundError } from '@agentfense/protocol';
import type { EnforcedLimits, PermissionRule, ResourceLimits } from '@agentfense/protocol';
import { NETWORK_NONE } from '@agentfense/network';
import type { NetworkPolicy } from '@agentfense/network';
import { secretBinding } from '@agentfense/network';
import type { SandboxInfo, SandboxState, StoredSecret } from '../sandboxes/types.js';
import type { Db } from './db.js';
import type { PageCursor } from './pagination.js';

/**
 * A sandbox row, decoded: the JSON and flag columns come back typed (store/ is the only place that knows
 * how they are stored). Times are ms since the epoch.
 */
export interface SandboxRow {
  readonly id: string;
  readonly codebase_id: string;
  readonly state: SandboxState;
  readonly state_reason: string | null;
  readonly runtime: string;
  /** Container image (docker); null for the runtime's default. */
  readonly image: string | null;
  readonly rules: readonly PermissionRule[];
  /** Stored as `network_policy` (JSON) with `network` (0/1: mode other than none) beside it. */
  readonly network: NetworkPolicy;
  readonly resources: ResourceLimits;
  readonly env: Readonly<Record<string, string>>;
  readonly audit_allowed: boolean;
  readonly labels: Readonly<Record<string, string>>;
  readonly expires_at: number | null;
  readonly created_at: number;
  readonly updated_at: number;
  readonly started_at: number | null;
  readonly stopped_at: number | null;
  readonly owner_pid: number | null;
  readonly owner_start: string | null;
  /** Which ControlPlane object in the owning process (several may share a process). */
  readonly owner_instance: string | null;
  readonly worker_pid: number | null;
  readonly worker_start: string | null;
  readonly restart_count: number;
  readonly last_restart_at: number | null;
  readonly last_restart_reason: string | null;
  /** The runtime's EnforcedLimits at the last start; null before. */
  readonly limits: EnforcedLimits | null;
  /** Its secrets without their values (null in older rows: none). */
  readonly secrets: readonly StoredSecret[];
}

/** The columns of a new sandbox. */
export type NewSandboxRow = Pick<
  SandboxRow,
  | 'id'
  | 'codebase_id'
  | 'state'
  | 'state_reason'
  | 'runtime'
  | 'image'
  | 'rules'
  | 'network'
  | 'resources'
  | 'env'
  | 'audit_allowed'
  | 'labels'
  | 'expires_at'
  | 'created_at'
  | 'updated_at'
  | 'secrets'
> &
  /** A sandbox owned from birth (a start follows at once): its owner, in the same statement. */
  Partial<Pick<SandboxRow, 'owner_pid' | 'owner_start' | 'owner_instance'>>;

/** Columns a caller may update, by name. */
export type SandboxPatch = Partial<Omit<SandboxRow, 'id' | 'codebase_id' | 'created_at' | 'updated_at'>>;

/** The row as SQLite holds it: JSON columns as text, flags as 0/1. */
type StoredRow = Omit<
  SandboxRow,
  'rules' | 'network' | 'resources' | 'env' | 'audit_allowed' | 'labels' | 'limits' | 'secrets'
> & {
  readonly rules: string;
  readonly network: number;
  readonly network_policy: string | null;
  readonly resources: string;
  readonly env: string;
  readonly audit_allowed: number;
  readonly labels: string;
  readonly limits: string | null;
  readonly secrets: string | null;
};

/** JSON columns and how each is written (null stays SQL NULL). */
const JSON_COLUMNS = new Set<string>(['rules', 'resources', 'env', 'labels', 'limits', 'secrets']);
/** Boolean columns, stored as 0/1. */
const FLAG_COLUMNS = new Set<string>(['audit_allowed']);

/** Decodes a stored row; the JSON columns were written by encode() only, so their shape is known. */
function decode(row: StoredRow): SandboxRow {
  const { network_policy: policy, ...rest } = row;
  return {
    ...rest,
    rules: JSON.parse(row.rules) as PermissionRule[],
    network:
      policy !== null
        ? (JSON.parse(policy) as NetworkPolicy)
        : row.network !== 0
          ? { mode: 'open', rules: [] }
          : NETWORK_NONE,
    resources: JSON.parse(row.resources) as ResourceLimits,
    env: JSON.parse(row.env) as Record<string, string>,
    audit_allowed: row.audit_allowed !== 0,
    labels: JSON.parse(row.labels) as Record<string, string>,
    limits: row.limits === null ? null : (JSON.parse(row.limits) as EnforcedLimits),
    secrets: row.secrets === null ? [] : (JSON.parse(row.secrets) as StoredSecret[]),
  };
}

/** Encodes typed column values for SQLite (JSON text, 0/1 flags). */
function encode(values: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(values)) {
    if (value === undefined) continue;
    if (key === 'network') {
      const policy = value as NetworkPolicy;
      out['network'] = policy.mode === 'none' ? 0 : 1;
      out['network_policy'] = JSON.stringify(policy);
    } else if (JSON_COLUMNS.has(key)) out[key] = value === null ? null : JSON.stringify(value);
    else if (FLAG_COLUMNS.has(key)) out[key] = value === true ? 1 : 0;
    else out[key] = value;
  }
  return out;
}

const PATCHABLE = new Set<string>([
  'state',
  'state_reason',
  'runtime',
  'rules',
  'network',
  'resources',
  'env',
  'audit_allowed',
  'labels',
  'expires_at',
  'started_at',
  'stopped_at',
  'owner_pid',
  'owner_start',
  'owner_instance',
  'worker_pid',
  'worker_start',
  'restart_count',
  'last_restart_at',
  'last_restart_reason',
  'limits',
  // A secret's kept source, replaced when setSecret gives it a value (bindings and never a value).
  'secrets',
]);

export interface SandboxQuery {
  readonly codebaseId?: string | undefined;
  readonly state?: SandboxState | undefined;
  readonly labels?: Readonly<Record<string, string>> | undefined;
  /** Leaves out sandboxes that carry any of these label keys. */
  readonly withoutLabelKeys?: readonly string[] | undefined;
  /** Only sandboxes over codebases of this visibility (the API faces ask for 'api'). */
  readonly codebaseVisibility?: 'api' | 'local' | undefined;
  readonly after?: PageCursor | undefined;
  readonly limit: number;
}

export class SandboxStore {
  readonly #db: Db;
  readonly #insert: Statement;
  readonly #insertLabel: Statement;
  readonly #get: Statement<[string], StoredRow>;
  readonly #byCodebase: Statement<[string], { n: number }>;
  readonly #delete: Statement<[string]>;
  readonly #all: Statement<[], StoredRow>;
  readonly #expired: Statement<[number], StoredRow>;

  constructor(db: Db) {
    this.#db = db;
    this.#insert = db.prepare(
      `INSERT INTO sandboxes (id, codebase_id, state, state_reason, runtime, image, rules, network, network_policy,
         resources, env, audit_allowed, labels, expires_at, created_at, updated_at, owner_pid, owner_start,
         owner_instance, secrets)
       VALUES (@id, @codebase_id, @state, @state_reason, @runtime, @image, @rules, @network, @network_policy,
         @resources, @env,
         @audit_allowed, @labels, @expires_at, @created_at, @updated_at, @owner_pid, @owner_start, @owner_instance,
         @secrets)`,
    );
    this.#insertLabel = db.prepare('INSERT INTO sandbox_labels (sandbox_id, key, value) VALUES (?, ?, ?)');
    this.#get = db.prepare('SELECT * FROM sandboxes WHERE id = ?');
    this.#byCodebase = db.prepare('SELECT COUNT(*) AS n FROM sandboxes WHERE codebase_id = ?');
    this.#delete = db.prepare('DELETE FROM sandboxes WHERE id = ?');
    this.#all = db.prepare('SELECT * FROM sandboxes ORDER BY created_at, id');
    this.#expired = db.prepare(
      'SELECT * FROM sandboxes WHERE expires_at IS NOT NULL AND expires_at <= ? ORDER BY expires_at',
    );
  }

  /** Inserts a sandbox and its labels (filterable through sandbox_labels) in one transaction. */
  insert(row: NewSandboxRow): void {
    this.#db.transaction(() => {
      this.#insert.run(encode({ owner_pid: null, owner_start: null, owner_instance: null, ...row }));
      for (const [key, value] of Object.entries(row.labels)) this.#insertLabel.run(row.id, key, value);
    })();
  }

  find(id: string): SandboxRow | undefined {
    const row = this.#get.get(id);
    return row === undefined ? undefined : decode(row);
  }

  /** The row; NotFoundError naming the id when there is none. */
  get(id: string): SandboxRow {
    const row = this.find(id);
    if (row === undefined) throw new NotFoundError(`sandbox ${id} not found`, { details: { id } });
    return row;
  }

  /** Updates the given columns (and updated_at). */
  update(id: string, patch: SandboxPatch): void {
    const keys = Object.keys(patch).filter((k) => (patch as Record<string, unknown>)[k] !== undefined);
    for (const key of keys) if (!PATCHABLE.has(key)) throw new Error(`not a patchable column: ${key}`);
    const sets = [
      ...keys.flatMap((k) =>
        k === 'network' ? ['network = @network', 'network_policy = @network_policy'] : [`${k} = @${k}`],
      ),
      'updated_at = @updated_at',
    ];
    // Column names come from PATCHABLE only; values are bound parameters.
    this.#db.prepare(`UPDATE sandboxes SET ${sets.join(', ')} WHERE id = @id`).run({
      ...encode(patch),
      id,
      updated_at: Date.now(),
    });
  }

  /**
   * Runs `fn` with the current row inside an IMMEDIATE transaction: no other process can change the row
   * between the read and the writes `fn` makes (used to claim ownership of a sandbox).
   */
  withRow<T>(id: string, fn: (row: SandboxRow) => T): T {
    return this.#db.transaction(() => fn(this.get(id))).immediate();
  }

  /**
   * Removes one label from the row's labels and from sandbox_labels in one transaction (listings and the
   * reported labels change together). False when the sandbox has no such label.
   */
  removeLabel(id: string, key: string): boolean {
    return this.#db
      .transaction(() => {
        const row = this.get(id);
        if (!Object.hasOwn(row.labels, key)) return false;
        const labels = Object.fromEntries(Object.entries(row.labels).filter(([k]) => k !== key));
        this.update(id, { labels });
        this.#db.prepare('DELETE FROM sandbox_labels WHERE sandbox_id = ? AND key = ?').run(id, key);
        return true;
      })
      .immediate();
  }

  /** Ids of the codebases used by a sandbox that carries the label key. */
  codebasesWithLabel(key: string): string[] {
    return this.#db
      .prepare<[string], { codebase_id: string }>(
        `SELECT DISTINCT s.codebase_id FROM sandboxes s
           JOIN sandbox_labels l ON l.sandbox_id = s.id WHERE l.key = ?`,
      )
      .all(key)
      .map((r) => r.codebase_id);
  }

  delete(id: string): void {
    this.#delete.run(id);
  }

  countByCodebase(codebaseId: string): number {
    return this.#byCodebase.get(codebaseId)?.n ?? 0;
  }

  all(): SandboxRow[] {
    return this.#all.all().map(decode);
  }

  expired(now: number): SandboxRow[] {
    return this.#expired.all(now).map(decode);
  }

  /** Filtered, keyset-paginated listing ordered by (created_at, id). */
  query(q: SandboxQuery): SandboxRow[] {
    const where: string[] = [];
    const params: unknown[] = [];
    if (q.codebaseId !== undefined) {
      where.push('s.codebase_id = ?');
      params.push(q.codebaseId);
    }
    if (q.state !== undefined) {
      where.push('s.state = ?');
      params.push(q.state);
    }
    for (const [key, value] of Object.entries(q.labels ?? {})) {
      where.push(
        'EXISTS (SELECT 1 FROM sandbox_labels l WHERE l.sandbox_id = s.id AND l.key = ? AND l.value = ?)',
      );
      params.push(key, value);
    }
    if (q.codebaseVisibility !== undefined) {
      where.push('s.codebase_id IN (SELECT c.id FROM codebases c WHERE c.visibility = ?)');
      params.push(q.codebaseVisibility);
    }
    for (const key of q.withoutLabelKeys ?? []) {
      where.push('NOT EXISTS (SELECT 1 FROM sandbox_labels l WHERE l.sandbox_id = s.id AND l.key = ?)');
      params.push(key);
    }
    if (q.after !== undefined) {
      where.push('(s.created_at > ? OR (s.created_at = ? AND s.id > ?))');
      params.push(q.after.createdAt, q.after.createdAt, q.after.id);
    }
    const sql = `SELECT s.* FROM sandboxes s ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''}
      ORDER BY s.created_at, s.id LIMIT ?`;
    return this.#db
      .prepare<unknown[], StoredRow>(sql)
      .all(...params, q.limit)
      .map(decode);
  }
}

function iso(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}

/** The public form of a row (env is never reported back). */
export function sandboxInfo(row: SandboxRow): SandboxInfo {
  return {
    id: row.id,
    codebaseId: row.codebase_id,
    state: row.state,
    stateReason: row.state_reason,
    runtime: row.runtime,
    image: row.image,
    rules: row.rules,
    network: row.network.mode !== 'none',
    networkPolicy: row.network,
    secrets: row.secrets.map((s) => ({
      ...secretBinding(s),
      source:
        s.source === null ? 'value' : 'env' in s.source ? 'env' : 'file' in s.source ? 'file' : 'command',
    })),
    resources: row.resources,
    limits: row.limits,
    labels: row.labels,
    auditAllowed: row.audit_allowed,
    expiresAt: iso(row.expires_at),
    createdAt: new Date(row.created_at).toISOString(),
    updatedAt: new Date(row.updated_at).toISOString(),
    startedAt: iso(row.started_at),
    stoppedAt: iso(row.stopped_at),
    restartCount: row.restart_count,
    lastRestartAt: iso(row.last_restart_at),
    lastRestartReason: row.last_restart_reason,
    ownerPid: row.owner_pid,
    workerPid: row.worker_pid,
  };
}
