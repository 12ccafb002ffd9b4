// Mount options into libfuse's arguments, without mounting: what is accepted, what is refused (nothing may
// inject a mount option), and the protocol features asked for.
import { describe, expect, it } from 'vitest';
import { FEATURES, buildArgs, describeFeatures } from '../src/options.js';
import type { LowLevelOptions } from '../src/types.js';

describe('buildArgs', () => {
  it('turns options into one -o string, 1 MiB writes and the default features', () => {
    const built = buildArgs({ fsname: 'agentfense', subtype: 'af', allowOther: true, maxRead: 65536 });
    expect(built.args).toEqual([
      'fuse-native',
      '-o',
      'fsname=agentfense,subtype=af,allow_other,max_read=65536',
    ]);
    expect(built.maxWrite).toBe(1 << 20);
    expect(built.features).toBe(FEATURES.readdirplus | FEATURES.parallelDirops);
  });

  it('asks for exactly the features requested, over the defaults', () => {
    const built = buildArgs({ features: { writebackCache: true, readdirplus: false }, maxWrite: 131072 });
    expect(built.features).toBe(FEATURES.writebackCache | FEATURES.parallelDirops);
    expect(built.maxWrite).toBe(131072);
  });

  it('refuses values that could inject a mount option, unknown keys and bad types', () => {
    expect(() => buildArgs({ fsname: 'a,allow_other' })).toThrow(/fsname/);
    expect(() => buildArgs({ subtype: 'a b' })).toThrow(/subtype/);
    expect(() => buildArgs({ extraOptions: ['ro,dev'] })).toThrow(/extra option/);
    expect(() => buildArgs({ maxWrite: 12.5 })).toThrow(/maxWrite/);
    expect(() => buildArgs({ maxWrite: 2 << 20 })).toThrow(/maxWrite/);
    expect(() => buildArgs({ bogus: 1 } as unknown as LowLevelOptions)).toThrow(/unknown option/);
    expect(() => buildArgs({ allowOther: 'yes' } as unknown as LowLevelOptions)).toThrow(/allowOther/);
    expect(() => buildArgs({ features: { passthrough: true } } as unknown as LowLevelOptions)).toThrow(
      /unknown feature/,
    );
  });

  it('passes safe extra options through', () => {
    expect(buildArgs({ extraOptions: ['noatime', 'rootmode=040000'] }).args[2]).toBe(
      'noatime,rootmode=040000',
    );
  });
});

describe('describeFeatures', () => {
  const info = {
    protoMajor: 7,
    protoMinor: 31,
    maxWrite: 1 << 20,
    maxReadahead: 131072,
    capable: 0,
    want: 0,
  };

  it('names what INIT granted; no_open only without an open handler', () => {
    const want = (1 << 13) | (1 << 18); // FUSE_CAP_READDIRPLUS | FUSE_CAP_PARALLEL_DIROPS
    const capable = want | (1 << 17) | (1 << 24); // ... | NO_OPEN_SUPPORT | NO_OPENDIR_SUPPORT
    const features = describeFeatures({ ...info, want, capable }, { open: () => undefined });
    expect(features).toEqual({
      maxPages: true,
      writebackCache: false,
      readdirplus: true,
      parallelDirops: true,
      cacheSymlinks: false,
      asyncDio: false,
      noOpen: false,
      noOpendir: true,
      passthrough: false,
    });
  });

  it('sees no max_pages below protocol 7.28 or at 128 KiB writes', () => {
    expect(describeFeatures({ ...info, protoMinor: 27 }, {}).maxPages).toBe(false);
    expect(describeFeatures({ ...info, maxWrite: 131072 }, {}).maxPages).toBe(false);
  });
});
