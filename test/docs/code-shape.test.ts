// The codebase's shape rules, checked on every run so they stay true: small files of one concern (every
// package's TypeScript and C), lint over every package's TypeScript, packages reached as packages (never
// through a node_modules path), docs that describe rather than log and whose links resolve, and control
// reaching runtimes only through its runtime registry.
import { readFile, readdir, stat } from 'node:fs/promises';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));
/** Most lines a source file may have. */
const MAX_LINES = 500;
/** Generated code, exempt from the size rule. */
const GENERATED = ['packages/control/src/grpc/gen/'];

/** Source files by extension: TypeScript and JavaScript, C and its headers. */
const SCRIPT = /\.(ts|js|mjs|cjs)$/;
const C = /\.[ch]$/;

async function sourceFiles(dir: string, kind: RegExp): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await sourceFiles(path, kind)));
    else if (kind.test(entry.name)) out.push(path);
  }
  return out;
}

/** Files of `kind` in each package's `dir` (src, native, test), relative to the repository. */
async function packageFiles(dir: string, kind: RegExp): Promise<string[]> {
  const files: string[] = [];
  for (const pkg of await readdir(join(root, 'packages'))) {
    files.push(...(await sourceFiles(join(root, 'packages', pkg, dir), kind).catch(() => [])));
  }
  return files.map((f) => relative(root, f));
}

/** Every package's sources: TypeScript (and JavaScript) in src/, C in native/. */
async function packageSources(): Promise<string[]> {
  return [...(await packageFiles('src', SCRIPT)), ...(await packageFiles('native', C))];
}

/** Directories never scanned: dependencies, build output, generated code, git's own. */
const SKIP_DIRS = new Set(['node_modules', 'dist', 'build', '.git', 'gen']);

async function filesUnder(dir: string, pattern: RegExp): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
    if (SKIP_DIRS.has(entry.name)) continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await filesUnder(path, pattern)));
    else if (pattern.test(entry.name)) out.push(path);
  }
  return out;
}

/**
 * What marks a development log rather than a description: a work item's number, or a working session's
 * number given as the time something happened (after "since", "until", "in", a README's name, ...).
 * Unix session ids ("af-init's own session", followed by its number) are not matched.
 */
const LOG_MARKERS = [
  /\bissues? #?\d+/i,
  /\b(?:in|since|until|after|before|during|of|README\.md,) session \d+/i,
  /\bsession \d+'s\b/i,
  /\bsessions \d+-\d+\b/i,
  /\b(?:in|since|until|during|of) sessions \d+/i,
];
/** A file beside the checkout that a newcomer does not have: docs state the facts instead. */
const OUTSIDE = /\.\.\/shared\/|MACHINE-NOTES|SCALE-OUT\.md|SPEC\.md/;
/** A dated entry in prose (an ISO date); examples of API values live in code blocks of their own. */
const DATED = /\b20\d\d-\d\d-\d\d\b/;

