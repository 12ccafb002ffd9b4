import { describe, expect, it } from 'vitest';
import { escapeControls, escapeJsonText, escapeLine, quotePath } from '../src/index.js';

describe('quotePath', () => {
  it('leaves ordinary paths alone, including non-ASCII names', () => {
    expect(quotePath('/src/app.py')).toBe('/src/app.py');
    expect(quotePath('/docs/résumé – notes.md')).toBe('/docs/résumé – notes.md');
  });

  it('quotes and escapes control characters, quotes and backslashes as git does', () => {
    expect(quotePath('/a\nb')).toBe(String.raw`"/a\nb"`);
    expect(quotePath('/x\u001b[2J')).toBe(String.raw`"/x\x1b[2J"`);
    expect(quotePath('/t\tb\u0007')).toBe(String.raw`"/t\tb\a"`);
    expect(quotePath('/q"\\')).toBe(String.raw`"/q\"\\"`);
    expect(quotePath('/c1\u009b31m')).toBe(String.raw`"/c1\x9b31m"`);
  });

  it('escapes bidi overrides that make one name read as another', () => {
    expect(quotePath('/evil\u202etxt.exe')).toBe(String.raw`"/evil\u202etxt.exe"`);
    expect(quotePath('/iso\u2066x\u2069')).toBe(String.raw`"/iso\u2066x\u2069"`);
  });
});

describe('escapeControls', () => {
  it('keeps tabs and newlines, escapes everything else', () => {
    expect(escapeControls('a\tb\nc\u001b[0m\r\n')).toBe(String.raw`a	b
c\x1b[0m\r
`);
  });
});

describe('escapeLine', () => {
  it('escapes newlines too, without quoting', () => {
    expect(escapeLine('msg\nforged "line"')).toBe(String.raw`msg\nforged "line"`);
  });
});

describe('escapeJsonText', () => {
  it('escapes what JSON.stringify leaves raw and stays the same JSON', () => {
    const value = { path: '/x\u009b2J\u202e\u007f' };
    const text = escapeJsonText(JSON.stringify(value));
    expect(text).toBe(String.raw`{"path":"/x\u009b2J\u202e\u007f"}`);
    expect(JSON.parse(text)).toEqual(value);
  });
});
