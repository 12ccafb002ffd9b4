// Entry warm-up: the first time something looks inside the mount, the worker lists the tree through its
// own mount, breadth first, up to a budget of entries. Each listing is a READDIRPLUS the kernel sends us,
// and the kernel links a dentry with attributes for every name in the answer (fuse_direntplus_link), so a
// later stat, open or exec of any of them is answered from the dcache with no LOOKUP round trip. That
// round trip is ~100-250 µs on this kind of machine against a native 2-3 µs dcache hit: `git status`, a
// build's mtime checks or an import system's probes in a fresh sandbox paid it once per file.
//
// Nothing is granted that a LOOKUP would not grant: the listings are ordinary READDIRPLUS requests,
// answered by readdir-plus.ts with the rules in force, the same decisions, mode bits and timeouts; hidden
// names are not listed (a stat of one is still a LOOKUP, answered ENOENT), and a rule change, discard or
// commit (invalidateAll) takes everything back as it does for entries a walker brought in.
//
// The walk is another process (native/af-walk.c), never a thread of the worker: a worker thread waiting
// inside a request on the worker's own mount can never finish once the worker is killed (only the dead
// worker could answer it), and the worker would stay a zombie holding /dev/fuse until someone aborted the
// connection (measured: kill -9 -> ~10 s until the control plane's health checks did). The walker is an
// ordinary client: when the worker dies its requests fail with ENOTCONN, and it dies with its parent.
//
// Host side: the walker is root in the host's namespaces, where a symlink inside the mount resolves to a
// host path. It opens every directory with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | ...) from the
// mountpoint's descriptor: a name the sandbox turned into a symlink after it was listed is refused by the
// kernel, never followed. Only directories are opened; no file is opened or stat'ed.
//
// When: armed by the first LOOKUP or listing after the mount (an untouched sandbox costs nothing), started
// once the sandbox has been quiet for START_QUIET_MS, and while it runs its listings are answered only in
// the sandbox's gaps (IDLE_GAP_MS): it uses the time an agent leaves between commands. Requests the
// binding answers in C (creates, writes, reads, lookups) count as the sandbox's too, though no handler
// here sees them.
// Bounds: one directory at a time, at most `budget` entries (checked between directories; kernel memory:
// a dentry and a FUSE inode, ~2.4 KB per entry measured, reclaimable; worker memory: the entries it now
// knows), stops at unmount and at an invalidation (armed again at the next access), and never runs while
// allowed accesses are audited (its own listings would be recorded as accesses).
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import type { ChildProcess } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import type { WarmupStats } from '@agentfense/protocol';

/** Entries listed at most per warm-up (about 16 MB of kernel memory at ~1 KB per entry). */
export const DEFAULT_WARMUP_ENTRIES = 16_384;
/**
 * The walker's listings are answered only once the sandbox has sent no request for this long: the worker's
 * one JS thread answers both, and a listing costs it ~100 lookups' worth of work, so a sandbox busy with
 * its own requests would otherwise wait behind the walk (measured: a first-stat loop racing the walk took
 * 300-400 µs per stat against 130-250 µs without the warm-up). Gaps of a few milliseconds are what an
 * agent's commands leave all the time; the walk runs in them.
 */
export const IDLE_GAP_MS = 2;
/**
 * The walk starts only once the sandbox has been quiet this long after its first access: what it does
 * right then (a cold `grep -r`, a build) is not competed with, and an agent's think time is seconds.
 * Measured without it, a walk started at the first access slowed a cold `grep -r` by 30-50 % (it ran
 * whenever grep read pages the store-ahead had put in the kernel's cache, which send no request).
 */
export const START_QUIET_MS = 200;

/**
 * The walker, built into the package's dist/ by scripts/build-af-walk.js: next to the worker's bundle
 * (dist/worker.js), or found from dist/fs/ or src/fs/ (tests).
 */
export const AF_WALK =
  ['./af-walk', '../af-walk', '../../dist/af-walk']
    .map((rel) => new URL(rel, import.meta.url).pathname)
    .find((path) => existsSync(path)) ?? new URL('./af-walk', import.meta.url).pathname;

