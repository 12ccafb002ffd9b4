// ListingReplays in process: a remembered READDIRPLUS answer is handed again byte for byte, with only the
// timeouts rewritten to what is left of them, each entry counted as one more kernel lookup.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';

import { ROOT_INO } from '../../src/fs/inodes.js';
import type { Caller, PolicyFs } from '../../src/fs/policy-fs.js';
import { policyFsOver } from './fixture.js';

const CALLER: Caller = { pid: 0, uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 };
const ALL = (names: readonly string[]): number => names.length;
/** sizeof(fuse_entry_out) + sizeof(fuse_dirent) without the name; the timeouts are bytes 16-40. */
const HEAD = 152;

async function setup(): Promise<{ fs: PolicyFs; dir: number; names: string[] }> {
  const root = await mkdtemp(join(tmpdir(), 'af-replay-'));
  onTestFinished(() => rm(root, { recursive: true, force: true }));
  const names = Array.from({ length: 24 }, (_, i) => 'x'.repeat(i + 1)); // every padding of a record
  await mkdir(join(root, 'lower', 'd', 'sub'), { recursive: true });
  for (const name of names) await writeFile(join(root, 'lower', 'd', name), name);
  const fs = await policyFsOver(root, { uid: CALLER.uid, gid: CALLER.gid });
  fs.replayListings = true;
  const dir = (await fs.lookup(ROOT_INO, 'd', CALLER)).ino;
  return { fs, dir, names: [...names, 'sub'] };
}

/** Each record's offset and name. */
function records(buf: Buffer): { at: number; name: string }[] {
  const out: { at: number; name: string }[] = [];
  for (let at = 0; at < buf.length;) {
    const len = buf.readUInt32LE(at + 128 + 16);
    out.push({ at, name: buf.toString('utf8', at + HEAD, at + HEAD + len) });
    at += (HEAD + len + 7) & ~7;
  }
  return out;
}

describe('ListingReplays', () => {
  it('hands the answer again with the timeouts left, counting a lookup per entry', async () => {
    const { fs, dir, names } = await setup();
    const first = await fs.readdirplus(dir, 0, CALLER, ALL);
    const listed = records(first);
    expect(listed.map((r) => r.name).sort()).toEqual(['.', '..', ...names].sort());
    await new Promise((resolve) => setTimeout(resolve, 20));
    const second = await fs.readdirplus(dir, 0, CALLER, ALL);
    expect(second.length).toBe(first.length);
    for (const { at, name } of listed) {
      if (name === '.' || name === '..') {
        expect(second.subarray(at, at + HEAD)).toEqual(first.subarray(at, at + HEAD));
        continue;
      }
      // all but the two timeouts (entry_valid, attr_valid, their nsecs: bytes 16 to 40) is the same
      expect(second.subarray(at, at + 16)).toEqual(first.subarray(at, at + 16));
      expect(second.subarray(at + 40, at + HEAD)).toEqual(first.subarray(at + 40, at + HEAD));
      const seconds = second.readUInt32LE(at + 16) + second.readUInt32LE(at + 32) / 1e9;
      expect(seconds).toBeLessThan(60);
      expect(seconds).toBeGreaterThan(58);
      expect(second.readUInt32LE(at + 24)).toBe(second.readUInt32LE(at + 16));
      expect(fs.inodes.child(dir, name)?.nlookup).toBe(2);
    }
  });

  it('builds a new answer when a listed name now leads to another node', async () => {
    const { fs, dir } = await setup();
    await fs.readdirplus(dir, 0, CALLER, ALL);
    const node = fs.inodes.child(dir, 'xx')!;
    fs.forget(node.ino, node.nlookup);
    const again = await fs.readdirplus(dir, 0, CALLER, ALL);
    const at = records(again).find((r) => r.name === 'xx')!.at;
    expect(again.readUInt32LE(at + 16)).toBe(60); // a fresh answer: the whole timeout
    expect(fs.inodes.child(dir, 'xx')?.nlookup).toBe(1);
    expect(fs.inodes.child(dir, 'x')?.nlookup).toBe(2);
  });
});
