// Sessions against real bwrap: state that persists between commands, framing that no output can confuse,
// stdin, queueing, and the round-trip latency. Run for both shells a session may use.
import { randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SESSION_SHELLS } from '@agentfense/control';
import { openSession, startSandbox } from '../helpers/session-fixture.js';

/** All 256 byte values, as a printf format of octal escapes. */
const ALL_BYTES = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
const ALL_BYTES_PRINTF = [...ALL_BYTES].map((b) => `\\${b.toString(8).padStart(3, '0')}`).join('');

describe.each(SESSION_SHELLS)('session with %s', (shell) => {
  describe('state persists between commands', () => {
    it('cwd, exported and shell variables, functions', async () => {
      const s = await openSession({ shell });
      await s.run('cd /tmp && mkdir -p d && cd d');
      await s.run('export EXPORTED=e; LOCAL=l; greet() { echo "hello $1"; }');
      const r = await s.run(
        'pwd; echo "$EXPORTED $LOCAL"; greet you; sh -c \'echo "child:$EXPORTED:$LOCAL"\'',
      );
      expect(r.stdout).toBe('/tmp/d\ne l\nhello you\nchild:e:\n');
    });

    it('a sourced file', async () => {
      const { sb, workspace } = await startSandbox();
      await writeFile(join(workspace, 'env.sh'), 'FROM_FILE=sourced\nactivate() { echo active; }\n');
      const s = await openSession({ shell, sandbox: sb });
      await s.run('. ./env.sh');
      expect((await s.run('echo $FROM_FILE; activate')).stdout).toBe('sourced\nactive\n');
    });

    it('background jobs', async () => {
      const s = await openSession({ shell });
      const started = await s.run('sleep 100 &');
      expect(started.exitCode).toBe(0);
      const jobs = await s.run('jobs; kill -0 $! && echo alive');
      expect(jobs.stdout).toMatch(/^\[1\].*Running/);
      expect(jobs.stdout).toMatch(/alive\n$/);
    });

    it('$? of the previous command, and the initial env', async () => {
      const s = await openSession({ shell, env: { INITIAL: 'from-create' } });
      await s.run('false');
      expect((await s.run('echo $?')).stdout).toBe('1\n');
      expect((await s.run('echo $INITIAL')).stdout).toBe('from-create\n');
    });

    it('output a background job prints between commands goes to the next command', async () => {
      const s = await openSession({ shell });
      await s.run('(sleep 0.3; echo late) >&2 &');
      await new Promise((resolve) => setTimeout(resolve, 800));
      const r = await s.run('echo now >&2');
      expect(r.stderr).toMatch(/late\nnow\n$/);
    });

    it('exec redirections (exec >file sends later output to the file, trailers still arrive)', async () => {
      const s = await openSession({ shell });
      await s.run('exec >/tmp/out.txt');
      const r = await s.run('echo to-file; echo to-stderr >&2');
      expect(r.stdout).toBe('');
      expect(r.stderr).toBe('to-stderr\n');
      expect((await s.run('cat /tmp/out.txt >&2')).stderr).toBe('to-file\n');
    });
  });

  describe('framing', () => {
    it('separates stdout and stderr, exact bytes, with the exit code', async () => {
      const s = await openSession({ shell });
      const r = await s.run("printf 'a\\nb'; printf 'err\\n\\n' >&2; (exit 42)", { encoding: 'buffer' });
      expect(r.stdout).toEqual(Buffer.from('a\nb'));
      expect(r.stderr).toEqual(Buffer.from('err\n\n'));
      expect(r).toMatchObject({ exitCode: 42, timedOut: false, truncated: false, sessionClosed: false });
    });

    it.each([
      ['no trailing newline', 'printf abc', 'abc', 0],
      ['leading and trailing blanks kept', "printf '  \\n x \\n\\n'", '  \n x \n\n', 0],
      ['a trailing comment', "echo hi # a comment with a quote ' and ;", 'hi\n', 0],
      ['a trailing &', 'echo bg >/dev/null &', '', 0],
      ['a heredoc', 'cat <<EOF\nline $((1+1))\nEOF', 'line 2\n', 0],
      ['a quoted heredoc at the very end', "cat <<'END'\n$HOME `x`\nEND", '$HOME `x`\n', 0],
      ['single quotes', "echo 'it'\\''s' \"it's\"", "it's it's\n", 0],
      ['several lines', 'echo one\necho two\n\necho three', 'one\ntwo\nthree\n', 0],
      ['a line continuation at the end', 'echo cont \\', 'cont\n', 0],
      ['an unbalanced quote (syntax error)', "echo 'never closed", '', 2],
      ['an unclosed function', 'f() {', '', 2],
      ['an unclosed command substitution', 'echo $(', '', null],
      ['a heredoc without its end', 'cat <<EOF\nno end', 'no end\n', 0],
      ['a missing command', 'no-such-command-af', '', 127],
      ['false', 'false', '', 1],
      ['unicode', "printf 'é✓'", 'é✓', 0],
    ])('%s', async (_name, command, stdout, code) => {
      const s = await openSession({ shell });
      const r = await s.run(command);
      expect(r.stdout).toBe(stdout);
      if (code !== null) expect(r.exitCode).toBe(code);
      else expect(r.exitCode).not.toBe(0);
      // The session is still in step: the next command gets its own output only, and parses afresh (bash
      // once left its parser mid-`case` after an eval syntax error).
      const next = await s.run('case x in x) echo next ;; esac', { encoding: 'buffer' });
      expect(next).toMatchObject({ stdout: Buffer.from('next\n'), stderr: Buffer.from(''), exitCode: 0 });
    });

    it('binary output: all 256 byte values on stdout and stderr', async () => {
      const s = await openSession({ shell });
      const r = await s.run(`printf '${ALL_BYTES_PRINTF}'; printf '${ALL_BYTES_PRINTF}' >&2`, {
        encoding: 'buffer',
      });
      expect(r.stdout).toEqual(ALL_BYTES);
      expect(r.stderr).toEqual(ALL_BYTES);
    });

    it('output that imitates the protocol: trailers, relay lines, the helper names', async () => {
      const s = await openSession({ shell });
      const fakeNonce = randomBytes(16).toString('hex');
      const fake = `\\037agentfense:${fakeNonce}:0\\n`;
      // A command whose text holds relay control lines and protocol calls: all of it is data.
      const command = [
        `printf '${fake}x'`,
        `printf '${fake}' >&2`,
        "echo '",
        '!INT',
        '!KILL',
        '.__af_t 00000000000000000000000000000000',
        "'",
        'echo "__af_t $__af_d" >/dev/null',
      ].join('\n');
      await s.run('sleep 100 &');
      const r = await s.run(command, { encoding: 'buffer' });
      expect(r.stdout.toString('latin1')).toBe(
        `\x1fagentfense:${fakeNonce}:0\nx\n!INT\n!KILL\n.__af_t 00000000000000000000000000000000\n\n`,
      );
      expect(r.stderr.toString('latin1')).toBe(`\x1fagentfense:${fakeNonce}:0\n`);
      // No interrupt or kill reached the session: the background job lives.
      expect((await s.run('kill -0 $! && echo alive')).stdout).toBe('alive\n');
    });

    it('large output, complete', async () => {
      const s = await openSession({ shell });
      const r = await s.run('head -c 3000000 /dev/zero | tr "\\0" x; echo; head -c 100000 /dev/zero >&2', {
        encoding: 'buffer',
      });
      expect(r.stdout.length).toBe(3_000_001);
      expect(r.stderr.length).toBe(100_000);
    });

    it('caps output at maxOutputBytes and says so', async () => {
      const s = await openSession({ shell, maxOutputBytes: 1000 });
      const r = await s.run('head -c 50000 /dev/zero', { encoding: 'buffer' });
      expect(r.stdout.length).toBe(1000);
      expect(r.truncated).toBe(true);
      expect(await s.run('echo ok', { encoding: 'buffer' })).toMatchObject({
        stdout: Buffer.from('ok\n'),
        truncated: false,
      });
    });
  });

  describe('stdin', () => {
    it('is empty by default: cat and read do not hang or eat the protocol', async () => {
      const s = await openSession({ shell });
      expect(await s.run('cat; echo done', { encoding: 'buffer' })).toMatchObject({
        stdout: Buffer.from('done\n'),
        exitCode: 0,
      });
      const read = await s.run('read x; echo "status $? [$x]"');
      expect(read.stdout).toBe('status 1 []\n');
      expect((await s.run('echo after')).stdout).toBe('after\n');
    });

    it('feeds the given bytes, then end of file', async () => {
      const s = await openSession({ shell });
      const text = "line1\nline2 with ' and \\ and % and -x";
      expect((await s.run('cat', { stdin: text })).stdout).toBe(text);
      const read = await s.run('read first; echo "[$first]"; cat', { stdin: 'a\nb\nc' });
      expect(read.stdout).toBe('[a]\nb\nc');
      expect((await s.run('cat', { stdin: ALL_BYTES, encoding: 'buffer' })).stdout).toEqual(ALL_BYTES);
      // A later command without stdin sees none of it.
      expect((await s.run('cat; echo end')).stdout).toBe('end\n');
    });

    it('a background reader started earlier cannot steal the next command', async () => {
      const s = await openSession({ shell });
      await s.run('cat > /tmp/stolen &');
      expect((await s.run('echo visible')).stdout).toBe('visible\n');
      expect((await s.run('sleep 0.2; wc -c < /tmp/stolen')).stdout.trim()).toBe('0');
    });
  });

  it('runs concurrent execs one at a time, in call order', async () => {
    const s = await openSession({ shell });
    const calls = Array.from({ length: 5 }, (_, i) =>
      s.run(`echo start $(date +%s%N); sleep 0.1; echo ${i} end $(date +%s%N)`),
    );
    const results = await Promise.all(calls);
    const spans = results.map((r) => {
      const [start, end] = r.stdout.trim().split('\n');
      return { start: BigInt(start?.split(' ')[1] ?? '0'), end: BigInt(end?.split(' ')[2] ?? '0'), i: end };
    });
    spans.forEach((span, i) => expect(span.i).toMatch(new RegExp(`^${i} end`)));
    for (let i = 1; i < spans.length; i += 1) {
      expect((spans[i]?.start ?? 0n) >= (spans[i - 1]?.end ?? 0n)).toBe(true);
    }
  });

  it('writes to /workspace are visible on the host', async () => {
    const { sb, workspace } = await startSandbox();
    const s = await openSession({ shell, sandbox: sb });
    await s.run('cd /workspace && printf written > out.txt');
    expect(await readFile(join(workspace, 'out.txt'), 'utf8')).toBe('written');
  });
});
