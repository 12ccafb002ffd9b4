// The library's one shape (docs/decisions.md "One library shape: strings by default, bytes on request") on a
// real sandbox: every way to run a command gives strings by default and Buffers with `{ encoding: 'buffer'
// }`; the previous names still work as deprecated aliases with their old results; `timeout` (not the option's
// name) is refused.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidArgumentError } from '@agentfense/protocol';
import { ControlPlane, Sandbox } from '@agentfense/control';
import type { Session } from '@agentfense/control';
import { assertCleanAndRemove, makeDirs } from '../helpers/control-fixtures.js';
import type { TestDirs } from '../helpers/control-fixtures.js';

/** "é" then a byte that is not UTF-8: the bytes tell a Buffer from a decoded string. */
const PRINT = "printf 'caf\\303\\251\\377'; printf 'err' >&2";
const BYTES = Buffer.from([0x63, 0x61, 0x66, 0xc3, 0xa9, 0xff]);

describe('one library shape', () => {
  let dirs: TestDirs;
  let cp: ControlPlane;
  let sb: Sandbox;
  let shell: Session;

  beforeAll(async () => {
    dirs = await makeDirs();
    cp = await ControlPlane.open({ dataDir: dirs.dataDir });
    sb = await Sandbox.fromLocal(dirs.repo, { controlPlane: cp });
    shell = await sb.session();
  });
  afterAll(async () => {
    await shell?.close();
    await sb?.destroy();
    await cp?.close();
    await assertCleanAndRemove(dirs);
  });

  it('Sandbox.run: strings by default, bytes on request; exec is the bytes alias', async () => {
    const text = await sb.run(PRINT);
    expect(text.stdout).toBe('café\uFFFD');
    expect(text.stderr).toBe('err');
    expect(text.exitCode).toBe(0);
    const bytes = await sb.run(PRINT, { encoding: 'buffer' });
    expect(Buffer.isBuffer(bytes.stdout)).toBe(true);
    expect(bytes.stdout.equals(BYTES)).toBe(true);
    expect(bytes.stderr.toString()).toBe('err');
    // The deprecated name keeps its result: Buffers.
    expect((await sb.exec(PRINT)).stdout.equals(BYTES)).toBe(true);
    // Timeouts have one name, timeoutMs.
    const slow = await sb.run('sleep 5', { timeoutMs: 200 });
    expect(slow.timedOut).toBe(true);
  });

  it('Sandbox.stream: string chunks by default, Buffers on request; execStream is the bytes alias', async () => {
    const command = "printf 'a\\303'; sleep 0.2; printf '\\251b'";
    const stream = sb.stream(command);
    const chunks: string[] = [];
    for await (const chunk of stream) {
      expect(typeof chunk.data).toBe('string');
      chunks.push(chunk.data);
    }
    // The "é" split across two writes arrives whole.
    expect(chunks.join('')).toBe('aéb');
    expect(chunks.every((c) => !c.includes('\uFFFD'))).toBe(true);
    expect((await stream.result).stdout).toBe('aéb');
    for (const bytesStream of [sb.stream(command, { encoding: 'buffer' }), sb.execStream(command)]) {
      const parts: Buffer[] = [];
      for await (const chunk of bytesStream) parts.push(chunk.data);
      expect(Buffer.concat(parts).toString('utf8')).toBe('aéb');
      expect(Buffer.isBuffer((await bytesStream.result).stdout)).toBe(true);
    }
  });

  it('Session.run and ControlPlane.run take the same shape; exec is the bytes alias on both', async () => {
    const text = await shell.run(PRINT);
    expect(text.stdout).toBe('café\uFFFD');
    const bytes = await shell.run(PRINT, { encoding: 'buffer' });
    expect(bytes.stdout.equals(BYTES)).toBe(true);
    expect((await shell.exec(PRINT)).stdout.equals(BYTES)).toBe(true);
    expect((await cp.run(sb.id, PRINT)).stdout).toBe('café\uFFFD');
    expect((await cp.run(sb.id, PRINT, { encoding: 'buffer' })).stdout.equals(BYTES)).toBe(true);
    expect((await cp.exec(sb.id, PRINT)).stdout.equals(BYTES)).toBe(true);
  });

  it('refuses the previous timeout name and unknown encodings with a clear error', async () => {
    // A type error too (the option does not exist); JavaScript callers get an error, never a silent no-op.
    // @ts-expect-error -- `timeout` is not an option: timeoutMs is
    await expect(sb.run('true', { timeout: 5 })).rejects.toThrow(/use timeoutMs/);
    // @ts-expect-error -- see above
    await expect(shell.run('true', { timeout: 5 })).rejects.toThrow(InvalidArgumentError);
    // @ts-expect-error -- 'latin1' is not an encoding of the library
    await expect(cp.run(sb.id, 'true', { encoding: 'latin1' })).rejects.toThrow(/encoding must be/);
  });
});
