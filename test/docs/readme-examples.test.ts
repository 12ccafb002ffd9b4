// Every ```ts block in the project's Markdown (READMEs, docs/) must type-check against the built
// packages: an example that no longer compiles is a lie a newcomer copies. Blocks that only sketch a
// signature are fenced as `text`, not `ts`. Each block becomes its own module (top-level await allowed)
// under test/.readme-examples/ (ignored by git and by the test project's tsconfig) and one `tsc` checks
// them all with the repository's compiler options.
import { execFile } from 'node:child_process';
import { mkdir, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));
const outDir = join(root, 'test/.readme-examples');
const SKIP_DIRS = new Set(['node_modules', 'dist', '.git', '.readme-examples', 'demo-repo']);

/** Markdown files of the repository (its own, not dependencies'). */
async function markdownFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    if (entry.name.startsWith('.') && entry.name !== '.') continue;
    if (SKIP_DIRS.has(entry.name)) continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await markdownFiles(path)));
    else if (entry.isFile() && entry.name.endsWith('.md')) out.push(path);
  }
  return out;
}

interface Example {
  readonly file: string;
  readonly line: number;
  readonly code: string;
}

function examplesOf(file: string, text: string): Example[] {
  const examples: Example[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (!/^```(ts|typescript)\s*$/.test(lines[i] ?? '')) continue;
    const start = i + 1;
    let end = start;
    while (end < lines.length && !(lines[end] ?? '').startsWith('```')) end++;
    examples.push({ file, line: start + 1, code: lines.slice(start, end).join('\n') });
    i = end;
  }
  return examples;
}

afterAll(async () => {
  await rm(outDir, { recursive: true, force: true });
});

describe('Markdown examples', () => {
  it('every ```ts block type-checks against the built packages', async () => {
    const examples: Example[] = [];
    for (const file of await markdownFiles(root)) {
      examples.push(...examplesOf(relative(root, file), await readFile(file, 'utf8')));
    }
    // The root README's library example at least: a check that finds nothing proves nothing.
    expect(examples.some((e) => e.file === 'README.md')).toBe(true);

    await rm(outDir, { recursive: true, force: true });
    await mkdir(outDir, { recursive: true });
    const names = new Map<string, Example>();
    for (const [n, example] of examples.entries()) {
      const name = `${example.file.replace(/[^A-Za-z0-9]+/g, '_')}_L${example.line}_${n}.ts`;
      names.set(name, example);
      // `export {}` makes every block a module, so top-level await and `await using` are allowed.
      await writeFile(join(outDir, name), `${example.code}\nexport {};\n`);
    }
    await writeFile(
      join(outDir, 'tsconfig.json'),
      JSON.stringify({
        extends: '../../tsconfig.base.json',
        compilerOptions: {
          noEmit: true,
          composite: false,
          declaration: false,
          declarationMap: false,
          // Examples show a call and drop its result; that is not a defect of the example.
          noUnusedLocals: false,
          // Check against what users get: the packages' built declarations, not their sources.
          customConditions: [],
        },
        include: ['*.ts'],
      }),
    );
    const tsc = join(root, 'node_modules/typescript/bin/tsc');
    const result = await promisify(execFile)(process.execPath, [tsc, '-p', outDir, '--pretty', 'false'], {
      cwd: root,
    }).then(
      () => '',
      (err: Error & { stdout?: string }) => err.stdout ?? err.message,
    );
    // Name the Markdown file and line of each error instead of the generated file.
    const report = result
      .split('\n')
      .filter((line) => line.trim() !== '')
      .map((line) => {
        const m = /^test\/\.readme-examples\/([^(]+)\((\d+),(\d+)\): (.*)$/.exec(line);
        const example = m === null ? undefined : names.get(m[1] ?? '');
        return example === undefined || m === null
          ? line
          : `${example.file}:${example.line + Number(m[2]) - 1}: ${m[4]}`;
      });
    expect(report).toEqual([]);
  });
});