describe('code shape', () => {
  it(`no source file in packages/*/src or packages/*/native has more than ${MAX_LINES} lines (generated code excepted)`, async () => {
    const files = (await packageSources()).filter((f) => !GENERATED.some((g) => f.startsWith(g)));
    expect(files.length).toBeGreaterThan(50); // the scan found the sources
    // the C too, the FUSE binding's included
    expect(files.filter((f) => f.startsWith('packages/fuse-native/native/')).length).toBeGreaterThan(5);
    const tooLong: string[] = [];
    for (const file of files) {
      const lines = (await readFile(join(root, file), 'utf8')).split('\n').length - 1;
      if (lines > MAX_LINES) tooLong.push(`${file}: ${lines} lines`);
    }
    expect(tooLong).toEqual([]);
  });

  it('no doc or comment carries a development log (issue or session numbers, dated entries)', async () => {
    const texts = await filesUnder(root, /\.(md|ts|js|mjs|cjs|c|h|sh)$/);
    expect(texts.length).toBeGreaterThan(100); // the scan found the repository
    const found: string[] = [];
    for (const file of texts) {
      const lines = (await readFile(file, 'utf8')).split('\n');
      lines.forEach((line, i) => {
        const markers = file.endsWith('.md') ? [...LOG_MARKERS, DATED] : LOG_MARKERS;
        // Prose (a doc, a comment) never sends the reader outside the repository; code may name a path.
        const prose = file.endsWith('.md') || /^\s*(\/\/|\/?\*|#)/.test(line);
        const outside = prose && OUTSIDE.test(line);
        if (outside || markers.some((m) => m.test(line)))
          found.push(`${relative(root, file)}:${i + 1}: ${line.trim()}`);
      });
    }
    expect(found).toEqual([]);
  });

  it('every relative link in the Markdown resolves to a file or directory of the repository', async () => {
    const docs = await filesUnder(root, /\.md$/);
    expect(docs.length).toBeGreaterThan(10);
    const broken: string[] = [];
    for (const file of docs) {
      const text = await readFile(file, 'utf8');
      for (const match of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = match[1]!;
        if (/^(?:[a-z]+:|#)/i.test(target)) continue; // a URL or an anchor in the same page
        const path = decodeURIComponent(target.split('#')[0]!);
        const exists = await stat(resolve(dirname(file), path)).then(
          () => true,
          () => false,
        );
        if (!exists) broken.push(`${relative(root, file)}: ${target}`);
      }
    }
    expect(broken).toEqual([]);
  });

  it("lint covers every package's TypeScript and JavaScript (src and test; generated code excepted)", async () => {
    const files = [...(await packageFiles('src', SCRIPT)), ...(await packageFiles('test', SCRIPT))].filter(
      (f) => !GENERATED.some((g) => f.startsWith(g)),
    );
    expect(files.some((f) => f.startsWith('packages/fuse-native/src/'))).toBe(true);
    const eslint = new ESLint({ cwd: root });
    const ignored: string[] = [];
    for (const file of files) if (await eslint.isPathIgnored(join(root, file))) ignored.push(file);
    expect(ignored).toEqual([]);
  });

  it('no package or test imports through a node_modules path', async () => {
    const files = [
      ...(await packageFiles('src', SCRIPT)),
      ...(await packageFiles('test', SCRIPT)),
      ...(await sourceFiles(join(root, 'test'), SCRIPT)).map((f) => relative(root, f)),
    ].filter((f) => !f.includes('/node_modules/') && !f.includes('/.readme-examples/'));
    const importers: string[] = [];
    for (const file of files) {
      const text = await readFile(join(root, file), 'utf8');
      if (/(from|import|require)\s*\(?\s*['"][^'"]*node_modules\//.test(text)) importers.push(file);
    }
    expect(importers).toEqual([]);
  });

  it('every repository path a doc names in backquotes exists (from the root, its folder or its package)', async () => {
    const docs = await filesUnder(root, /\.md$/);
    const missing: string[] = [];
    for (const file of docs) {
      const text = await readFile(file, 'utf8');
      const rel = relative(root, file).split('/');
      // A package's README may name its own files from the package root (`scripts/build.js`).
      const bases = [
        root,
        dirname(file),
        ...(rel[0] === 'packages' ? [join(root, 'packages', rel[1]!)] : []),
      ];
      for (const match of text.matchAll(/`((?:packages|test|docs|scripts|examples)\/[\w.\-/]+)`/g)) {
        const path = match[1]!.replace(/[/.]+$/, '');
        // Tests are often named without their suffix (`test/cli/run-pipes`).
        const candidates = bases.flatMap((b) => ['', '.ts', '.test.ts'].map((s) => join(b, path + s)));
        const found = await Promise.all(
          candidates.map((c) =>
            stat(c).then(
              () => true,
              () => false,
            ),
          ),
        );
        if (!found.includes(true)) missing.push(`${relative(root, file)}: ${path}`);
      }
    }
    expect(missing).toEqual([]);
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
