// Text that reaches an operator's terminal but came from a sandbox: file names an agent chose, audit
// paths, log fields, diff contents. A name holding ESC sequences could repaint the operator's screen or
// set its title, a newline could forge a line of output ("committed 0 changes"), a bidi override could
// make one path read as another. Every such string is printed through these functions.

// C0 controls, DEL, C1 controls (U+009B is a one-character CSI on many terminals), line/paragraph
// separators, and the bidi embedding/override/isolate controls ("Trojan Source").
const CONTROL = '\\u0000-\\u001f\\u007f-\\u009f\\u2028\\u2029\\u202a-\\u202e\\u2066-\\u2069';
const NEEDS_QUOTES = new RegExp(`[${CONTROL}"\\\\]`, 'u');
const ESCAPED_IN_PATH = new RegExp(`[${CONTROL}"\\\\]`, 'gu');
const ESCAPED_IN_LINE = new RegExp(`[${CONTROL}]`, 'gu');
// What JSON.stringify leaves raw inside strings but a terminal may still act on.
const RAW_IN_JSON = /[\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/gu;
// In free text (file contents) tab and newline are the text's own layout and stay.
const ESCAPED_IN_TEXT = new RegExp(
  `[${CONTROL.replace('\\u0000-\\u001f', '\\u0000-\\u0008\\u000b-\\u001f')}]`,
  'gu',
);

const NAMED: Readonly<Record<string, string>> = {
  '\u0007': '\\a',
  '\b': '\\b',
  '\t': '\\t',
  '\n': '\\n',
  '\u000b': '\\v',
  '\f': '\\f',
  '\r': '\\r',
  '"': '\\"',
  '\\': '\\\\',
};

function escapeChar(ch: string): string {
  const named = NAMED[ch];
  if (named !== undefined) return named;
  const code = ch.codePointAt(0) ?? 0;
  return code <= 0xff
    ? `\\x${code.toString(16).padStart(2, '0')}`
    : `\\u${code.toString(16).padStart(4, '0')}`;
}

/**
 * A path (or any name) safe to print on one line: unchanged when harmless, otherwise double-quoted with
 * C-style escapes — git's convention for paths, so `"a\tb"` reads as it does in `git status`.
 */
export function quotePath(path: string): string {
  if (!NEEDS_QUOTES.test(path)) return path;
  return `"${path.replace(ESCAPED_IN_PATH, escapeChar)}"`;
}

/**
 * Multi-line text (a diff's content) safe to print: tabs and newlines kept, every other control
 * character shown as an escape. Meant for output going to a terminal; files and pipes get the exact text.
 */
export function escapeControls(text: string): string {
  return text.replace(ESCAPED_IN_TEXT, escapeChar);
}

/** One line of free text (a log message) safe to print: every control character escaped, no quoting. */
export function escapeLine(text: string): string {
  return text.replace(ESCAPED_IN_LINE, escapeChar);
}

/**
 * JSON text safe to print: JSON.stringify already escapes C0 controls; this escapes the characters it
 * leaves raw (DEL, C1 controls, line separators, bidi controls) as `\uXXXX`, which is still the same JSON.
 */
export function escapeJsonText(json: string): string {
  return json.replace(RAW_IN_JSON, (ch) => `\\u${(ch.codePointAt(0) ?? 0).toString(16).padStart(4, '0')}`);
}
