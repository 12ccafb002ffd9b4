import { describe, expect, it } from 'vitest';
import { WrongStateError } from '@agentfense/protocol';
import { SANDBOX_STATES, TRANSITIONS, canTransition } from '../src/index.js';
import { assertTransition } from '../src/sandboxes/state.js';

describe('sandbox state machine (contract §6)', () => {
  const allowed: [string, string][] = [
    ['PENDING', 'RUNNING'],
    ['PENDING', 'STOPPED'],
    ['PENDING', 'ERROR'],
    ['RUNNING', 'STOPPED'],
    ['RUNNING', 'ERROR'],
    ['STOPPED', 'RUNNING'],
    ['STOPPED', 'ERROR'],
    ['ERROR', 'RUNNING'],
    ['ERROR', 'STOPPED'],
  ];

  it('allows exactly the documented transitions', () => {
    const all = SANDBOX_STATES.flatMap((from) => SANDBOX_STATES.map((to) => [from, to] as [string, string]));
    for (const [from, to] of all) {
      const expected = allowed.some(([f, t]) => f === from && t === to);
      expect(canTransition(from as never, to as never), `${from} → ${to}`).toBe(expected);
    }
    expect(Object.keys(TRANSITIONS).sort()).toEqual([...SANDBOX_STATES].sort());
  });

  it('every state can reach ERROR except ERROR itself, and nothing goes back to PENDING', () => {
    for (const s of SANDBOX_STATES) expect(canTransition(s, 'ERROR')).toBe(s !== 'ERROR');
    for (const s of SANDBOX_STATES) expect(canTransition(s, 'PENDING')).toBe(false);
  });

  it('names the sandbox and both states when refusing', () => {
    expect(() => assertTransition('sb_x', 'RUNNING', 'PENDING')).toThrow(WrongStateError);
    expect(() => assertTransition('sb_x', 'RUNNING', 'RUNNING')).toThrow(
      /sb_x is RUNNING and cannot become RUNNING/,
    );
    expect(() => assertTransition('sb_x', 'STOPPED', 'RUNNING')).not.toThrow();
  });
});
