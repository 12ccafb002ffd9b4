// The codebase's shape rules (issue 16), checked on every run so they stay true: small files of one
// concern, and control reaching runtimes only through its runtime registry.
import { readFile, readdir } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));
/** Most lines a source file may have. */
const MAX_LINES = 500;
/** Generated code, exempt from the size rule. */
const GENERATED = ['packages/control/src/grpc/gen/'];

async function sourceFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await sourceFiles(path)));
    else if (/\.(ts|js|mjs|cjs)$/.test(entry.name)) out.push(path);
  }
  return out;
}

async function packageSources(): Promise<string[]> {
  const files: string[] = [];
  for (const pkg of await readdir(join(root, 'packages'))) {
    const src = join(root, 'packages', pkg, 'src');
    files.push(...(await sourceFiles(src).catch(() => [])));
  }
  return files.map((f) => relative(root, f));
}

describe('code shape', () => {
  it(`no file in packages/*/src has more than ${MAX_LINES} lines (generated code excepted)`, async () => {
    const files = (await packageSources()).filter((f) => !GENERATED.some((g) => f.startsWith(g)));
    expect(files.length).toBeGreaterThan(50); // the scan found the sources
    const tooLong: string[] = [];
    for (const file of files) {
      const lines = (await readFile(join(root, file), 'utf8')).split('\n').length - 1;
      if (lines > MAX_LINES) tooLong.push(`${file}: ${lines} lines`);
    }
    expect(tooLong).toEqual([]);
  });

  it('control imports a runtime package only in its runtime registry (sandboxes/runtimes.ts)', async () => {
    const files = (await packageSources()).filter((f) => f.startsWith('packages/control/src/'));
    const importers: string[] = [];
    for (const file of files) {
      const text = await readFile(join(root, file), 'utf8');
      if (/['"]@agentfense\/runtime-[a-z-]+(\/[^'"]*)?['"]/.test(text)) importers.push(file);
    }
    expect(importers).toEqual(['packages/control/src/sandboxes/runtimes.ts']);
  });
});