export interface EntryWarmupOptions {
  /** The mount's host path (the control plane's, trusted). */
  readonly mountpoint: string;
  /** Entries to list at most. */
  readonly budget?: number;
  /** False while the walk must not run or go on (allowed-access audit). */
  readonly allowed: () => boolean;
  /** The invalidation generation: a walk that sees it move stops. */
  readonly generation: () => number;
  /**
   * A count of the sandbox's requests the binding answered in C, never seen by requestStarted (a tar -x's
   * CREATEs and WRITEs, a grep's READs): while it moves the sandbox is busy. Absent: none are.
   */
  readonly activity?: () => number;
  /** Called once per finished walk. */
  readonly onDone?: (summary: WarmupSummary) => void;
  /** Called when the walker cannot be started or fails (logged; the mount works as without warm-up). */
  readonly onError?: (err: Error) => void;
  /** The walker program (tests). */
  readonly program?: string;
}

/** What one walk did (the worker's `stats` shows the last one). */
export type WarmupSummary = WarmupStats;

/** The entry warm-up of one mount. */
export class EntryWarmup {
  readonly #options: EntryWarmupOptions;
  readonly #budget: number;
  /**
   * idle: no access since the mount or the last invalidation; armed: accessed, waiting for a quiet moment
   * to start; running; done: finished for this generation.
   */
  #state: 'idle' | 'armed' | 'running' | 'done' = 'idle';
  #startTimer: NodeJS.Timeout | undefined;
  #stopped = false;
  #child: ChildProcess | undefined;
  #walk: Promise<void> | undefined;
  /** performance.now() of the latest start or end of a sandbox's request (anyone's but the walker's). */
  #lastActivity = 0;
  /** The sandbox's requests being answered now. */
  #inFlight = 0;
  /** `activity()` when last looked at. */
  #activitySeen = 0;

  constructor(options: EntryWarmupOptions) {
    this.#options = options;
    this.#budget = options.budget ?? DEFAULT_WARMUP_ENTRIES;
  }

  /** The invalidation generation the running walk started in. */
  #runGeneration = 0;
  /**
   * The walker's pid from its spawn to its exit (cleared at 'exit', not 'close': the pid may be reused
   * as soon as it is reaped).
   */
  #walkerPid: number | undefined;

  /**
   * Whether a request comes from the walker: its requests are the worker's own, not the sandbox's. The pid
   * alone could be a recycled one; the walker also runs as host root, which no sandbox process ever does.
   */
  /** The walker's pid while one runs. */
  get walkerPid(): number | undefined {
    return this.#walkerPid;
  }

  /** Called as soon as the walker's pid is known and once it has exited (native-listings.ts skips it). */
  onWalkerPid: (() => void) | undefined;

  isWalker(caller: { readonly pid: number; readonly uid: number }): boolean {
    return caller.uid === 0 && this.#walkerPid !== undefined && caller.pid === this.#walkerPid;
  }

  /**
   * A request of `pid` starts (the binding calls this for every request): unless it is the walker's, the
   * sandbox is busy until `requestEnded()` (called once per true answer here) and for IDLE_GAP_MS after.
   */
  requestStarted(pid: number, uid: number): boolean {
    if (this.isWalker({ pid, uid })) return false;
    this.#inFlight++;
    this.#lastActivity = performance.now();
    return true;
  }

  /** The end of a request `requestStarted` counted. */
  requestEnded(): void {
    this.#inFlight--;
    this.#lastActivity = performance.now();
  }

