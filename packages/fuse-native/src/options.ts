// A mount's options, checked, into libfuse's argument vector and the binding's feature bits; and what
// INIT granted, by name.
import type { ConnFeatures, FeatureRequest, LowLevelHandlers, LowLevelOptions } from './types.js';
import type { RawConnInfo } from './addon.js';

// Option values go into libfuse's comma-separated -o string: allow no ',' '=' '\' or spaces in values that
// are not meant to carry them, so nothing can inject an extra mount option.
const SAFE_VALUE = /^[A-Za-z0-9_.:@+/-]{1,128}$/;
const SAFE_EXTRA = /^[A-Za-z0-9_]{1,64}(=[A-Za-z0-9_.:@+/-]{0,128})?$/;
const KNOWN_OPTIONS = new Set([
  'fsname',
  'subtype',
  'allowOther',
  'defaultPermissions',
  'bigWrites',
  'maxWrite',
  'maxRead',
  'debug',
  'extraOptions',
  'onError',
  'features',
]);

/**
 * Protocol features the mount may ask for; bit values shared with FEAT_* in native/ll.h. Each is
 * requested only when the kernel offers it (connInfo.features says what was granted).
 */
export const FEATURES: Readonly<Record<keyof FeatureRequest, number>> = {
  writebackCache: 1 << 0,
  readdirplus: 1 << 1,
  parallelDirops: 1 << 2,
  cacheSymlinks: 1 << 3,
  asyncDio: 1 << 4,
};
const DEFAULT_FEATURES: Readonly<Record<keyof FeatureRequest, boolean>> = {
  writebackCache: false,
  readdirplus: true,
  parallelDirops: true,
  cacheSymlinks: false,
  asyncDio: false,
};

/** FUSE_CAP_* (fuse_common.h, libfuse 3.14) */
const CAP = {
  writebackCache: 1 << 16,
  readdirplus: 1 << 13,
  parallelDirops: 1 << 18,
  cacheSymlinks: 1 << 23,
  asyncDio: 1 << 15,
  noOpen: 1 << 17,
  noOpendir: 1 << 24,
};

/** What the binding's ll_mount takes. */
export interface MountArgs {
  args: string[];
  features: number;
  maxWrite: number;
}

/** Checks `options` (unknown keys and bad values throw TypeError) and builds the mount's arguments. */
export function buildArgs(options: LowLevelOptions): MountArgs {
  const o = options as Record<string, unknown>;
  for (const key of Object.keys(o)) {
    if (!KNOWN_OPTIONS.has(key)) throw new TypeError(`LowLevelFuse: unknown option ${JSON.stringify(key)}`);
  }
  const opts: string[] = [];
  const str = (key: string, opt: string): void => {
    const v = o[key];
    if (v === undefined) return;
    if (typeof v !== 'string' || !SAFE_VALUE.test(v)) {
      throw new TypeError(`LowLevelFuse: option ${key} must match ${SAFE_VALUE}`);
    }
    opts.push(`${opt}=${v}`);
  };
  const bool = (key: string): boolean => {
    const v = o[key];
    if (v !== undefined && typeof v !== 'boolean')
      throw new TypeError(`LowLevelFuse: option ${key} must be a boolean`);
    return v === true;
  };
  const int = (key: string, min: number, max: number): number | undefined => {
    const v = o[key];
    if (v === undefined) return undefined;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
      throw new TypeError(`LowLevelFuse: option ${key} must be an integer in [${min}, ${max}]`);
    }
    return v;
  };
  // libfuse 3 takes only mount and session options here: big writes are always on, max_write is
  // negotiated in INIT (native/decode.c ll_init), async_read is a capability.
  str('fsname', 'fsname');
  str('subtype', 'subtype');
  if (bool('allowOther')) opts.push('allow_other');
  if (bool('defaultPermissions')) opts.push('default_permissions');
  bool('bigWrites'); // accepted for compatibility: always on
  // 1 MiB (256 pages, protocol 7.28 max_pages) unless asked for less; libfuse's buffer caps it there.
  const maxWrite = int('maxWrite', 4096, 1 << 20);
  const maxRead = int('maxRead', 4096, 1 << 20);
  if (maxRead !== undefined) opts.push(`max_read=${maxRead}`);
  if (bool('debug')) opts.push('debug');
  opts.push(...extraOptions(o['extraOptions']));
  return {
    args: ['fuse-native', '-o', opts.join(',')],
    features: featureBits(o['features']),
    maxWrite: maxWrite ?? 1 << 20,
  };
}

function extraOptions(extra: unknown): string[] {
  if (extra === undefined) return [];
  if (!Array.isArray(extra)) throw new TypeError('LowLevelFuse: extraOptions must be an array of strings');
  for (const o of extra as unknown[]) {
    if (typeof o !== 'string' || !SAFE_EXTRA.test(o)) {
      throw new TypeError(`LowLevelFuse: extra option ${JSON.stringify(o)} must match ${SAFE_EXTRA}`);
    }
  }
  return extra as string[];
}

function featureBits(requested: unknown): number {
  const f = (requested === undefined ? {} : requested) as Record<string, unknown> | null;
  if (f === null || typeof f !== 'object') throw new TypeError('LowLevelFuse: features must be an object');
  const known = Object.keys(FEATURES) as (keyof FeatureRequest)[];
  for (const key of Object.keys(f)) {
    if (!(known as string[]).includes(key)) {
      throw new TypeError(
        `LowLevelFuse: unknown feature ${JSON.stringify(key)} (known: ${known.join(', ')})`,
      );
    }
    if (typeof f[key] !== 'boolean') throw new TypeError(`LowLevelFuse: feature ${key} must be a boolean`);
  }
  let bits = 0;
  for (const key of known) {
    if (f[key] === undefined ? DEFAULT_FEATURES[key] : f[key] === true) bits |= FEATURES[key];
  }
  return bits;
}

/**
 * What INIT granted, by name. noOpen/noOpendir: the kernel accepts ENOSYS to OPEN/OPENDIR as "never ask
 * again" (the binding answers so when there is no open/opendir handler).
 */
export function describeFeatures(info: RawConnInfo, handlers: LowLevelHandlers): ConnFeatures {
  const want = info.want >>> 0;
  const capable = info.capable >>> 0;
  return {
    maxPages: info.protoMinor >= 28 && info.maxWrite > 131072,
    writebackCache: (want & CAP.writebackCache) !== 0,
    readdirplus: (want & CAP.readdirplus) !== 0,
    parallelDirops: (want & CAP.parallelDirops) !== 0,
    cacheSymlinks: (want & CAP.cacheSymlinks) !== 0,
    asyncDio: (want & CAP.asyncDio) !== 0,
    noOpen: (capable & CAP.noOpen) !== 0 && typeof handlers.open !== 'function',
    noOpendir: (capable & CAP.noOpendir) !== 0 && typeof handlers.opendir !== 'function',
    // Kernel 6.9+ (protocol 7.40) can pass reads/writes through to a backing file, but libfuse 3.14
    // cannot negotiate it (no FUSE_PASSTHROUGH in its INIT, no backing-file ioctl wrapper).
    passthrough: false,
  };
}
