// Store-ahead on a real mount (packages/fuse-worker/src/fs/store-ahead.ts): once a walker reads the
// files it lists, the worker reads the next small read-only codebase files and puts them into the
// kernel's page cache, so the walker reads them without a READ. What it stores must be byte for byte what
// a READ would have returned, and a change made afterwards must win over it.
import { createHash } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { AGENT_SAFE, mountFixture, useMountHygiene } from '../helpers/worker-fixture.js';
import type { MountedFixture } from '../helpers/worker-fixture.js';
import { opCount, waitForOps } from '../helpers/store-ahead.js';

/** 40 files of different sizes and contents in w/: one page, several pages, a partial last page. */
function walkTree(): Record<string, string> {
  const tree: Record<string, string> = {};
  for (let i = 0; i < 40; i++) {
    const line = `file ${i} needle ${'x'.repeat(i)}\n`;
    tree[`w/f${String(i).padStart(2, '0')}.txt`] = line.repeat(1 + ((i * 97) % 400));
  }
  return tree;
}

const sha = (s: string | Buffer): string => createHash('sha256').update(s).digest('hex');

/**
 * Lists w/ and reads its first file in listing order (`ls -f`: the order the worker listed), so the
 * read-ahead covers every other file; returns that file's path.
 */
async function startWalk(f: MountedFixture): Promise<string> {
  const r = await f.sandbox(
    'ls w >/dev/null && first=$(ls -f w | grep -v "^\\.") && first=$(echo "$first" | head -n1) && cat "w/$first" >/dev/null && echo "w/$first"',
  );
  expect(r.stderr).toBe('');
  return r.stdout.trim();
}

