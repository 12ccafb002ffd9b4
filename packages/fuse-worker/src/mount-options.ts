// The FUSE protocol features a worker's mount asks for, and what it reports about them (log, `stats`).
// Each feature is requested only where the kernel offers it (the binding checks the INIT capabilities),
// so an older kernel falls back feature by feature. AGENTFENSE_FUSE_DISABLE switches features off and
// AGENTFENSE_FUSE_ENABLE switches on the ones that are off by default (comma-separated names below):
// that is how the bench measures what each one buys.
import type { ConnInfo, LowLevelOptions } from '@agentfense/fuse-native';
import type { FuseConnStats } from '@agentfense/protocol';
import { InvalidArgumentError } from '@agentfense/protocol';

/** Features that can be switched off; the others (noOpen, noOpendir) are part of the permission design. */
// listingRefresh is the worker's own: a READ drops its directory's cached listing so the next listing
// (a READDIRPLUS) refreshes the attributes the READ made stale (fs/kernel-cache.ts noteRead).
// readahead too: the mount's read-ahead window raised to the request size (readahead-window.ts).
// listingReplay (needs listingRefresh): such a listing, when nothing changed, is the remembered answer
// handed again instead of one built anew (fs/listing-replay.ts).
// storeAhead (needs readdirplus): the read-ahead puts small read-only codebase files into the kernel's
// page cache (FUSE_NOTIFY_STORE), so a walker reads them without a READ (fs/store-ahead.ts).
// entryWarmup (needs readdirplus): after the first access the worker lists the tree through its own mount,
// so the kernel holds an entry for every visible name before the sandbox asks (fs/entry-warmup.ts).
// freshEntries (needs readdirplus): a listing sends the names whose entry and attributes the kernel holds
// fresh as plain entries, not as LOOKUP answers (fs/entry-freshness.ts).
// directWrites: a file the sandbox creates write-only is opened with FOPEN_DIRECT_IO, so its writes go to
// the worker without a copy into the mount's page cache (fs/namespace-ops.ts create, docs/decisions.md,
// "Files created write-only are written with direct I/O").
// nativeDirAttrs (needs nativeCreates): GETATTRs of the directories the lookup fast path marks are answered
// in C where the worker would shape nothing (the kernel drops a directory's attributes at each create in it).
// nativeUnlinks (needs nativeCreates): UNLINKs of regular files in those directories are answered in C where
// a CREATE would be, and reported in the same stream (fs/native-unlinks.ts).
// nativeRmdirs (needs nativeCreates): RMDIRs of empty directories in those directories are answered in C
// where an UNLINK would be, and reported in the same stream (fs/native-rmdirs.ts).
// nativeListings (needs nativeDirAttrs): READDIRPLUS and READDIR of the directories whose GETATTRs are
// answered in C are answered there too, with plain entries (fs/native-listings.ts).
// narrowRenames (needs nativeLookups): a RENAME of a non-directory out of a directory the lookup fast path
// marks ends only the moved and the replaced node's fast state, not every mark and registration
// (fuse-native's native/fast-rename.c, fs/rename-nodes.ts).
// wideHandles: the worker's cache of host fds holds up to 4096 (fs/handles.ts), so a walk over a tree just
// written finds its files' fds open and their READs stay in the binding; off: 512.
export const SWITCHABLE_FEATURES = [
  'maxPages',
  'writebackCache',
  'readdirplus',
  'parallelDirops',
  'listingRefresh',
  'listingReplay',
  'readahead',
  'storeAhead',
  'entryWarmup',
  'directWrites',
  'nativeWrites',
  'nativeReads',
  'nativeLookups',
  'nativeCreates',
  'nativeDirAttrs',
  'nativeUnlinks',
  'nativeRmdirs',
  'nativeListings',
  'narrowRenames',
  'freshEntries',
  'wideHandles',
] as const;
export type SwitchableFeature = (typeof SWITCHABLE_FEATURES)[number];

/** The environment variables naming the features to leave off / to switch on. */
export const DISABLE_ENV = 'AGENTFENSE_FUSE_DISABLE';
export const ENABLE_ENV = 'AGENTFENSE_FUSE_ENABLE';

/**
 * Off unless enabled. writebackCache: with it the kernel trusts its own size and mtime of a regular file
 * over ours, so a change made behind the mount (another sandbox's commit, discard, the control plane's
 * writeFile) would keep a stale size; writes also arrive later, without the writer's pid, and a quota
 * error only at close (docs/decisions.md, "The writeback cache is off").
 */
