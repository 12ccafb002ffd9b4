// Data paths on a real mount: files above 4 GiB (sparse), open files that lose their name, hard links
// whose first name goes away, parallel readers, writers and renames, and read-ahead across files.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFile, stat, writeFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { AGENT_SAFE, leftoverMounts, mountFixture, useMountHygiene } from '../helpers/worker-fixture.js';

const TREE = {
  'src/a.txt': 'a\n',
  'output/base.txt': 'base\n',
} as const;

describe('file data through the mount', () => {
  useMountHygiene();

  it('a sparse file above 4 GiB: write at 5 GiB, read it back, stat size; the delta stays sparse', async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE });
    const script = [
      'set -e',
      'printf "beyond-4GiB" | dd of=output/big bs=1 seek=$((5*1024*1024*1024)) conv=notrunc status=none',
      'stat -c %s output/big',
      'dd if=output/big bs=1 skip=$((5*1024*1024*1024)) count=11 status=none; echo',
      'dd if=output/big bs=1 skip=$((4*1024*1024*1024)) count=4 status=none | od -An -tx1',
      'truncate -s $((6*1024*1024*1024)) output/big && stat -c %s output/big',
    ].join('\n');
    const r = await f.sandbox(script);
    expect(r.stderr).toBe('');
    expect(r.stdout.split('\n')).toEqual([
      String(5 * 1024 ** 3 + 11),
      'beyond-4GiB',
      ' 00 00 00 00',
      String(6 * 1024 ** 3),
      '',
    ]);
    const host = await stat(join(f.delta, 'upper/output/big'));
    expect(host.size).toBe(6 * 1024 ** 3);
    expect(host.blocks * 512).toBeLessThan(1024 * 1024);
    const { changes } = await f.worker.client.request('changes', {});
    expect(changes).toEqual([
      { path: '/output/big', kind: 'added', type: 'file', size: 6 * 1024 ** 3, mode: 0o644 },
    ]);
  });

  it('an open file keeps working after it is unlinked or renamed over', async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE });
    const r = await f.sandbox(
      [
        'set -e',
        'echo one > output/tmp.txt',
        'exec 3<> output/tmp.txt',
        'rm output/tmp.txt',
        'echo two >&3',
        'cat output/tmp.txt 2>/dev/null || echo gone',
        'exec 4< output/base.txt',
        'echo replaced > output/new.txt && mv output/new.txt output/base.txt',
        'cat <&4',
        'cat output/base.txt',
      ].join('\n'),
    );
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('gone\nbase\nreplaced\n');
  });

  it('an open file whose name is gone can be truncated and written through its descriptor', async () => {
    // An anonymous spool file (created, then unlinked at once, as tmpfile() does where O_TMPFILE is
    // missing): SETATTR of a node without a path, served through the worker's own handle.
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE });
    const r = await f.sandbox(
      [
        'set -e',
        'exec 3<> output/spool',
        'rm output/spool',
        'head -c 3000000 /dev/zero | tr "\\0" x >&3',
        'stat -L -c %s /proc/self/fd/3',
        'truncate -s 5 /proc/self/fd/3',
        'stat -L -c %s /proc/self/fd/3',
        'head -c 5 /proc/self/fd/3; echo',
        'ls output',
      ].join('\n'),
    );
    expect(r.stderr).toBe('');
    expect(r.stdout.split('\n')).toEqual(['3000000', '5', 'xxxxx', 'base.txt', '']);
  });

  it('a removed directory that is still the cwd can be stat()ed and listed (empty), as on a disk', async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE });
    const r = await f.sandbox(
      'mkdir output/d && cd output/d && rmdir ../d && ls -a | wc -l && stat -c %h . && pwd',
    );
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('0\n0\n/workspace/output/d\n'); // ext4 shows the same
  });

  // A process holding the (lazily detached) mount keeps its FUSE connection alive; the worker aborts the
  // connection after a short grace so it still exits cleanly and quickly. The busy process sees ENOTCONN.
  it('stop() leaves no mount and no worker while a sandbox process still sits in the mount', async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE });
    const busy = f.sandbox('cd output && exec 3< base.txt && sleep 8');
    await new Promise((r) => setTimeout(r, 300));
    const started = Date.now();
    await f.stop();
    expect(await leftoverMounts()).toEqual([]);
    expect(f.worker.alive).toBe(false);
    expect(await f.worker.exited).toEqual({ code: 0, signal: null }); // not the SIGKILL fallback
    expect(Date.now() - started).toBeLessThan(4000);
    await busy;
  }, 60_000);

  it('a hard link keeps working for reads, writes and chmod after its first name is removed', async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE });
    const r = await f.sandbox(
      [
        'set -e',
        'echo one > output/x',
        'ln output/x output/y',
        'rm output/x',
        'echo two >> output/y',
        'chmod 600 output/y',
        'cat output/y',
        'stat -c "%a %h" output/y',
        'ln output/base.txt output/b2 && rm output/base.txt && echo more >> output/b2 && cat output/b2',
        'mv output/b2 output/b3 && echo last >> output/b3 && cat output/b3',
      ].join('\n'),
    );
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('one\ntwo\n600 1\nbase\nmore\nbase\nmore\nlast\n');
    const { changes } = await f.worker.client.request('changes', {});
    expect(changes.map((c) => `${c.kind} ${c.path}`)).toEqual([
      'added /output/b3',
      'deleted /output/base.txt',
      'added /output/y',
    ]);
  });

  it('mknod of a regular file, mkfifo, and bind(2) of a Unix socket work in a write area only', async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE });
    const script = String.raw`
import os, socket, stat
os.mknod('output/reg', 0o640 | stat.S_IFREG)
os.mkfifo('output/fifo')
s = socket.socket(socket.AF_UNIX); s.bind('output/sock'); s.listen()
c = socket.socket(socket.AF_UNIX); c.connect('output/sock'); a, _ = s.accept(); c.send(b'hi')
print(a.recv(2).decode(), oct(os.stat('output/reg').st_mode), stat.S_ISFIFO(os.stat('output/fifo').st_mode),
      stat.S_ISSOCK(os.stat('output/sock').st_mode))
for fn in (lambda: os.mknod('src/reg'), lambda: socket.socket(socket.AF_UNIX).bind('src/sock')):
    try: fn(); print('created')
    except OSError as e: print(e.errno)
`;
    const r = await f.sandbox('python3 -', { stdin: script });
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('hi 0o100640 True True\n13\n13\n');
    const result = await f.worker.client.request('commit', { mode: 'detect-conflicts' });
    expect(result.applied.map((c) => c.path)).toEqual(['/output/reg']);
    expect((await stat(join(f.lower, 'output/reg'))).mode & 0o777).toBe(0o640);
    await expect(stat(join(f.lower, 'output/sock'))).rejects.toThrow(/ENOENT/);
  });

  it('parallel writers and readers (8 + 8 processes) see consistent data', async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE });
    const script = [
      'set -e',
      'mkdir -p output/par',
      'for i in 1 2 3 4 5 6 7 8; do',
      '  ( j=0; while [ $j -lt 40 ]; do head -c 65536 /dev/zero | tr "\\0" "$i" > output/par/w$i.tmp && mv output/par/w$i.tmp output/par/w$i; j=$((j+1)); done ) &',
      '  ( j=0; while [ $j -lt 200 ]; do cat src/a.txt output/base.txt > /dev/null; j=$((j+1)); done ) &',
      'done',
      'wait',
      'for i in 1 2 3 4 5 6 7 8; do printf "%s " "$(tr -d "$i" < output/par/w$i | wc -c)$(stat -c :%s output/par/w$i)"; done; echo',
      'ls output/par | wc -l',
    ].join('\n');
    // ~3,000 processes: 32 s at load 9, past the fixture's default 50 s command limit at load 12-18.
    const r = await f.sandbox(script, { timeoutMs: 100_000 });
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe(`${'0:65536 '.repeat(8)}\n8\n`);
  }, 120_000);

  it('parallel renames of distinct files and directories keep the tree consistent', async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE });
    const script = [
      'set -e',
      'for i in 1 2 3 4 5 6 7 8; do mkdir -p output/d$i && echo $i > output/d$i/f; done',
      'for i in 1 2 3 4 5 6 7 8; do',
      '  ( j=0; while [ $j -lt 50 ]; do mv output/d$i output/e$i; mv output/e$i/f output/e$i/g; mv output/e$i/g output/e$i/f; mv output/e$i output/d$i; j=$((j+1)); done ) &',
      'done',
      'wait',
      'cat output/d*/f | tr "\\n" " "; echo',
      'find output -name "e*" | wc -l',
    ].join('\n');
    const r = await f.sandbox(script);
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('1 2 3 4 5 6 7 8 \n0\n');
    const { changes } = await f.worker.client.request('changes', {});
    expect(changes.filter((c) => c.path.startsWith('/output/d')).length).toBe(16);
  }, 120_000);

  // A WRITE payload of 64 KiB or more reaches the worker inside the binding's receive buffer, which the
  // binding takes back after the reply and reads the next big WRITE into: a buffer reused too early, or
  // handed to two requests, would put one writer's bytes into another's file.
  it('big writes from parallel writers (64 KiB-1 MiB requests) land byte for byte', async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE });
    const sums: string[] = [];
    for (let w = 0; w < 4; w++) {
      const bytes = Buffer.alloc(12 * 1024 * 1024);
      for (let i = 0; i < bytes.length; i += 4) bytes.writeUInt32LE(((i + w) * 2654435761) >>> 0, i);
      await writeFile(join(f.lower, `src/p${w}.bin`), bytes);
      sums.push(createHash('sha256').update(bytes).digest('hex'));
    }
    const script = [
      'set -e',
      // four writers at once, each with its own block size (1 MiB, 192 KiB, 64 KiB, 1 MiB at odd offsets)
      'dd if=src/p0.bin of=output/c0.bin bs=1M status=none &',
      'dd if=src/p1.bin of=output/c1.bin bs=192K status=none &',
      'dd if=src/p2.bin of=output/c2.bin bs=64K status=none &',
      '( dd if=src/p3.bin bs=1000000 status=none | dd of=output/c3.bin bs=1000000 iflag=fullblock status=none ) &',
      'wait',
      'for i in 0 1 2 3; do sha256sum < output/c$i.bin; done',
    ].join('\n');
    const r = await f.sandbox(script);
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe(sums.map((s) => `${s}  -\n`).join(''));
    for (let w = 0; w < 4; w++) {
      const host = createHash('sha256')
        .update(await readFile(join(f.delta, `upper/output/c${w}.bin`)))
        .digest('hex');
      expect(host).toBe(sums[w]);
    }
  }, 120_000);

  // The mount's read-ahead window is raised to the request size (1 MiB), so a sequential reader's READs
  // grow from 128 KiB to 1 MiB; every size in between must come back intact (a READ bigger than a pooled
  // 128 KiB buffer used to fail with EIO).
  it('a large file read sequentially arrives in READs of up to 1 MiB, byte for byte', async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE });
    const bytes = Buffer.alloc(24 * 1024 * 1024);
    for (let i = 0; i < bytes.length; i += 4) bytes.writeUInt32LE((i * 2654435761) >>> 0, i);
    await writeFile(join(f.lower, 'src/big.bin'), bytes);
    const want = createHash('sha256').update(bytes).digest('hex');
    expect((await f.worker.client.request('stats', {})).fuse?.features.readahead).toBe(true);
    const reads = async (): Promise<number> =>
      (await f.worker.client.request('stats', {})).ops.read?.count ?? 0;
    const before = await reads();
    // bs=64K: the kernel's window starts at 128 KiB and doubles up to the 1 MiB maximum
    const r = await f.sandbox('dd if=src/big.bin bs=64K status=none | sha256sum');
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe(`${want}  -\n`);
    // 24 MiB in 128 KiB READs would be 192 of them
    expect(await reads()).toBeLessThan(before + 64);
    expect((await f.sandbox('sha256sum < src/big.bin')).stdout).toBe(`${want}  -\n`);
  });

  it('reads ahead for a walker that reads what it looks up, never for a stat-only walk', async () => {
    const tree: Record<string, string> = { 'w/app.key': 'hidden needle\n' };
    for (let i = 0; i < 40; i++) {
      tree[`w/f${String(i).padStart(2, '0')}.txt`] = `file ${i} needle\n`;
      tree[`s/g${String(i).padStart(2, '0')}.txt`] = `stat only ${i}\n`;
    }
    const f = await mountFixture({ tree, rules: AGENT_SAFE });
    // A FIFO among the files: it must be neither warmed nor waited for.
    await promisify(execFile)('mkfifo', [join(f.lower, 'w/pipe')]);
    const readaheads = async (): Promise<number> => {
      const { ops } = await f.worker.client.request('stats', {});
      return ops.readahead?.count ?? 0;
    };

    const listed = await f.sandbox('ls -l s | wc -l');
    expect(listed.stdout.trim()).toBe('41'); // "total" + 40 files, each looked up
    expect(await readaheads()).toBe(0);

    const grep = await f.sandbox('grep -r needle w | sort');
    expect(grep.stderr).toBe('');
    const expected = Array.from(
      { length: 40 },
      (_, i) => `w/f${String(i).padStart(2, '0')}.txt:file ${i} needle`,
    );
    expect(grep.stdout.trim().split('\n')).toEqual(expected.sort());
    const warmed = await readaheads();
    expect(warmed).toBeGreaterThan(10); // the predictor needs 8 looked-up files that were read first
    expect(warmed).toBeLessThanOrEqual(40); // only the readable regular files: not app.key, not the FIFO
  }, 60_000);

  it('a READ whose name now leads to a FIFO fails with EIO instead of hanging the worker', async () => {
    // The sandbox replaces a FIFO of the codebase with a file and keeps it open; a discard then brings
    // the FIFO back under the name while the kernel still holds the regular-file node.
    const f = await mountFixture({ tree: { 'output/keep.txt': 'k\n' }, rules: AGENT_SAFE });
    await promisify(execFile)('mkfifo', [join(f.lower, 'output/p')]);
    const script = [
      'rm output/p && printf data > output/p',
      'exec 3< output/p',
      'touch output/ready',
      'sleep 2',
      // os.read: a bare read(2); a stat would find the type changed, and the kernel would fail it by itself.
      `python3 -c 'import os, sys\ntry: os.read(3, 4)\nexcept OSError as e: sys.exit(e.strerror)'; echo " rc=$?"`,
    ].join('\n');
    const running = f.sandbox(script);
    for (let i = 0; i < 100 && (await f.host('test -e output/ready')).code !== 0; i++) {
      await new Promise((r) => setTimeout(r, 50));
    }
    await f.worker.client.request('discard', {});
    const r = await running;
    expect(r.stdout).toBe(' rc=1\n');
    expect(r.stderr).toBe('Input/output error\n');
    // The worker still answers.
    expect((await f.host('cat output/keep.txt')).stdout).toBe('k\n');
  }, 60_000);
});
