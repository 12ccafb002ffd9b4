#!/usr/bin/env node
// The README's demo: a real sandbox (worker FUSE mount + bubblewrap) over the bundled example codebase
// under the agent-safe preset. It shows hidden secrets, a denied write, an allowed write, the delta's
// diff and the audit trail, then destroys the sandbox; examples/demo-repo is never modified.
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Sandbox, compileRules, getPreset } from '@agentfense/control';

const repo = fileURLToPath(new URL('../examples/demo-repo', import.meta.url));
// A throwaway data directory unless the user points at one.
const dataDir = process.env.AGENTFENSE_DATA_DIR ?? (await mkdtemp(join(tmpdir(), 'agentfense-demo-')));

const bold = (text) => (process.stdout.isTTY ? `\x1b[1m${text}\x1b[0m` : text);
const section = (title) => console.log(`\n${bold(`== ${title}`)}`);

async function show(sb, command) {
  console.log(`$ ${command}`);
  const r = await sb.run(['sh', '-c', command]);
  const out = `${r.stdout}${r.stderr}`;
  if (out !== '') console.log(out.trimEnd().replace(/^/gm, '  '));
  console.log(`  [exit ${r.exitCode}]`);
  return r;
}

async function walk(dir, prefix = '') {
  const entries = (await readdir(dir, { withFileTypes: true })).sort((a, b) => a.name.localeCompare(b.name));
  const out = [];
  for (const e of entries) {
    out.push({ path: `${prefix}/${e.name}`, dir: e.isDirectory() });
    if (e.isDirectory()) out.push(...(await walk(join(dir, e.name), `${prefix}/${e.name}`)));
  }
  return out;
}

console.log(bold('AgentFense demo: an agent in a sandbox over examples/demo-repo, preset agent-safe'));

section('The policy: what agent-safe makes of each path (agentfense explain)');
const rules = compileRules(getPreset('agent-safe').rules);
const label = { none: 'hidden', view: 'names only', read: 'read', write: 'writable' };
for (const { path, dir } of await walk(repo)) {
  const { permission, rule } = rules.explain(path);
  console.log(
    `  ${label[permission].padEnd(10)} ${(path + (dir ? '/' : '')).padEnd(28)} ${rule ? rule.pattern : '(default deny)'}`,
  );
}

const started = performance.now();
const sb = await Sandbox.fromLocal(repo, { preset: 'agent-safe', dataDir });
try {
  console.log(
    `\nsandbox ${sb.id} running (${Math.round(performance.now() - started)} ms to create and start)`,
  );

  section('1. Hidden secrets: absent from ls and find, ENOENT when named');
  await show(sb, 'ls -la /workspace');
  await show(sb, 'find /workspace | sort');
  await show(sb, 'cat /workspace/.env; cat /workspace/secrets/deploy.pem');

  section('2. Denied writes: the source tree is read-only for the agent');
  await show(sb, 'echo \'print("pwned")\' >> /workspace/src/app.py');
  await show(sb, 'echo notes > /workspace/NOTES.md');

  section("3. An allowed write: /output is the agent's write area");
  await show(
    sb,
    'echo "report: all good" > /workspace/output/report.txt && cat /workspace/output/report.txt',
  );

  section('4. The delta: what the agent changed, as a unified diff (nothing is in the repo yet)');
  for (const c of await sb.changes()) console.log(`  ${c.kind.padEnd(8)} ${c.path} (${c.size ?? 0} bytes)`);
  console.log((await sb.diff()).diff.trimEnd().replace(/^/gm, '  '));

  section('5. The audit trail: every denial, including the writes the kernel refused from the mode bits');
  for (const e of await sb.audit({ decision: 'deny' })) {
    console.log(
      `  ${new Date(e.time).toISOString()}  ${e.decision.toUpperCase()}  ${e.op.padEnd(7)} ${e.path.padEnd(24)} ${e.errno}`,
    );
  }
} finally {
  await sb.destroy();
  if (process.env.AGENTFENSE_DATA_DIR === undefined) await rm(dataDir, { recursive: true, force: true });
}
section('Done');
console.log(
  '  sandbox destroyed; examples/demo-repo is unchanged (commit with sb.commit() or `agentfense run --commit`)',
);
