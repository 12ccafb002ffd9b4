// `stat -c %h` of a directory counted hidden subdirectories (host link count), telling
// the agent that something it cannot see is there. The count must be 2 + visible subdirectories.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { AGENT_SAFE, mountFixture, useMountHygiene } from '../helpers/worker-fixture.js';

describe('directory link counts', () => {
  useMountHygiene();

  it('count only the subdirectories the sandbox can see', async () => {
    const f = await mountFixture({
      tree: {
        'src/a.txt': 'a\n',
        'secrets/k.txt': 'k\n',
        'output/secrets/deep.txt': 'd\n',
        'output/visible/x.txt': 'x\n',
        'lib/one/a': 'a',
        'lib/two/b': 'b',
      },
      rules: AGENT_SAFE,
    });
    const r = await f.sandbox('stat -c %h . output lib src');
    // root: src, output, lib (secrets hidden); output: visible (secrets hidden); lib: one, two; src: none.
    expect(r.stdout).toBe('5\n3\n4\n2\n');
    // A codebase leaf (host count 2, so no listing is made for it) counts the directory made in it; a
    // file written beside hidden and visible directories changes nothing.
    const m = await f.sandbox(
      'mkdir output/visible/new && touch output/f && stat -c %h output/visible output',
    );
    expect(m.stdout).toBe('3\n3\n');
    // A directory the sandbox deletes stops counting as well (whited-out codebase directories).
    const g = await f.sandbox('rm -rf output/visible && stat -c %h output');
    expect(g.stdout).toBe('2\n');
  });

  it('a count the worker kept follows a rule change at once: a subdirectory hidden now stops counting', async () => {
    const f = await mountFixture({
      tree: { 'output/a/x.txt': 'x\n', 'output/b/y.txt': 'y\n' },
      rules: AGENT_SAFE,
    });
    // The delta holds `output` after the first write, so its count takes a listing, which the worker keeps.
    // The shell's working directory holds the node (the kernel cannot forget it) while the rules change.
    const run = f.sandbox(
      'cd output && touch f && stat -c %h . && touch ready && sleep 2 && stat -c %h . && ls',
    );
    const ready = join(f.delta, 'upper', 'output', 'ready');
    for (let i = 0; i < 100 && !existsSync(ready); i++) await new Promise((r) => setTimeout(r, 20));
    expect(existsSync(ready)).toBe(true);
    await f.worker.client.request('setRules', {
      rules: [...AGENT_SAFE, { pattern: '/output/b/**', permission: 'none', priority: 200 }],
    });
    expect((await run).stdout).toBe('4\n3\na\nf\nready\n');
  });
});