const OFF_BY_DEFAULT: readonly SwitchableFeature[] = ['writebackCache'];

/** Bytes per READ/WRITE request without max_pages: the protocol-7.19 (libfuse 2) size. */
const SMALL_REQUEST = 128 * 1024;
/** With max_pages: 256 pages, the most libfuse 3.14 can receive. */
const BIG_REQUEST = 1024 * 1024;

/** The features to leave off: the defaults, minus AGENTFENSE_FUSE_ENABLE, plus AGENTFENSE_FUSE_DISABLE. */
export function disabledFeatures(env: NodeJS.ProcessEnv): SwitchableFeature[] {
  const enabled = featureList(ENABLE_ENV, env[ENABLE_ENV]);
  const off = OFF_BY_DEFAULT.filter((f) => !enabled.includes(f));
  for (const f of featureList(DISABLE_ENV, env[DISABLE_ENV])) if (!off.includes(f)) off.push(f);
  return off;
}

function featureList(variable: string, value: string | undefined): SwitchableFeature[] {
  if (value === undefined || value.trim() === '') return [];
  const out: SwitchableFeature[] = [];
  for (const raw of value.split(',')) {
    const name = raw.trim();
    if (name === '') continue;
    if (!(SWITCHABLE_FEATURES as readonly string[]).includes(name)) {
      throw new InvalidArgumentError(
        `${variable}: unknown FUSE feature ${JSON.stringify(name)}; known: ${SWITCHABLE_FEATURES.join(', ')}`,
      );
    }
    out.push(name as SwitchableFeature);
  }
  return out;
}

/** The binding options for the features wanted (everything but `disabled`). */
export function featureOptions(
  disabled: readonly SwitchableFeature[],
): Pick<LowLevelOptions, 'maxWrite' | 'features'> {
  const on = (f: SwitchableFeature): boolean => !disabled.includes(f);
  return {
    maxWrite: on('maxPages') ? BIG_REQUEST : SMALL_REQUEST,
    features: {
      // The kernel keeps written pages and sends them in max_write chunks; it then decides size and
      // mtime itself and may READ pages of a file open for writing (see packages/fuse-native/README.md).
      writebackCache: on('writebackCache'),
      readdirplus: on('readdirplus'),
      parallelDirops: on('parallelDirops'),
    },
  };
}

/** Whether the worker refreshes listings after READs: needs READDIRPLUS to do any good. */
export function listingRefresh(conn: ConnInfo, disabled: readonly SwitchableFeature[]): boolean {
  return conn.features.readdirplus && !disabled.includes('listingRefresh');
}

/** Whether a listing asked for again after READs may be the remembered answer (fs/listing-replay.ts). */
export function listingReplay(conn: ConnInfo, disabled: readonly SwitchableFeature[]): boolean {
  return listingRefresh(conn, disabled) && !disabled.includes('listingReplay');
}

/** Whether the read-ahead stores small files into the kernel's page cache (fs/store-ahead.ts). */
export function storeAhead(conn: ConnInfo, disabled: readonly SwitchableFeature[]): boolean {
  return conn.features.readdirplus && !disabled.includes('storeAhead');
}

/** Whether the worker lists the tree into the kernel's dcache after the first access (fs/entry-warmup.ts). */
export function entryWarmup(conn: ConnInfo, disabled: readonly SwitchableFeature[]): boolean {
  return conn.features.readdirplus && !disabled.includes('entryWarmup');
}

/** Whether a listing sends names the kernel holds fresh as plain entries (fs/entry-freshness.ts). */
export function freshEntries(conn: ConnInfo, disabled: readonly SwitchableFeature[]): boolean {
  return conn.features.readdirplus && !disabled.includes('freshEntries');
}

/** Whether files created write-only bypass the mount's page cache: FOPEN_DIRECT_IO needs no INIT flag. */
export function directWrites(disabled: readonly SwitchableFeature[]): boolean {
  return !disabled.includes('directWrites');
}

/** Whether WRITEs on files already decided are answered by the binding, in C (fs/native-writes.ts). */
export function nativeWrites(disabled: readonly SwitchableFeature[]): boolean {
  return !disabled.includes('nativeWrites');
}

