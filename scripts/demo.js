#!/usr/bin/env node
// The README's demo: what an agent would see of the bundled example codebase under the agent-safe preset.
// Grows with the product: today it walks the example and explains every path; once sandboxes run it also
// executes commands in a real sandbox (hidden secrets, a denied write, an allowed write, diff, audit).
import { readdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { compileRules, getPreset } from '@agentfense/control';

const root = fileURLToPath(new URL('../examples/demo-repo', import.meta.url));
const rules = compileRules(getPreset('agent-safe').rules);

/** Every path of the example codebase, depth first, as codebase paths. */
async function walk(dir, prefix) {
  const entries = (await readdir(dir, { withFileTypes: true })).sort((a, b) => a.name.localeCompare(b.name));
  const out = [];
  for (const entry of entries) {
    const path = `${prefix}/${entry.name}`;
    out.push({ path, isDirectory: entry.isDirectory() });
    if (entry.isDirectory()) out.push(...(await walk(`${dir}/${entry.name}`, path)));
  }
  return out;
}

const mark = { none: 'hidden  ', view: 'names   ', read: 'read    ', write: 'writable' };
console.log('AgentFense demo — examples/demo-repo under the agent-safe preset\n');
for (const { path, isDirectory } of await walk(root, '')) {
  const { permission, rule, traversable } = rules.explain(path);
  const shown = permission === 'none' && isDirectory && traversable ? 'view' : permission;
  const why = rule === null ? 'no rule (default deny)' : `${rule.pattern} (priority ${rule.priority})`;
  console.log(`  ${mark[shown]}  ${(path + (isDirectory ? '/' : '')).padEnd(30)} ${why}`);
}
console.log('\nHidden paths are absent from ls/find and return ENOENT inside the sandbox.');