  /**
   * Resolves once the sandbox has no request in flight and sent none for IDLE_GAP_MS (at once after
   * stop() or an invalidation: a sandbox that keeps the worker busy must not hold a listing made under
   * the old rules): a sandbox waiting for a READ that waits for the disk is busy, not idle.
   */
  async whenIdle(): Promise<void> {
    for (;;) {
      this.#noteActivity();
      const quiet = performance.now() - this.#lastActivity;
      if ((this.#inFlight === 0 && quiet >= IDLE_GAP_MS) || this.#stopped) return;
      if (this.#options.generation() !== this.#runGeneration) return;
      const wait = this.#inFlight === 0 ? Math.ceil(IDLE_GAP_MS - quiet) : IDLE_GAP_MS;
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }

  /** Something looked inside the mount: the walk starts at the next quiet moment, once per generation. */
  touch(): void {
    if (this.#state !== 'idle' || this.#stopped || this.#budget <= 0 || !this.#options.allowed()) return;
    this.#state = 'armed';
    this.#lastActivity = performance.now();
    this.#startWhenQuiet(START_QUIET_MS);
  }

  #startWhenQuiet(delay: number): void {
    this.#startTimer = setTimeout(() => {
      this.#startTimer = undefined;
      if (this.#state !== 'armed' || this.#stopped) return;
      this.#noteActivity();
      const quiet = performance.now() - this.#lastActivity;
      if (this.#inFlight > 0 || quiet < START_QUIET_MS) {
        this.#startWhenQuiet(this.#inFlight > 0 ? START_QUIET_MS : Math.ceil(START_QUIET_MS - quiet));
        return;
      }
      if (!this.#options.allowed()) {
        this.#state = 'idle';
        return;
      }
      this.#start();
    }, delay);
  }

  /**
   * Requests answered in C since the last look make the sandbox busy as of now. Measured without this,
   * the walk (a READDIRPLUS, openat and getdents per directory) ran throughout a tar -x whose every
   * request stayed in C, and the worker's CPU for the extract was 30-50 % higher.
   */
  #noteActivity(): void {
    const seen = this.#options.activity?.() ?? 0;
    if (seen === this.#activitySeen) return;
    this.#activitySeen = seen;
    this.#lastActivity = performance.now();
  }

  #start(): void {
    this.#state = 'running';
    const generation = this.#options.generation();
    this.#runGeneration = generation;
    this.#walk = this.#run().then((summary) => {
      this.#child = undefined;
      this.#walkerPid = undefined;
      // An invalidation during the walk (or after it) lets the next access start a new one.
      this.#state = this.#options.generation() === generation ? 'done' : 'idle';
      if (summary !== undefined) this.#options.onDone?.(summary);
    });
  }

  /**
   * The kernel forgot everything (invalidateAll: rules, discard, commit, allowed-access audit switched on):
   * a walk in progress ends, the next access warms again.
   */
  invalidated(): void {
    if (this.#state === 'done' || this.#state === 'armed') this.#state = 'idle';
    clearTimeout(this.#startTimer);
    this.#child?.kill('SIGKILL');
  }

  /** Unmount: no new walk, the current one is killed. Resolves when it has exited. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#startTimer);
    this.#child?.kill('SIGKILL');
    await this.#walk;
  }

  /** One walk; resolves with its summary (undefined when the walker could not be run). Never rejects. */
  #run(): Promise<WarmupSummary | undefined> {
    const started = performance.now();
    return new Promise((resolve) => {
      let out = '';
      let child: ChildProcess;
      try {
        child = spawn(this.#options.program ?? AF_WALK, [String(this.#budget), this.#options.mountpoint], {
          stdio: ['ignore', 'pipe', 'ignore'],
        });
      } catch (err) {
        this.#options.onError?.(err as Error);
        resolve(undefined);
        return;
      }
      this.#child = child;
      this.#walkerPid = child.pid;
      this.onWalkerPid?.();
      child.on('exit', () => {
        this.#walkerPid = undefined;
        this.onWalkerPid?.();
      });
      child.stdout?.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
      let failed = false;
      child.on('error', (err) => {
        // not started (ENOENT, EACCES: a build without the walker): the mount works as without warm-up
        failed = true;
        this.#options.onError?.(err);
      });
      child.on('close', (code, signal) => {
        const ms = performance.now() - started;
        if (failed) {
          resolve(undefined);
          return;
        }
        const m = /^(\d+) (\d+) (\d+) (complete|budget|stopped)\n$/.exec(out);
        if (m !== null && code === 0) {
          resolve({
            entries: Number(m[1]),
            directories: Number(m[2]),
            refused: Number(m[3]),
            ms,
            end: m[4] as WarmupSummary['end'],
          });
          return;
        }
        // Killed (stop, invalidation) or failed: what it did is not known.
        if (signal === null) this.#options.onError?.(new Error(`af-walk exited with status ${code}: ${out}`));
        resolve({ entries: 0, directories: 0, refused: 0, ms, end: 'stopped' });
      });
    });
  }
}
