// Host uids leased to sandboxes, one table for the whole host (every data directory, every process): a
// sandbox's processes run under a uid no other sandbox has, so the kernel's per-user limits (inotify
// instances and watches, message-queue bytes, RLIMIT_NPROC) are its own. A SQLite file in a root-only
// host directory: its transactions (BEGIN IMMEDIATE, a file lock the kernel drops with a dead process)
// make "find a free uid and take it" atomic across processes, with no lock file of our own to go stale.
//
// A lease belongs to an owner (host-facts.ts): a sandbox's directory for the sandbox's whole life (its
// delta's files are owned by the uid, so a restarted sandbox must get the same one back), or a process for
// what it starts ahead (docker's pooled containers), moved to the sandbox that takes it. Destroy releases
// it. A lease whose owner is gone without releasing it (a crash) is taken back only when no process of
// the host runs under the uid (or its gid) any more.
import { chmodSync, mkdirSync, renameSync } from 'node:fs';
import { posix } from 'node:path';
import Database from 'better-sqlite3';
import { InvalidArgumentError, UnavailableError } from '@agentfense/protocol';
import type { HostUser } from '@agentfense/protocol';
import { hostAccountIds, idsInUse, ownerExists } from './host-facts.js';

/** The host-wide lease table. On disk (not /run): a stopped sandbox keeps its uid across a reboot. */
export const DEFAULT_HOST_IDS_FILE = '/var/lib/agentfense/host-ids.db';

/**
 * The uids leased by default: 2,000,000,001 to 2,000,065,536, far above login users, Debian's reserved
 * ranges and the usual subordinate-id ranges (100000 + 65536·n). 2,000,000,000 itself is the docker
 * runtime's fixed user when no lease is given, so it is left out.
 */
export const DEFAULT_UID_RANGE: UidRange = { first: 2_000_000_001, count: 65_536 };

/** Environment variable with another range, `FIRST-LAST` (inclusive). */
export const UID_RANGE_ENV = 'AGENTFENSE_UID_RANGE';

/** Uids `first` .. `first + count - 1`; each sandbox's gid is its uid. */
export interface UidRange {
  readonly first: number;
  readonly count: number;
}

/** Largest uid a lease may hand out (4294967295 is the kernel's "no uid"). */
const MAX_ID = 4_294_967_294;
/** Lowest first uid of a range: below are login users and the system range. */
const MIN_FIRST = 65_536;
/** How long a process waits for another's transaction on the table. */
const BUSY_TIMEOUT_MS = 5_000;
/** The table's layout; a file written by a newer layout is refused. */
const LAYOUT_VERSION = 1;

/** Parses `FIRST-LAST` (AGENTFENSE_UID_RANGE); undefined or empty: the default range. */
export function parseUidRange(value: string | undefined): UidRange {
  if (value === undefined || value.trim() === '') return DEFAULT_UID_RANGE;
  const m = /^\s*(\d{1,10})\s*-\s*(\d{1,10})\s*$/.exec(value);
  const first = Number(m?.[1]);
  const last = Number(m?.[2]);
  if (m === null || first < MIN_FIRST || last > MAX_ID || last < first) {
    throw new InvalidArgumentError(
      `${UID_RANGE_ENV} must be FIRST-LAST with ${String(MIN_FIRST)} <= FIRST <= LAST <= ${String(MAX_ID)}, got ${JSON.stringify(value)}`,
    );
  }
  return { first, count: last - first + 1 };
}

/** What the table consults about the host (host-facts.ts); replaced in unit tests. */
export interface HostFacts {
  readonly accounts: () => ReadonlySet<number>;
  readonly inUse: () => ReadonlySet<number>;
  readonly ownerExists: (owner: string) => boolean;
}

const HOST: HostFacts = { accounts: hostAccountIds, inUse: idsInUse, ownerExists };

export interface HostIdLeasesOptions {
  /** Default DEFAULT_HOST_IDS_FILE; its directory is made root-only. */
  readonly file?: string;
  /** Default: AGENTFENSE_UID_RANGE, else DEFAULT_UID_RANGE. */
  readonly range?: UidRange;
  readonly host?: HostFacts;
}

