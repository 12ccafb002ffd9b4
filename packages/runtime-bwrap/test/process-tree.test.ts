// launcher/process-tree.ts `killLeftovers`: the host's sweep of a launcher's pid namespace, on a scripted process
// table. The race it must survive: a command's root is killed by its group's SIGKILL (sent through af-init)
// while the host sweeps; the root dies after af-init's children were listed, and its setsid'd child, now
// af-init's, was in no listing (a flaky runtime test: "a timeout kills the tree including what left the
// session" left that child alive about once in 20 runs).
import { describe, expect, it } from 'vitest';
import { killLeftovers, type ProcessView } from '../src/launcher/process-tree.js';

interface Proc {
  state: string;
  sid: number;
  children: number[];
}

const INIT = { pid: 1000, startTime: 'init' };

/**
 * A process table the sweep reads; `onList` runs right after af-init's children are listed; `hide` names
 * the children a listing leaves out (the kernel's children file skipping entries while the list changes).
 */
function table(
  procs: Map<number, Proc>,
  onList?: (pass: number) => void,
  hide?: (pid: number, pass: number) => readonly number[],
): ProcessView & { killed: number[] } {
  let passes = 0;
  const killed: number[] = [];
  return {
    killed,
    same: (pid, start) => pid === INIT.pid && start === INIT.startTime,
    children: (pid) => {
      const hidden = hide?.(pid, pid === INIT.pid ? passes + 1 : passes) ?? [];
      const out = (procs.get(pid)?.children ?? []).filter((c) => !hidden.includes(c));
      if (pid === INIT.pid) {
        passes++;
        onList?.(passes);
      }
      return out;
    },
    namespaceMembers: (pid) => (pid === INIT.pid ? [...procs.keys()].filter((p) => p !== pid) : []),
    status: (pid) => {
      const p = procs.get(pid);
      return p === undefined ? null : { ended: p.state === 'Z', sid: p.sid };
    },
    kill: (pid) => {
      const p = procs.get(pid);
      if (p === undefined) return false;
      killed.push(pid);
      procs.delete(pid);
      const init = procs.get(INIT.pid)!;
      init.children = init.children.filter((c) => c !== pid).concat(p.children);
      return true;
    },
  };
}

describe('killLeftovers', () => {
  it("kills a setsid'd child whose parent died between the listing and the walk", async () => {
    // af-init (1000) -> the command's root 2000 (session 2000, ended) -> 2001 (setsid: session 2001)
    const procs = new Map<number, Proc>([
      [1000, { state: 'S', sid: 1, children: [2000] }],
      [2000, { state: 'S', sid: 2000, children: [2001] }],
      [2001, { state: 'S', sid: 2001, children: [] }],
    ]);
    const view = table(procs, (pass) => {
      const init = procs.get(1000)!;
      if (pass === 1) {
        // the group's SIGKILL lands now: 2000 is a zombie, 2001 is re-parented to af-init
        procs.get(2000)!.state = 'Z';
        procs.get(2000)!.children = [];
        init.children.push(2001);
      } else if (pass === 2) {
        // af-init reaps the zombie (after this listing)
        procs.delete(2000);
        init.children = init.children.filter((c) => c !== 2000);
      }
    });
    expect(await killLeftovers(INIT, new Set(), view)).toBe(true);
    expect(view.killed).toEqual([2001]);
  });

  it('kills a child the listings skipped while the tree changed under them', async () => {
    // A timeout: the host kills the command's root 2000 while af-init reaps what dies. The listing of
    // 2000's children misses its setsid'd child 2001 (a sibling exited during the read), and 2001, now
    // af-init's, is missing from af-init's next listing too (af-init reaped 2000 during that read). Every
    // tree pass then finds nothing more; 2001 survived the timeout (a flaky runtime test, again).
    const procs = new Map<number, Proc>([
      [1000, { state: 'S', sid: 1, children: [2000] }],
      [2000, { state: 'S', sid: 2000, children: [2001] }],
      [2001, { state: 'S', sid: 2001, children: [] }],
    ]);
    const view = table(procs, undefined, (pid, pass) =>
      pid === 2000 || (pid === INIT.pid && pass === 2) ? [2001] : [],
    );
    expect(await killLeftovers(INIT, new Set(), view)).toBe(true);
    expect(view.killed).toEqual([2000, 2001]);
    expect([...procs.keys()]).toEqual([1000]);
  });

  it('kills a leftover no listing shows at all, and spares af-init and live sessions', async () => {
    // 2001 left its session and is af-init's child, but the listing of af-init's children skips it every
    // time (other children exiting around each read): only the namespace scan finds it.
    const procs = new Map<number, Proc>([
      [1000, { state: 'S', sid: 1, children: [2001, 3000] }],
      [2001, { state: 'S', sid: 2001, children: [] }],
      [3000, { state: 'S', sid: 3000, children: [] }], // a live command
    ]);
    const view = table(procs, undefined, (pid) => (pid === INIT.pid ? [2001] : []));
    expect(await killLeftovers(INIT, new Set([3000]), view)).toBe(true);
    expect(view.killed).toEqual([2001]);
    expect([...procs.keys()].sort()).toEqual([1000, 3000]);
  });

  it("leaves a live command's session alone and kills the rest with their subtrees", async () => {
    const procs = new Map<number, Proc>([
      [1000, { state: 'S', sid: 1, children: [3000, 4000] }],
      [3000, { state: 'S', sid: 3000, children: [3001] }], // a live command
      [3001, { state: 'S', sid: 3000, children: [] }],
      [4000, { state: 'S', sid: 4000, children: [4001] }], // a leftover
      [4001, { state: 'S', sid: 4000, children: [] }],
    ]);
    const view = table(procs);
    expect(await killLeftovers(INIT, new Set([3000]), view)).toBe(true);
    expect(view.killed.sort()).toEqual([4000, 4001]);
    expect([...procs.keys()].sort()).toEqual([1000, 3000, 3001]);
  });

  it('walks nothing when af-init is not the process it was (its pid reused)', async () => {
    const procs = new Map<number, Proc>([
      [1000, { state: 'S', sid: 1, children: [5000] }],
      [5000, { state: 'S', sid: 5000, children: [] }],
    ]);
    const view = table(procs);
    expect(await killLeftovers({ pid: 1000, startTime: 'someone else' }, new Set(), view)).toBe(true);
    expect(view.killed).toEqual([]);
  });
});
