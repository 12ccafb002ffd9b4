// The control planes `Sandbox.fromLocal` opens by itself (docs/decisions.md "The library's front door shares
// one control plane per data directory"): one per data directory and set of plane options in this process,
// opened on first use (concurrent first calls share the one open), counted per sandbox, and kept open for an
// idle period after its last sandbox goes, so a loop of fromLocal calls does not open the data directory
// (SQLite, recovery, the runtime's checks, a worker spawn) each time. What an idle plane keeps never holds
// the process open: it is closed when the process has nothing else to do (`beforeExit`), after the idle
// period, or by `closeIdle()`.
import process from 'node:process';
import type { Logger } from 'pino';
import { ControlPlane } from '../control-plane.js';
import type { ControlPlaneOptions } from '../control-plane-options.js';
import { resolveDataDir } from '../paths.js';
import type { RuntimeMap } from '../sandboxes/runtimes.js';
import type { SupervisionOptions } from '@agentfense/fuse-worker';

/** Seconds an unused shared control plane stays open (`0`: closed with its last sandbox). */
export const LIBRARY_IDLE_ENV = 'AGENTFENSE_LIBRARY_IDLE';
/** The default idle period: long enough for an agent's pause between two sandboxes. */
export const DEFAULT_LIBRARY_IDLE_MS = 30_000;

/** The options of fromLocal that open its control plane: calls that agree on them share one. */
export interface SharedPlaneOptions {
  readonly dataDir?: string | undefined;
  readonly runtimes?: RuntimeMap | undefined;
  readonly supervision?: SupervisionOptions | undefined;
  readonly logger?: Logger | undefined;
  /** What the first call will start at once (ControlPlane.open's `prewarm`); not part of the key. */
  readonly prewarm?: ControlPlaneOptions['prewarm'];
}

/** One sandbox's use of a shared plane; `release()` once, when the sandbox is gone. */
export interface PlaneLease {
  readonly plane: ControlPlane;
  release(): Promise<void>;
  /** Another lease on the same plane (a fork's: the plane stays open while either sandbox lives). */
  share(): PlaneLease;
}

/** Hooks of the one who uses the planes (the library's spare sandboxes live and die with a plane). */
export interface SharedPlaneHooks {
  /** Called before an idle plane closes; what it started must be gone when this resolves. */
  readonly beforeClose?: (plane: ControlPlane) => Promise<void>;
}

interface Entry {
  readonly key: string;
  readonly opening: Promise<ControlPlane>;
  users: number;
  timer: NodeJS.Timeout | undefined;
}

/** The idle period from the environment (seconds), else the default. */
export function libraryIdleMs(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env[LIBRARY_IDLE_ENV];
  if (raw === undefined || raw === '') return DEFAULT_LIBRARY_IDLE_MS;
  const seconds = Number(raw);
  return Number.isFinite(seconds) && seconds >= 0 ? seconds * 1000 : DEFAULT_LIBRARY_IDLE_MS;
}

export class SharedPlanes {
  readonly #hooks: SharedPlaneHooks;
  readonly #entries = new Map<string, Entry>();
  /** Planes of a key being closed: a new one for the key waits (both would use `<data>/docker-pool/<pid>-…`). */
  readonly #closing = new Map<string, Promise<void>>();
  /** Object options compared by identity: a number per object seen. */
  readonly #ids = new WeakMap<object, number>();
  #nextId = 1;
  #exitHooked = false;

  constructor(hooks: SharedPlaneHooks = {}) {
    this.#hooks = hooks;
  }

