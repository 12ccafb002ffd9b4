// Output handed back to a model is capped: a runaway `cat` of a log must not flood its context. The head
// and the tail are kept (errors are usually at the end) with a note in between saying what was cut.

/** Characters kept per stream (stdout, stderr, a diff, a file) before the middle is cut. */
export const MAX_OUTPUT_CHARS = 32_000;

/** Whether text was cut, and the text with a visible note where it was. */
export interface Capped {
  readonly text: string;
  readonly truncated: boolean;
}

/** Keeps the first and last halves of `max` characters, with a note naming how much was dropped. */
export function capText(text: string, max = MAX_OUTPUT_CHARS, hint = ''): Capped {
  if (text.length <= max) return { text, truncated: false };
  const half = Math.floor(max / 2);
  const dropped = text.length - 2 * half;
  const note = `\n[... ${dropped} characters truncated by agentfense${hint === '' ? '' : `; ${hint}`} ...]\n`;
  return { text: `${text.slice(0, half)}${note}${text.slice(-half)}`, truncated: true };
}

/** Decodes bytes as UTF-8 and caps the result. */
export function capBytes(data: Buffer, max = MAX_OUTPUT_CHARS, hint = ''): Capped {
  return capText(data.toString('utf8'), max, hint);
}
