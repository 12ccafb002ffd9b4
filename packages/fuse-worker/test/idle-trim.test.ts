import { describe, expect, it } from 'vitest';
import { IdleTrim, takeCollector } from '../src/worker/idle-trim.js';

describe('IdleTrim', () => {
  it('collects on the first five quiet ticks after activity, then stops until the worker works again', () => {
    let activity = 0;
    let collections = 0;
    const trim = new IdleTrim(
      () => collections++,
      () => activity,
    );
    for (let i = 0; i < 8; i++) trim.tick();
    expect(collections).toBe(5);

    activity += 3; // requests arrive: the tick that sees them does not collect
    trim.tick();
    expect(collections).toBe(5);
    activity += 1;
    trim.tick();
    expect(collections).toBe(5);
    trim.tick(); // quiet again
    trim.tick();
    expect(collections).toBe(7);
    for (let i = 0; i < 10; i++) trim.tick();
    expect(collections).toBe(10);
  });

  it('has no collector in a process started without --expose-gc', () => {
    expect(typeof (globalThis as { gc?: unknown }).gc).toBe('undefined');
    expect(takeCollector()).toBeUndefined();
  });
});
