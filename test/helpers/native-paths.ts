// What the tests of the binding's C paths (native writes, reads, lookups, creates) share: the rules that
// give the sandbox a writable `output/` in a readable tree, how many requests of one kind the binding
// answered (the worker's `stats`), and a wait for a file the sandbox wrote to reach the delta, so a count
// is read only once the requests before it are over.
import type { MountedFixture } from './worker-fixture.js';

/** Everything readable, `/output/**` writable: the directories the sandbox makes there are its own. */
export const WRITABLE_OUTPUT = [
  { pattern: '**', permission: 'read' as const },
  { pattern: '/output/**', permission: 'write' as const, priority: 10 },
];

/** How many requests of `op` (e.g. `create-native`, `lookup-native`) the binding answered so far. */
export async function nativeCount(f: MountedFixture, op: string): Promise<number> {
  return (await f.worker.client.request('stats', {})).ops[op]?.count ?? 0;
}

/** Waits (up to 30 s) until `path`, relative to the delta's upper layer, exists there. */
export async function waitInDelta(f: MountedFixture, path: string): Promise<void> {
  const file = `${f.delta}/upper/${path}`;
  for (let i = 0; i < 600; i++) {
    if ((await f.host(`test -e ${file}; echo $?`)).stdout === '0\n') return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${path} did not reach the delta within 30 s`);
}
