import { describe, expect, it } from 'vitest';
import { TerminalFilter } from '../src/cli/terminal-filter.js';

/** The filter's output for `input` given in chunks of `size` bytes (sequences split across them). */
function filtered(input: string | Buffer, size = Infinity): string {
  const bytes = typeof input === 'string' ? Buffer.from(input) : input;
  const f = new TerminalFilter();
  const parts: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += Math.min(size, bytes.length)) {
    parts.push(f.push(bytes.subarray(i, i + Math.min(size, bytes.length))));
  }
  parts.push(f.end());
  return Buffer.concat(parts).toString('utf8');
}

describe('terminal filter of command output', () => {
  it('passes text, UTF-8, tabs, newlines, carriage returns and SGR colours unchanged', () => {
    const text = 'plain\ttext\r\nhé ☃ 𝄞\n\u001b[1;31mred\u001b[0m \u001b[38:2:0:255:0:0mrgb\u001b[m\n';
    for (const size of [Infinity, 1, 3]) expect(filtered(text, size)).toBe(text);
  });

  it('shows OSC (title, clipboard), DCS, APC, PM, SOS and cursor movement escaped', () => {
    const cases: [string, string][] = [
      ['\u001b]0;pwned\u0007', '\\x1b]0;pwned\\a'],
      ['\u001b]52;c;ZXZpbA==\u001b\\', '\\x1b]52;c;ZXZpbA==\\x1b\\'],
      ['\u001bPq#0\u001b\\', '\\x1bPq#0\\x1b\\'],
      ['\u001b_apc\u001b\\', '\\x1b_apc\\x1b\\'],
      ['\u001b^pm\u001b\\', '\\x1b^pm\\x1b\\'],
      ['\u001bXsos\u001b\\', '\\x1bXsos\\x1b\\'],
      ['\u001b[2J\u001b[H\u001b[5A', '\\x1b[2J\\x1b[H\\x1b[5A'],
      ['\u001b[?1049h', '\\x1b[?1049h'],
      ['\u001b[6n', '\\x1b[6n'],
      ['\u001bc', '\\x1bc'],
      ['a\bb\u0000\u007f', 'a\\bb\\x00\\x7f'],
    ];
    for (const [input, shown] of cases) {
      for (const size of [Infinity, 1, 2]) {
        const out = filtered(input, size);
        expect(out).toBe(shown);
        expect(out).not.toContain('\u001b');
      }
    }
  });

  it('shows C1 controls and stray bytes escaped: U+009D (8-bit OSC), a lone 0x9b', () => {
    expect(filtered('a\u009d0;t\u0007b')).toBe('a\\u009d0;t\\ab');
    expect(filtered(Buffer.from([0x41, 0x9b, 0x32, 0x4a]))).toBe('A\\x9b2J');
    expect(filtered(Buffer.from([0xc2]))).toBe('\\xc2');
    expect(filtered(`\u001b[${'1;'.repeat(40)}m`)).not.toContain('\u001b');
  });
});
