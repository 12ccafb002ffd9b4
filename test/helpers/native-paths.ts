// What the tests of the binding's C paths (native writes, reads, lookups, creates) share: the rules that
// give the sandbox a writable `output/` in a readable tree, how many requests of one kind the binding
// answered (the worker's `stats`), and a wait for a file the sandbox wrote to reach the delta, so a count
// is read only once the requests before it are over.
import { mountFixture, type MountedFixture, type RunResult } from './worker-fixture.js';

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

/**
 * The rule-change race of the C paths' attack tests: a mount whose `/flag/` is hidden, and a sandbox
 * command that makes `output/d` and runs `fill` there (its cwd stays in the directory, so the kernel keeps
 * the node across the change), touches `output/filled`, waits until `flag/.keep` shows (the rules the
 * test sets next leave `/flag/` visible: the change is in force), then runs `after`. Returns once
 * `filled` is in the delta, so counts read then are the fill's.
 */
export async function ruleChangeRace(steps: {
  readonly fill: readonly string[];
  readonly after: readonly string[];
}): Promise<{ f: MountedFixture; run: Promise<RunResult> }> {
  const f = await mountFixture({
    tree: { output: { dir: true }, 'flag/.keep': '' },
    rules: [...WRITABLE_OUTPUT, { pattern: '/flag/**', permission: 'none' as const, priority: 100 }],
    warmupEntries: 0,
  });
  const run = f.sandbox(
    [
      'mkdir -p output/d && cd output/d',
      ...steps.fill,
      'touch /workspace/output/filled',
      'n=0; while [ ! -e /workspace/flag/.keep ] && [ $n -lt 600 ]; do sleep 0.05; n=$((n+1)); done',
      ...steps.after,
    ].join('\n'),
  );
  await waitInDelta(f, 'output/filled');
  return { f, run };
}