  /** The plane for `options`, opened now if none is (or one is opening: then that one). */
  async acquire(options: SharedPlaneOptions): Promise<PlaneLease> {
    const key = this.#keyOf(options);
    for (;;) {
      await this.#closing.get(key);
      let entry = this.#entries.get(key);
      if (entry === undefined) {
        entry = { key, opening: ControlPlane.open(planeOptions(options)), users: 0, timer: undefined };
        this.#entries.set(key, entry);
        this.#hookExit();
      }
      entry.users++;
      clearTimeout(entry.timer);
      entry.timer = undefined;
      let plane: ControlPlane;
      try {
        plane = await entry.opening;
      } catch (err) {
        if (this.#entries.get(key) === entry) this.#entries.delete(key);
        throw err;
      }
      if (!plane.closed) return this.#lease(entry, plane);
      // Its user closed it (`sb.controlPlane.close()`): forget it and open another.
      if (this.#entries.get(key) === entry) this.#entries.delete(key);
    }
  }

  /** Closes every plane no sandbox uses now (and waits for those already closing). */
  async closeIdle(): Promise<void> {
    for (const entry of [...this.#entries.values()]) if (entry.users === 0) this.#close(entry);
    await Promise.all([...this.#closing.values()]);
  }

  /** Planes open now (diagnostics, tests). */
  get size(): number {
    return this.#entries.size;
  }

  #lease(entry: Entry, plane: ControlPlane): PlaneLease {
    let released = false;
    return {
      plane,
      share: () => {
        entry.users++;
        return this.#lease(entry, plane);
      },
      release: async () => {
        if (released) return;
        released = true;
        entry.users--;
        if (entry.users > 0) return;
        const idleMs = libraryIdleMs();
        if (idleMs === 0) {
          this.#close(entry);
          await this.#closing.get(entry.key);
          return;
        }
        // Unref'd: an idle plane never keeps the process alive (beforeExit closes it then).
        entry.timer = setTimeout(() => this.#close(entry), idleMs).unref();
      },
    };
  }

  #close(entry: Entry): void {
    if (this.#entries.get(entry.key) !== entry || entry.users > 0) return;
    this.#entries.delete(entry.key);
    clearTimeout(entry.timer);
    const done = (async () => {
      const plane = await entry.opening.catch(() => undefined); // a failed open: its caller got the error
      if (plane === undefined) return;
      try {
        await this.#hooks.beforeClose?.(plane);
      } catch (err) {
        plane.logger.warn({ err }, 'closing an idle control plane: its spare was not removed');
      }
      await plane
        .close()
        .catch((err: unknown) => plane.logger.error({ err }, 'closing an idle control plane failed'));
    })().finally(() => {
      if (this.#closing.get(entry.key) === done) this.#closing.delete(entry.key);
    });
    this.#closing.set(entry.key, done);
  }

  /**
   * The process ran out of work with idle planes open: close them (the work that adds keeps it alive
   * until they are closed; the next beforeExit finds none and the process exits).
   */
  #hookExit(): void {
    if (this.#exitHooked) return;
    this.#exitHooked = true;
    process.on('beforeExit', () => {
      if ([...this.#entries.values()].some((e) => e.users === 0)) void this.closeIdle();
    });
  }

  #keyOf(options: SharedPlaneOptions): string {
    const id = (value: object | undefined): number | null => {
      if (value === undefined) return null;
      let n = this.#ids.get(value);
      if (n === undefined) this.#ids.set(value, (n = this.#nextId++));
      return n;
    };
    return JSON.stringify([
      resolveDataDir({ dataDir: options.dataDir }),
      id(options.runtimes),
      id(options.logger),
      options.supervision ?? null,
    ]);
  }
}

function planeOptions(options: SharedPlaneOptions): ControlPlaneOptions {
  return {
    ...(options.dataDir === undefined ? {} : { dataDir: options.dataDir }),
    ...(options.runtimes === undefined ? {} : { runtimes: options.runtimes }),
    ...(options.supervision === undefined ? {} : { supervision: options.supervision }),
    ...(options.logger === undefined ? {} : { logger: options.logger }),
    ...(options.prewarm === undefined ? {} : { prewarm: options.prewarm }),
  };
}
