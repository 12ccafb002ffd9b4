// The delta survives a worker crash: reopening restores the same view.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

import type { Delta } from '../../src/delta/delta.js';
import { fixture, names, read, write } from './fixture.js';

const execFileAsync = promisify(execFile);
const here = fileURLToPath(new URL('.', import.meta.url));

describe('Delta durability', () => {
  it('reopening without close restores whiteouts, opaque dirs, adds and base records', async () => {
    const f = await fixture({ a: 'A', gone: 'g', 'd/x': 'x', 'e/y': 'y' });
    await write(f.delta, '/a', 'changed');
    await f.delta.unlink('/gone');
    await f.delta.unlink('/d/x');
    await f.delta.rmdir('/d');
    await f.delta.mkdir('/d', 0o755);
    await write(f.delta, '/d/z', 'z');
    await f.delta.mkdir('/added', 0o755);
    await write(f.delta, '/added/f', 'f');
    await f.delta.rename('/added', '/moved');
    const view = async (d: Delta): Promise<unknown> => ({
      root: await names(d, '/'),
      d: await names(d, '/d'),
      a: await read(d, '/a'),
      changes: await d.changes(),
    });
    const before = await view(f.delta);
    // The first object is never closed before the second opens: nothing depends on close().
    const reopened = await f.open(f.deltaDir);
    expect(await view(reopened)).toEqual(before);
  });

  it('survives a real process death (SIGKILL after the writes)', async () => {
    const f = await fixture({ a: 'A', b: 'B' });
    await f.delta.close();
    const script = `
      import { Delta } from ${JSON.stringify(join(here, '../../src/delta/delta.ts'))};
      const d = await Delta.open({ lowerDir: process.argv[1], deltaDir: process.argv[2] });
      await d.unlink('/a');
      const fh = await d.create('/c', 0o644);
      await fh.writeFile('from the dead');
      await fh.close();
      process.kill(process.pid, 'SIGKILL');
    `;
    await expect(
      execFileAsync(
        process.execPath,
        ['--import', 'tsx', '--input-type=module', '-e', script, f.lower, f.deltaDir],
        {
          cwd: join(here, '../../../..'),
        },
      ),
    ).rejects.toMatchObject({ signal: 'SIGKILL' });
    const reopened = await f.open(f.deltaDir);
    expect(await names(reopened, '/')).toEqual(['b', 'c']);
    expect(await read(reopened, '/c')).toBe('from the dead');
    expect((await reopened.changes()).map((c) => `${c.kind} ${c.path}`)).toEqual(['deleted /a', 'added /c']);
  }, 30_000);

  it('compaction keeps the state (commit and discard compact)', async () => {
    const f = await fixture({ a: 'A', b: 'B' });
    await f.delta.unlink('/a');
    await write(f.delta, '/b', 'changed');
    await f.delta.commit({ mode: 'detect-conflicts', paths: ['/a'] });
    const reopened = await f.open(f.deltaDir);
    expect((await reopened.changes()).map((c) => `${c.kind} ${c.path}`)).toEqual(['modified /b']);
  });
});
