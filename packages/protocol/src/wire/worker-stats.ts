// What a worker reports about itself in answer to `stats`: activity per FUSE op, memory, CPU, the
// features its FUSE connection negotiated and its last entry warm-up.

/** Per-operation counters of the worker's filesystem handlers. */
export interface OpStats {
  readonly count: number;
  readonly errors: number;
  /** Median latency in microseconds. */
  readonly p50Us: number;
  /** 99th percentile latency in microseconds. */
  readonly p99Us: number;
}

/** The worker's resource and activity report. */
export interface WorkerStats {
  readonly uptimeMs: number;
  /** Keyed by FUSE op name ('lookup', 'read', ...). */
  readonly ops: Readonly<Record<string, OpStats>>;
  readonly rssBytes: number;
  /** Proportional set size from /proc/self/smaps_rollup; null (or absent) where the kernel lacks it. */
  readonly pssBytes?: number | null;
  readonly openHandles: number;
  /** CPU time the worker process has used (user + system, every thread), in ms: benches divide it by requests. */
  readonly cpuMs?: number;
  /** What the worker's FUSE connection negotiated at mount (absent before the mount). */
  readonly fuse?: FuseConnStats;
  /** The last entry warm-up that finished (absent until one has): see MountParams.warmupEntries. */
  readonly warmup?: WarmupStats;
}

/** One entry warm-up: the tree listed into the kernel's dcache after the sandbox's first access. */
export interface WarmupStats {
  /** Names listed (each now known to the kernel with its attributes). */
  readonly entries: number;
  readonly directories: number;
  /**
   * Names listed as directories that were something else when the walk came to open them (a symlink
   * swapped in meanwhile): refused, never followed.
   */
  readonly refused: number;
  /** From the first access to the end of the walk. */
  readonly ms: number;
  /** complete: every visible directory was listed; budget: warmupEntries reached; stopped: ended early. */
  readonly end: 'complete' | 'budget' | 'stopped';
}

/** The FUSE protocol features a mount got: each is detected at mount, and off where the kernel lacks it. */
export interface FuseConnStats {
  /** libfuse's version, e.g. "3.14.0". */
  readonly libfuse: string;
  /** The protocol version the kernel offered, e.g. "7.45". */
  readonly kernelProtocol: string;
  /** Bytes per WRITE/READ request. */
  readonly maxWrite: number;
  /** Feature name -> in use (maxPages, writebackCache, readdirplus, parallelDirops, noOpen, ...). */
  readonly features: Readonly<Record<string, boolean>>;
  /** Features left off on purpose (off by default, or AGENTFENSE_FUSE_DISABLE) though the kernel may offer them. */
  readonly disabled: readonly string[];
}
