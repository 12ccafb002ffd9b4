// The servers' stream bounds: what a stream handed over and its client has not taken is bounded per
// stream and across streams (past either, the source is told to wait), no stream starves, and a stream
// whose client takes nothing for the stall time is reported once.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { StreamBudget, stallError, stallMsFromEnv } from '../src/api/stream-budget.js';
import type { Stall } from '../src/api/stream-budget.js';

afterEach(() => {
  vi.useRealTimers();
});

/** A transport whose writes are taken only when the test says so. */
function transport() {
  const pending: (() => void)[] = [];
  return {
    send: (taken: () => void) => void pending.push(taken),
    takeAll: () => pending.splice(0).forEach((taken) => taken()),
    get waiting() {
      return pending.length;
    },
  };
}

describe('StreamBudget', () => {
  it('lets a stream go on until its own bound, then waits until its client takes', async () => {
    const budget = new StreamBudget({ streamBytes: 100, totalBytes: 1000, stallMs: 60_000 });
    const t = transport();
    const stream = budget.open({ onStall: () => undefined });
    expect(stream.write(60, t.send)).toBeUndefined();
    const wait = stream.write(60, t.send);
    expect(wait).toBeInstanceOf(Promise);
    // Further writes while waiting share the one wait.
    expect(stream.write(10, t.send)).toBe(wait);
    expect(budget.outstanding).toBe(130);
    let resumed = false;
    void wait?.then(() => (resumed = true));
    await Promise.resolve();
    expect(resumed).toBe(false);
    t.takeAll();
    await wait;
    expect(budget.outstanding).toBe(0);
    stream.close();
  });

  it('bounds the total: past it a stream waits after each chunk, and none starves', async () => {
    const budget = new StreamBudget({ streamBytes: 100, totalBytes: 150, stallMs: 60_000 });
    const held = transport(); // clients that do not read
    const a = budget.open({ onStall: () => undefined });
    const b = budget.open({ onStall: () => undefined });
    expect(a.write(80, held.send)).toBeUndefined();
    // Total 160, past the server's 150: b, under its own bound, waits all the same.
    expect(b.write(80, held.send)).toBeInstanceOf(Promise);
    // A new stream still hands its chunk over (it is sent), then waits until it is taken: with the
    // total past its bound, each stream has at most one chunk outstanding.
    const reading = transport();
    const c = budget.open({ onStall: () => undefined });
    const wait = c.write(50, reading.send);
    expect(reading.waiting).toBe(1);
    expect(wait).toBeInstanceOf(Promise);
    reading.takeAll();
    await wait;
    expect(c.write(50, reading.send)).toBeInstanceOf(Promise);
    expect(budget.outstanding).toBe(210);
    for (const s of [a, b, c]) s.close();
    expect(budget.outstanding).toBe(0);
  });

  it('reports a stream whose client takes nothing for the stall time, once, and releases its source', async () => {
    vi.useFakeTimers();
    const budget = new StreamBudget({ streamBytes: 10, totalBytes: 1000, stallMs: 4000 });
    const t = transport();
    const stalls: Stall[] = [];
    const stream = budget.open({ onStall: (stall) => stalls.push(stall) });
    const wait = stream.write(20, t.send);
    await vi.advanceTimersByTimeAsync(3000);
    expect(stalls).toEqual([]);
    await vi.advanceTimersByTimeAsync(2000);
    expect(stalls).toEqual([{ ms: expect.any(Number) as unknown, bytes: 20 }]);
    expect(stalls[0]?.ms).toBeGreaterThanOrEqual(4000);
    await wait; // the source goes on (to its end: its owner ends the stream)
    expect(budget.outstanding).toBe(0);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(stalls).toHaveLength(1);
  });

  it('does not report a slow client that keeps taking, nor a stream with nothing waiting', async () => {
    vi.useFakeTimers();
    const budget = new StreamBudget({ streamBytes: 10, totalBytes: 1000, stallMs: 4000 });
    const t = transport();
    const stalls: Stall[] = [];
    const slow = budget.open({ onStall: (stall) => stalls.push(stall) });
    budget.open({ onStall: (stall) => stalls.push(stall) }); // idle: nothing handed over
    for (let i = 0; i < 5; i++) {
      void slow.write(20, t.send);
      await vi.advanceTimersByTimeAsync(3000);
      t.takeAll();
    }
    expect(stalls).toEqual([]);
  });

  it('says what happened and what to do in the error that ends a stalled stream', () => {
    const err = stallError({ ms: 61_234, bytes: 131_072 }, 'its command is stopped');
    expect(err.code).toBe('AF_TIMEOUT');
    expect(err.message).toBe(
      'the client read nothing of this stream for 61.2 s while 131072 bytes waited for it: the stream is ended and its command is stopped (read the stream as it arrives)',
    );
    expect(err.details).toEqual({ stalledMs: 61_234, waitingBytes: 131_072 });
  });

  it('takes the stall time from AGENTFENSE_STREAM_STALL_SECONDS, refusing nonsense', () => {
    expect(stallMsFromEnv({})).toBe(60_000);
    expect(stallMsFromEnv({ AGENTFENSE_STREAM_STALL_SECONDS: '2.5' })).toBe(2500);
    expect(() => stallMsFromEnv({ AGENTFENSE_STREAM_STALL_SECONDS: '0' })).toThrow(
      /AGENTFENSE_STREAM_STALL_SECONDS must be a positive number of seconds, got "0"/,
    );
  });
});
