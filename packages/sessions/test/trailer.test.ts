// The trailer scanner: trailers split anywhere, look-alike text, several watched nonces, the output cap.
import { describe, expect, it } from 'vitest';
import { StreamCollector, trailerBytes, trailerPrefix } from '../src/trailer.js';

const A = 'a'.repeat(32);
const B = 'b'.repeat(32);

function collector(maxBytes = 1024): StreamCollector {
  return new StreamCollector({ maxBytes });
}

/** Pushes `bytes` in chunks of `size`. */
function pushIn(c: StreamCollector, bytes: Buffer, size: number): void {
  for (let i = 0; i < bytes.length; i += size) c.push(bytes.subarray(i, i + size));
}

describe('StreamCollector', () => {
  it.each([1, 2, 3, 7, 64, 10_000])('finds a trailer split into chunks of %i bytes', (size) => {
    const c = collector();
    c.watch(A);
    pushIn(
      c,
      Buffer.concat([Buffer.from('out\nno newline'), trailerBytes(A, 42), Buffer.from('later')]),
      size,
    );
    const event = c.event(A);
    expect(event).toEqual({ nonce: A, status: 42, offset: 'out\nno newline'.length });
    expect(c.take(event?.offset ?? 0)).toEqual({ data: Buffer.from('out\nno newline'), truncated: false });
    // Bytes after the trailer stay for the next command.
    c.unwatchAll();
    expect(c.flush().data.toString()).toBe('later');
  });

  it('keeps every byte value, and text that only looks like a trailer, as output', () => {
    const c = collector(4096);
    const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    const fake = Buffer.concat([
      trailerBytes(B, 0), // another nonce
      trailerPrefix(A).subarray(0, 20), // a truncated prefix
      trailerPrefix(A),
      Buffer.from('x1\n'), // the prefix, then no status
      Buffer.from(`${trailerPrefix(A).toString('latin1')}1234\n`, 'latin1'), // too many digits
    ]);
    const output = Buffer.concat([all, fake, all]);
    c.watch(A);
    pushIn(c, Buffer.concat([output, trailerBytes(A, 0)]), 5);
    const event = c.event(A);
    expect(event?.status).toBe(0);
    expect(c.take(event?.offset ?? 0).data).toEqual(output);
  });

  it('waits for the status and newline of a trailer that is still arriving', () => {
    const c = collector();
    c.watch(A);
    c.push(Buffer.concat([Buffer.from('x'), trailerPrefix(A), Buffer.from('1')]));
    expect(c.event(A)).toBeUndefined();
    c.push(Buffer.from('27\n'));
    expect(c.event(A)).toEqual({ nonce: A, status: 127, offset: 1 });
  });

  it('records several watched trailers in order and cuts each out of the output', () => {
    const c = collector();
    c.watch(A);
    c.watch(B);
    c.push(Buffer.concat([Buffer.from('one'), trailerBytes(A, 0), Buffer.from('two'), trailerBytes(B, 130)]));
    expect(c.event(A)?.offset).toBe(3);
    const b = c.event(B);
    expect(b).toEqual({ nonce: B, status: 130, offset: 6 });
    expect(c.take(b?.offset ?? 0).data.toString()).toBe('onetwo');
  });

  it('ignores trailers of nonces it is not watching', () => {
    const c = collector();
    c.push(trailerBytes(A, 0));
    c.watch(A);
    expect(c.event(A)).toBeUndefined();
    expect(c.flush().data).toEqual(trailerBytes(A, 0));
  });

  it('keeps at most maxBytes of output, says so, and still finds the trailer', () => {
    const c = collector(10);
    c.watch(A);
    pushIn(c, Buffer.concat([Buffer.alloc(100_000, 'x'), trailerBytes(A, 0), Buffer.from('next')]), 4096);
    const event = c.event(A);
    expect(event?.offset).toBe(100_000);
    expect(c.take(event?.offset ?? 0)).toEqual({ data: Buffer.alloc(10, 'x'), truncated: true });
    c.unwatchAll();
    expect(c.flush()).toEqual({ data: Buffer.from('next'), truncated: false });
  });

  it('flush returns held-back bytes too (the shell exited mid-output)', () => {
    const c = collector();
    c.watch(A);
    c.push(Buffer.from('tail'));
    expect(c.flush()).toEqual({ data: Buffer.from('tail'), truncated: false });
  });
});