/** The host-wide table of uids leased to sandboxes (one handle per process is enough). */
export class HostIdLeases {
  readonly #db: Database.Database;
  readonly #range: UidRange;
  readonly #host: HostFacts;
  /** The ids processes run under, read at most once per transaction (reset when one begins). */
  #inUse: ReadonlySet<number> | undefined;

  private constructor(db: Database.Database, range: UidRange, host: HostFacts) {
    this.#db = db;
    this.#range = range;
    this.#host = host;
  }

  /** Opens (creating if needed) the table. */
  static open(options: HostIdLeasesOptions = {}): HostIdLeases {
    const file = options.file ?? DEFAULT_HOST_IDS_FILE;
    const range = options.range ?? parseUidRange(process.env[UID_RANGE_ENV]);
    let db: Database.Database;
    try {
      db = HostIdLeases.#connect(file);
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (code !== 'SQLITE_CORRUPT' && code !== 'SQLITE_NOTADB') throw err;
      // A kernel crash (no fsync, below) can leave the file damaged: a new table, the old kept aside.
      // Sandboxes re-take their recorded uids at their next start.
      renameSync(file, `${file}.damaged-${String(Date.now())}`);
      db = HostIdLeases.#connect(file);
    }
    return new HostIdLeases(db, range, options.host ?? HOST);
  }