/** Whether READs of files already decided are answered by the binding, in C (fs/native-reads.ts). */
export function nativeReads(disabled: readonly SwitchableFeature[]): boolean {
  return !disabled.includes('nativeReads');
}

/** Whether LOOKUPs of missing names in directories only the sandbox made are answered in C (fs/native-lookups.ts). */
export function nativeLookups(disabled: readonly SwitchableFeature[]): boolean {
  return !disabled.includes('nativeLookups');
}

/**
 * Whether CREATEs in directories the lookup fast path marked are answered in C (fs/native-creates.ts); it
 * needs nativeWrites and nativeLookups, whose state it uses.
 */
export function nativeCreates(disabled: readonly SwitchableFeature[]): boolean {
  return !disabled.includes('nativeCreates') && nativeWrites(disabled) && nativeLookups(disabled);
}

/**
 * Whether GETATTRs of the directories the lookup fast path marks are answered in C where the worker would
 * shape nothing (fs/native-lookups.ts dirAttrs); it needs nativeCreates, whose reports note them.
 */
export function nativeDirAttrs(disabled: readonly SwitchableFeature[]): boolean {
  return !disabled.includes('nativeDirAttrs') && nativeCreates(disabled);
}

/**
 * Whether UNLINKs of regular files in the directories the lookup fast path marks are answered in C where
 * a CREATE would be (fs/native-unlinks.ts); it needs nativeCreates, whose reports carry them.
 */
export function nativeUnlinks(disabled: readonly SwitchableFeature[]): boolean {
  return !disabled.includes('nativeUnlinks') && nativeCreates(disabled);
}

/**
 * Whether RMDIRs of empty directories in the directories the lookup fast path marks are answered in C
 * where an UNLINK would be (fs/native-rmdirs.ts); it needs nativeCreates, whose reports carry them.
 */
export function nativeRmdirs(disabled: readonly SwitchableFeature[]): boolean {
  return !disabled.includes('nativeRmdirs') && nativeCreates(disabled);
}

/**
 * Whether READDIRPLUS and READDIR of the directories whose GETATTRs are answered in C are answered there
 * too, with plain entries (fs/native-listings.ts); it needs nativeDirAttrs, whose marks carry `.`'s st_ino.
 */
export function nativeListings(disabled: readonly SwitchableFeature[]): boolean {
  return !disabled.includes('nativeListings') && nativeDirAttrs(disabled);
}

/**
 * Whether a RENAME of a non-directory keeps the marks and the other nodes' registrations
 * (fs/rename-nodes.ts); it needs nativeLookups, whose marks tell the binding the source is no directory.
 */
export function narrowRenames(disabled: readonly SwitchableFeature[]): boolean {
  return !disabled.includes('narrowRenames') && nativeLookups(disabled);
}

/**
 * The read-ahead window to ask for: the request size, when requests are bigger than the kernel's default
 * window (128 KiB) and the feature is on; else null (leave the kernel's window).
 */
export function readaheadBytes(conn: ConnInfo, disabled: readonly SwitchableFeature[]): number | null {
  return !disabled.includes('readahead') && conn.maxWrite > SMALL_REQUEST ? conn.maxWrite : null;
}

/** What the mount got, for the log and the worker's `stats`; `readahead`: the window was widened. */
export function connStats(
  conn: ConnInfo,
  disabled: readonly SwitchableFeature[],
  readahead = false,
): FuseConnStats {
  return {
    libfuse: conn.libfuseVersion,
    kernelProtocol: `${conn.protoMajor}.${conn.protoMinor}`,
    maxWrite: conn.maxWrite,
    features: {
      ...conn.features,
      listingRefresh: listingRefresh(conn, disabled),
      listingReplay: listingReplay(conn, disabled),
      storeAhead: storeAhead(conn, disabled),
      entryWarmup: entryWarmup(conn, disabled),
      directWrites: directWrites(disabled),
      nativeWrites: nativeWrites(disabled),
      nativeReads: nativeReads(disabled),
      nativeLookups: nativeLookups(disabled),
      nativeCreates: nativeCreates(disabled),
      nativeDirAttrs: nativeDirAttrs(disabled),
      nativeUnlinks: nativeUnlinks(disabled),
      nativeRmdirs: nativeRmdirs(disabled),
      nativeListings: nativeListings(disabled),
      narrowRenames: narrowRenames(disabled),
      freshEntries: freshEntries(conn, disabled),
      readahead,
    },
    disabled: [...disabled],
  };
}