describe('store-ahead', () => {
  useMountHygiene();

  it('a walker reads the files stored ahead without a READ, byte for byte and with their sizes', async () => {
    const tree = walkTree();
    const f = await mountFixture({ tree, rules: AGENT_SAFE });
    expect((await f.worker.client.request('stats', {})).fuse?.features.storeAhead).toBe(true);
    // The listing hands the kernel every node; the first READ starts the read-ahead behind it.
    const first = await startWalk(f);
    await waitForOps(f, 'store-ahead', 39);
    const reads = await opCount(f, 'read');

    const names = Object.keys(tree)
      .filter((p) => p !== first)
      .sort();
    const r = await f.sandbox(names.map((p) => `sha256sum ${p}; stat -c %s ${p}`).join('\n'));
    expect(r.stderr).toBe('');
    const expected = names.map((p) => `${sha(tree[p]!)}  ${p}\n${Buffer.byteLength(tree[p]!)}\n`).join('');
    expect(r.stdout).toBe(expected);
    // Every one of them came from the pages stored ahead.
    expect(await opCount(f, 'read')).toBe(reads);
  }, 60_000);

  it('a codebase change after the store wins, as after a READ: once the attributes expire the new bytes are read', async () => {
    const tree = walkTree();
    const f = await mountFixture({ tree, rules: AGENT_SAFE, cacheTtlSeconds: 1 });
    const first = await startWalk(f);
    await waitForOps(f, 'store-ahead', 39);
    const [a, b] = Object.keys(tree).filter((p) => p !== first);
    // Behind the mount, as another sandbox's commit does: same size, so only the ctime tells.
    const changed = 'Y'.repeat(Buffer.byteLength(tree[a!]!));
    await writeFile(join(f.lower, a!), changed);
    const deadline = Date.now() + 10_000;
    let seen = '';
    while (Date.now() < deadline) {
      seen = (await f.sandbox(`cat ${a!}`)).stdout;
      if (seen === changed) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    expect(seen).toBe(changed);
    expect((await f.sandbox(`sha256sum ${b!}`)).stdout).toBe(`${sha(tree[b!]!)}  ${b!}\n`);
  }, 60_000);

  it('a walker that reads what it lists gets each next directory stored from its listing: only one file of it is READ', async () => {
    const tree: Record<string, string> = {};
    for (const d of ['a', 'b', 'c']) {
      for (let i = 0; i < 20; i++)
        tree[`${d}/f${String(i).padStart(2, '0')}.txt`] = `${d} ${i}\n`.repeat(i + 1);
    }
    // Without the entry warm-up: its walker would list b/ and c/ into the kernel in the sandbox's idle
    // gaps (on a loaded machine, before the `ls` below), and a listing the kernel holds is never asked for,
    // so no listing would start the read-ahead this test is about (READs still start it then).
    const f = await mountFixture({ tree, rules: AGENT_SAFE, warmupEntries: 0 });
    // a/: listed and read (the read-ahead follows its READs); from then on listings are read ahead
    expect((await f.sandbox('ls a >/dev/null && cat a/* >/dev/null')).stderr).toBe('');
    for (const d of ['b', 'c']) {
      const stored = await opCount(f, 'store-ahead');
      // Listing alone stores every file but one: the listing's end is answered once they are stored.
      expect((await f.sandbox(`ls ${d} >/dev/null`)).stderr).toBe('');
      await waitForOps(f, 'store-ahead', stored + 19);
      const reads = await opCount(f, 'read');
      const names = (await f.sandbox(`ls -f ${d} | grep txt`)).stdout.trim().split('\n');
      const r = await f.sandbox(names.map((n) => `cat ${d}/${n}`).join('; '));
      expect(r.stdout).toBe(names.map((n) => tree[`${d}/${n}`]).join(''));
      // the last file in listing order is left to be READ: that READ says the walker still reads
      expect(await opCount(f, 'read')).toBe(reads + 1);
    }
  }, 60_000);

  it('a walk that only lists (ls -lR) after a reading walk stops being read ahead within a few listings', async () => {
    const tree: Record<string, string> = {};
    for (let d = 0; d < 12; d++) {
      for (let i = 0; i < 10; i++) tree[`d${String(d).padStart(2, '0')}/f${i}.txt`] = `${d} ${i}\n`;
    }
    const f = await mountFixture({ tree, rules: AGENT_SAFE });
    const read = await f.sandbox('for d in d00 d01 d02; do ls $d >/dev/null; cat $d/* >/dev/null; done');
    expect(read.stderr).toBe('');
    await new Promise((r) => setTimeout(r, 300));
    const before = await opCount(f, 'store-ahead');
    const listed = await f.sandbox(
      'for d in d03 d04 d05 d06 d07 d08 d09 d10 d11; do ls -l $d >/dev/null; done',
    );
    expect(listed.stderr).toBe('');
    await new Promise((r) => setTimeout(r, 300));
    // 9 listings of 10 files: the first four are stored (9 files each: half of the last listings were
    // still read), then the predictor says this walk does not read
    expect((await opCount(f, 'store-ahead')) - before).toBeLessThanOrEqual(4 * 9);
  }, 60_000);

  it('switched off by AGENTFENSE_FUSE_DISABLE=storeAhead: the read-ahead then only warms the host', async () => {
    const previous = process.env.AGENTFENSE_FUSE_DISABLE;
    process.env.AGENTFENSE_FUSE_DISABLE = 'storeAhead';
    let f: MountedFixture;
    try {
      f = await mountFixture({ tree: walkTree(), rules: AGENT_SAFE });
    } finally {
      if (previous === undefined) delete process.env.AGENTFENSE_FUSE_DISABLE;
      else process.env.AGENTFENSE_FUSE_DISABLE = previous;
    }
    const fuse = (await f.worker.client.request('stats', {})).fuse;
    expect(fuse?.features.storeAhead).toBe(false);
    expect(fuse?.disabled).toContain('storeAhead');
    await startWalk(f);
    await waitForOps(f, 'readahead', 39);
    expect(await opCount(f, 'store-ahead')).toBe(0);
  }, 60_000);
});
