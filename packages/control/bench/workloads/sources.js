// The generated inputs of the workloads bench: the npm project's dependencies, a TypeScript project of a
// few hundred small files (for `tsc -b`) and a C project of ~200 small files with its Makefile (for
// `make -j2`). Deterministic, so a cached fixture and a fresh one hold the same files.

/**
 * A typical TypeScript service's dependencies (a CLI, a logger, an MCP server; lint, format, test): ~300
 * packages. The top-level versions are pinned; the lockfile is resolved once at set-up and cached.
 */
export const NPM_PACKAGE = {
  name: 'bench-app',
  version: '1.0.0',
  private: true,
  type: 'module',
  dependencies: {
    '@modelcontextprotocol/sdk': '1.32.2',
    ajv: '8.20.0',
    commander: '14.0.3',
    execa: '9.6.1',
    pino: '10.4.0',
  },
  devDependencies: {
    '@eslint/js': '10.0.1',
    '@types/node': '20.19.0',
    '@vitest/coverage-v8': '4.1.12',
    eslint: '10.15.0',
    'eslint-plugin-n': '18.5.0',
    prettier: '3.10.1',
    tsx: '4.23.15',
    typescript: '5.9.3',
    'typescript-eslint': '8.73.0',
    vitest: '4.1.12',
  },
};

const TS_DIRS = 10;
const TS_FILES_PER_DIR = 30;
const C_FILES = 200;

/** The TypeScript project: path (relative to its root) → content. */
export function tsProject() {
  const files = new Map();
  files.set('package.json', `${JSON.stringify({ name: 'ts-bench', private: true, type: 'module' })}\n`);
  const compilerOptions = {
    target: 'es2022',
    // Not the DOM's declarations (the default for the target): a Node project's set.
    lib: ['es2022'],
    module: 'nodenext',
    moduleResolution: 'nodenext',
    strict: true,
    composite: true,
    declaration: true,
    rootDir: 'src',
    outDir: 'dist',
    types: [],
  };
  files.set('tsconfig.json', `${JSON.stringify({ compilerOptions, include: ['src'] }, null, 2)}\n`);
  const index = [];
  for (let d = 0; d < TS_DIRS; d += 1) {
    for (let f = 0; f < TS_FILES_PER_DIR; f += 1) {
      files.set(`src/m${d}/f${f}.ts`, tsFile(d, f));
    }
    index.push(
      `export { Store as Store${d}, value as value${d} } from './m${d}/f${TS_FILES_PER_DIR - 1}.js';`,
    );
  }
  files.set('src/index.ts', `${index.join('\n')}\n`);
  return files;
}

function tsFile(d, f) {
  const previous = f === 0 ? 'const previous = 0;' : `import { value as previous } from './f${f - 1}.js';`;
  return `${previous}

export interface Item${f} {
  readonly id: number;
  readonly name: string;
  readonly tags: readonly string[];
}

export const value: number = previous + ${d * TS_FILES_PER_DIR + f};

export function make(id: number, ...tags: string[]): Item${f} {
  return { id, name: \`m${d}-f${f}-\${id}\`, tags: tags.length > 0 ? tags : [String(value)] };
}

export class Store {
  readonly #items = new Map<number, Item${f}>();

  add(item: Item${f}): this {
    this.#items.set(item.id, item);
    return this;
  }

  find(predicate: (item: Item${f}) => boolean): Item${f} | undefined {
    for (const item of this.#items.values()) if (predicate(item)) return item;
    return undefined;
  }

  names(): string[] {
    return [...this.#items.values()].map((item) => item.name).sort();
  }
}
`;
}

/** The C project: path (relative to its root) → content; `make` builds `app` from obj/*.o. */
export function cProject() {
  const files = new Map();
  files.set(
    'Makefile',
    [
      'CFLAGS ?= -O2 -Wall',
      'SRCS := $(sort $(wildcard src/*.c))',
      'OBJS := $(SRCS:src/%.c=obj/%.o)',
      'app: $(OBJS)',
      '\t$(CC) -o $@ $(OBJS)',
      'obj/%.o: src/%.c | obj',
      '\t$(CC) $(CFLAGS) -c -o $@ $<',
      'obj:',
      '\tmkdir -p obj',
      '',
    ].join('\n'),
  );
  const calls = [];
  for (let i = 0; i < C_FILES; i += 1) {
    const n = String(i).padStart(3, '0');
    files.set(`src/unit${n}.c`, cFile(n, i));
    calls.push(`  total += unit${n}(argc + ${i});`);
  }
  const decls = Array.from({ length: C_FILES }, (_, i) => `int unit${String(i).padStart(3, '0')}(int);`);
  files.set(
    'src/main.c',
    `#include <stdio.h>\n${decls.join('\n')}\n\nint main(int argc, char **argv) {\n  (void)argv;\n  long total = 0;\n${calls.join('\n')}\n  printf("%ld\\n", total);\n  return 0;\n}\n`,
  );
  return files;
}

function cFile(n, i) {
  return `#include <stdlib.h>
#include <string.h>
#include <stdio.h>

struct entry${n} { int key; char name[32]; };

static int compare${n}(const void *a, const void *b) {
  return ((const struct entry${n} *)a)->key - ((const struct entry${n} *)b)->key;
}

int unit${n}(int seed) {
  struct entry${n} entries[64];
  for (int j = 0; j < 64; j++) {
    entries[j].key = (seed * 1103515245 + j * ${i + 12345}) & 0xffff;
    snprintf(entries[j].name, sizeof entries[j].name, "u${n}-%d", j);
  }
  qsort(entries, 64, sizeof entries[0], compare${n});
  int sum = 0;
  for (int j = 0; j < 64; j++) sum += entries[j].key + (int)strlen(entries[j].name);
  return sum;
}
`;
}
