// Which FUSE features a mount asks for, from the worker's environment (the bench switches them this way).
import { describe, expect, it } from 'vitest';
import type { ConnInfo } from '@agentfense/fuse-native';
import { disabledFeatures, featureOptions, readaheadBytes } from '../src/mount-options.js';

describe('FUSE feature switches', () => {
  it('by default everything is asked for except the writeback cache', () => {
    const off = disabledFeatures({});
    expect(off).toEqual(['writebackCache']);
    expect(featureOptions(off)).toEqual({
      maxWrite: 1024 * 1024,
      features: { writebackCache: false, readdirplus: true, parallelDirops: true },
    });
  });

  it('AGENTFENSE_FUSE_DISABLE and AGENTFENSE_FUSE_ENABLE switch named features', () => {
    const off = disabledFeatures({
      AGENTFENSE_FUSE_DISABLE: 'maxPages, readdirplus',
      AGENTFENSE_FUSE_ENABLE: 'writebackCache,nativeDirAttrs',
    });
    expect(off).toEqual(['maxPages', 'readdirplus']);
    expect(featureOptions(off)).toEqual({
      maxWrite: 128 * 1024,
      features: { writebackCache: true, readdirplus: false, parallelDirops: true },
    });
  });

  it('the read-ahead window is widened to the request size, unless requests are 128 KiB or it is off', () => {
    const conn = (maxWrite: number): ConnInfo => ({ maxWrite }) as ConnInfo;
    expect(readaheadBytes(conn(1024 * 1024), [])).toBe(1024 * 1024);
    expect(readaheadBytes(conn(128 * 1024), [])).toBeNull();
    expect(
      readaheadBytes(conn(1024 * 1024), disabledFeatures({ AGENTFENSE_FUSE_DISABLE: 'readahead' })),
    ).toBeNull();
  });

  it('an unknown name is refused with the list of known ones', () => {
    expect(() => disabledFeatures({ AGENTFENSE_FUSE_DISABLE: 'readdirplus,splice' })).toThrow(
      /AGENTFENSE_FUSE_DISABLE: unknown FUSE feature "splice"; known: maxPages, writebackCache/,
    );
  });
});
