// Which directories may receive new entries. The kernel checks a directory's w bit before it sends us
// CREATE/MKDIR/RENAME/UNLINK, so a directory must show w when some path inside it may be written, even if
// the directory itself is only readable (agent-safe: `/` is read, `/output/**` is write, and `mkdir
// /workspace/output` must reach us). The bit is a first gate only; every such request is checked against
// the rules at the exact path. Over-approximating shows w where we then answer EACCES; never the reverse.
import type { RuleSet } from '@agentfense/protocol';

interface Hint {
  /** Literal directory the rule's matches live under ('' = anywhere). */
  readonly base: string;
  /** The rule can match at any depth below `base`. */
  readonly deep: boolean;
}

const GLOB_CHARS = /[*?[\]{}!]/;

/** Longest directory path whose answer is remembered (the kernel's PATH_MAX). */
const MAX_CACHED_PATH = 4096;

/** Precomputed from a rule set's write rules; answers per directory with a cache. */
export class WriteHints {
  readonly #hints: readonly Hint[];
  readonly #cache = new Map<string, boolean>();

  constructor(rules: RuleSet) {
    this.#hints = rules.rules.filter((r) => r.permission === 'write').map((r) => hintOf(r.pattern, r.type));
  }

  /** True when some write rule may match a path strictly inside `dir` (a codebase path). */
  mayWriteInside(dir: string): boolean {
    let answer = this.#cache.get(dir);
    if (answer === undefined) {
      answer = this.#hints.some((h) => covers(h, dir));
      // A path longer than PATH_MAX is answered each time: kept, a chain of deep directories would hold a
      // path per level (up to 50,000 of them, each up to hundreds of KB).
      if (dir.length > MAX_CACHED_PATH) return answer;
      if (this.#cache.size > 50_000) this.#cache.clear();
      this.#cache.set(dir, answer);
    }
    return answer;
  }
}

function hintOf(pattern: string, type: 'glob' | 'directory' | 'file'): Hint {
  const anchored = pattern.startsWith('/') ? pattern : `/${pattern}`;
  if (type !== 'glob') return { base: dirname(anchored.replace(/\/+$/, '')), deep: type === 'directory' };
  if (!pattern.includes('/') || pattern.startsWith('**')) return { base: '', deep: true };
  const literal = anchored.slice(0, anchored.search(GLOB_CHARS));
  return { base: dirname(`${literal}x`), deep: pattern.includes('**') };
}

function covers(hint: Hint, dir: string): boolean {
  if (hint.base === '') return true;
  const d = dir === '/' ? '' : dir;
  const b = hint.base === '/' ? '' : hint.base;
  if (b === d || b.startsWith(`${d}/`)) return true; // the rule's area is at or below this directory
  return hint.deep && d.startsWith(`${b}/`); // this directory is inside a deep rule's area
}

function dirname(path: string): string {
  const i = path.lastIndexOf('/');
  return i <= 0 ? '/' : path.slice(0, i);
}
