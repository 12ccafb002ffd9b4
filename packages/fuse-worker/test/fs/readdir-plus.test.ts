// READDIRPLUS in process, for the entry warm-up's walker: its listing is looked up a slice at a time in the
// sandbox's gaps, so a rule change, discard or commit can land in the middle of it. What was looked up
// before must not be cached by the kernel past that invalidation (a name hidden by the new rules would
// stay stat-able from the dcache for the cache TTL), and nothing after it is looked up at all.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';

import type { EntryWarmup } from '../../src/fs/entry-warmup.js';
import { ROOT_INO } from '../../src/fs/inodes.js';
import type { Caller, PolicyFs } from '../../src/fs/policy-fs.js';
import { policyFsOver } from './fixture.js';

const SANDBOX: Caller = { pid: 100, uid: 1000, gid: 1000 };
const WALKER: Caller = { pid: 4242, uid: 0, gid: 0 };
const ALL = (names: readonly string[]): number => names.length;
/** sizeof(fuse_entry_out) + sizeof(fuse_dirent) without the name; node id at 0, timeouts at 16-40. */
const HEAD = 152;

interface Record {
  readonly name: string;
  readonly nodeId: number;
  readonly entrySeconds: number;
  readonly attrSeconds: number;
}

function records(buf: Buffer): Record[] {
  const out: Record[] = [];
  for (let at = 0; at < buf.length;) {
    const len = buf.readUInt32LE(at + 128 + 16);
    out.push({
      name: buf.toString('utf8', at + HEAD, at + HEAD + len),
      nodeId: Number(buf.readBigUInt64LE(at)),
      entrySeconds: Number(buf.readBigUInt64LE(at + 16)),
      attrSeconds: Number(buf.readBigUInt64LE(at + 24)),
    });
    at += (HEAD + len + 7) & ~7;
  }
  return out;
}

/** A mount's PolicyFs over a directory `d` of 64 files, with a stand-in warm-up whose gaps the test opens. */
async function setup(): Promise<{ fs: PolicyFs; dir: number; gaps: Gaps }> {
  const root = await mkdtemp(join(tmpdir(), 'af-rdplus-'));
  onTestFinished(() => rm(root, { recursive: true, force: true }));
  await mkdir(join(root, 'lower', 'd'), { recursive: true });
  for (let i = 0; i < 64; i++)
    await writeFile(join(root, 'lower', 'd', `f${String(i).padStart(2, '0')}`), 'x');
  const fs = await policyFsOver(root, { uid: 1000, gid: 1000 });
  const gaps = new Gaps();
  fs.entryWarmup = {
    isWalker: (c: Caller) => c.pid === WALKER.pid && c.uid === 0,
    whenIdle: () => gaps.next(),
    touch: () => undefined,
    invalidated: () => undefined,
  } as unknown as EntryWarmup;
  const dir = (await fs.lookup(ROOT_INO, 'd', SANDBOX)).ino;
  return { fs, dir, gaps };
}

/** The sandbox's gaps, as the walker's slices wait for them: the first `open` pass at once, then one per release. */
class Gaps {
  #open: number;
  #waiting: (() => void)[] = [];
  asked = 0;
  constructor(open = 1) {
    this.#open = open;
  }
  next(): Promise<void> {
    this.asked++;
    if (this.#open > 0) {
      this.#open--;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.#waiting.push(resolve));
  }
  releaseAll(): void {
    this.#open = Infinity;
    for (const go of this.#waiting.splice(0)) go();
  }
}

async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !check(); i++) await new Promise((resolve) => setTimeout(resolve, 2));
  expect(check()).toBe(true);
}

describe('READDIRPLUS for the warm-up walker', () => {
  it('a listing interrupted by an invalidation carries no timeouts, and nothing past it is looked up', async () => {
    const { fs, dir, gaps } = await setup();
    const listing = fs.readdirplus(dir, 0, WALKER, ALL);
    // the first slice (16 entries) is looked up, then the walker waits for the sandbox's next gap
    await until(() => gaps.asked === 2);
    await fs.invalidateAll(); // e.g. setRules: the kernel is told to forget everything it holds
    gaps.releaseAll();
    const sent = records(await listing).filter((r) => r.name !== '.' && r.name !== '..');
    expect(sent).toHaveLength(64);
    const looked = sent.filter((r) => r.nodeId !== 0);
    // the entries looked up before the invalidation reach the kernel for this request only
    expect(looked.length).toBeGreaterThan(0);
    expect(looked.length).toBeLessThan(64);
    for (const r of looked) expect([r.name, r.entrySeconds, r.attrSeconds]).toEqual([r.name, 0, 0]);
  });

  it('an uninterrupted listing is cached for the TTL, as a LOOKUP would be', async () => {
    const { fs, dir, gaps } = await setup();
    gaps.releaseAll();
    const sent = records(await fs.readdirplus(dir, 0, WALKER, ALL)).filter((r) => r.name.startsWith('f'));
    expect(sent).toHaveLength(64);
    for (const r of sent) expect([r.nodeId > 0, r.entrySeconds, r.attrSeconds]).toEqual([true, 60, 60]);
  });

  it("the sandbox's own listing answered after an invalidation began carries no timeouts", async () => {
    const { fs, dir } = await setup();
    const listing = fs.readdirplus(dir, 0, SANDBOX, ALL);
    // the lookups await the host; the invalidation lands before they are done
    const invalidated = fs.invalidateAll();
    const sent = records(await listing).filter((r) => r.name.startsWith('f'));
    await invalidated;
    expect(sent).toHaveLength(64);
    for (const r of sent) expect([r.entrySeconds, r.attrSeconds]).toEqual([0, 0]);
  });
});