  /** Opens the file, sets it up for speed and makes its layout if it has none. */
  static #connect(file: string): Database.Database {
    let db: Database.Database;
    try {
      mkdirSync(posix.dirname(file), { recursive: true, mode: 0o700 });
      db = new Database(file);
      chmodSync(file, 0o600);
    } catch (err) {
      throw new UnavailableError(
        `cannot open the host's table of sandbox uids ${file} (needs root): ${(err as Error).message}`,
        { cause: err },
      );
    }
    try {
      db.pragma(`busy_timeout = ${String(BUSY_TIMEOUT_MS)}`);
      // No fsync (synchronous OFF): it cost ~12 ms per lease on this host, on every sandbox's start. A
      // process that dies mid-transaction still rolls back (the journal is in the page cache); only a
      // kernel crash or power cut can lose the last leases, and every process of theirs is gone then
      // too (a sandbox re-takes its recorded uid at its next start). A rollback journal, not WAL:
      // opening and closing a WAL database cost more than the lease (a one-shot `run` opens it once).
      db.pragma('journal_mode = TRUNCATE');
      db.pragma('synchronous = OFF');
      // The layout is made once; later opens only read its version (no write on a start's path).
      if (db.pragma('user_version', { simple: true }) !== LAYOUT_VERSION) HostIdLeases.#layout(db, file);
    } catch (err) {
      db.close();
      throw err;
    }
    return db;
  }

  /** Creates the tables (or refuses a newer layout), in one transaction. */
  static #layout(db: Database.Database, file: string): void {
    db.transaction(() => {
      const version = db.pragma('user_version', { simple: true }) as number;
      if (version > LAYOUT_VERSION) {
        throw new UnavailableError(
          `the host's table of sandbox uids ${file} has layout ${String(version)}, newer than this release knows (${String(LAYOUT_VERSION)})`,
        );
      }
      db.exec(`
        CREATE TABLE IF NOT EXISTS leases (
          uid       INTEGER PRIMARY KEY,
          owner     TEXT NOT NULL,
          leased_at INTEGER NOT NULL
        );
        CREATE INDEX IF NOT EXISTS leases_by_owner ON leases (owner);
        CREATE TABLE IF NOT EXISTS cursor (id INTEGER PRIMARY KEY CHECK (id = 0), next INTEGER NOT NULL);
      `);
      db.pragma(`user_version = ${String(LAYOUT_VERSION)}`);
    }).immediate();
  }

  /**
   * The uid leased to `owner`: `recorded` (the one its files are owned by) when given, else the one it
   * already holds, else a new one. A new one is the next free uid of the range after the last one
   * handed out (so a released uid is reused as late as possible), never a host account's. Throws
   * UnavailableError when the recorded uid is another live owner's, or when the range is used up.
   */
  lease(owner: string, recorded?: HostUser): HostUser {
    return this.#db
      .transaction((): HostUser => {
        // Processes change between transactions: scan again in this one if needed.
        this.#inUse = undefined;
        if (recorded !== undefined) return this.#claim(owner, recorded);
        const held = this.#db.prepare('SELECT uid FROM leases WHERE owner = ?').get(owner) as
          { uid: number } | undefined;
        if (held !== undefined) return { uid: held.uid, gid: held.uid };
        return this.#allocate(owner);
      })
      .immediate();
  }

  /** Moves the lease of `uid` from `from` to `to` (a pooled container's uid becomes its sandbox's). */
  transfer(uid: number, from: string, to: string): void {
    const moved = this.#db
      .prepare('UPDATE leases SET owner = ?, leased_at = ? WHERE uid = ? AND owner = ?')
      .run(to, Date.now(), uid, from);
    if (moved.changes !== 1) {
      throw new UnavailableError(`host uid ${String(uid)} is not leased to ${from} any more`);
    }
  }

  /** Releases every lease of `owner` (its sandbox destroyed, its pooled container removed). */
  release(owner: string): void {
    this.#db.prepare('DELETE FROM leases WHERE owner = ?').run(owner);
  }

  /** The lease of `uid`, if any (tests, diagnostics). */
  ownerOf(uid: number): string | undefined {
    const row = this.#db.prepare('SELECT owner FROM leases WHERE uid = ?').get(uid) as
      { owner: string } | undefined;
    return row?.owner;
  }

  close(): void {
    this.#db.close();
  }

  /** Re-takes the uid an owner's files are owned by (inside a transaction). */
  #claim(owner: string, recorded: HostUser): HostUser {
    const { uid } = recorded;
    if (!Number.isSafeInteger(uid) || uid <= 0 || uid > MAX_ID || this.#host.accounts().has(uid)) {
      throw new UnavailableError(`host uid ${String(uid)} cannot be a sandbox's (a host account has it)`);
    }
    const row = this.#db.prepare('SELECT owner FROM leases WHERE uid = ?').get(uid) as
      { owner: string } | undefined;
    if (row !== undefined && row.owner !== owner && !this.#reclaimable(row.owner, uid)) {
      throw new UnavailableError(
        `host uid ${String(uid)}, which this sandbox's files are owned by, is leased to ${row.owner}`,
      );
    }
    this.#db
      .prepare('INSERT OR REPLACE INTO leases (uid, owner, leased_at) VALUES (?, ?, ?)')
      .run(uid, owner, Date.now());
    return recorded;
  }

  /** A new uid for `owner` (inside a transaction). */
  #allocate(owner: string): HostUser {
    const { first, count } = this.#range;
    const cursor = this.#db.prepare('SELECT next FROM cursor WHERE id = 0').get() as
      { next: number } | undefined;
    const start = cursor === undefined ? 0 : cursor.next % count;
    const accounts = this.#host.accounts();
    const ownerOf = this.#db.prepare('SELECT owner FROM leases WHERE uid = ?');
    for (let i = 0; i < count; i++) {
      const slot = (start + i) % count;
      const uid = first + slot;
      if (accounts.has(uid)) continue;
      const row = ownerOf.get(uid) as { owner: string } | undefined;
      if (row !== undefined && !this.#reclaimable(row.owner, uid)) continue;
      this.#db
        .prepare('INSERT OR REPLACE INTO leases (uid, owner, leased_at) VALUES (?, ?, ?)')
        .run(uid, owner, Date.now());
      this.#db
        .prepare(
          'INSERT INTO cursor (id, next) VALUES (0, ?) ON CONFLICT (id) DO UPDATE SET next = excluded.next',
        )
        .run((slot + 1) % count);
      return { uid, gid: uid };
    }
    throw new UnavailableError(
      `every host uid from ${String(first)} to ${String(first + count - 1)} is leased to a sandbox: destroy sandboxes, or give a larger range in ${UID_RANGE_ENV}`,
    );
  }

  /** A lease whose owner is gone, of a uid (and gid) no process runs under: free to take. */
  #reclaimable(owner: string, uid: number): boolean {
    if (this.#host.ownerExists(owner)) return false;
    // One scan per transaction at most: it reads every process of the host.
    this.#inUse ??= this.#host.inUse();
    return !this.#inUse.has(uid);
  }
}
