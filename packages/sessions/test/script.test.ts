// Shell text builders: quoting, the printf stdin encoding, relay framing, and the command line's shape.
import { describe, expect, it } from 'vitest';
import { printfFormat, singleQuote } from '../src/quote.js';
import { commandScript, relayFrame, resyncScript, sessionArgv } from '../src/script.js';

describe('singleQuote', () => {
  it.each([
    ['', "''"],
    ['plain', "'plain'"],
    ["it's", "'it'\\''s'"],
    ["''", "''\\'''\\'''"],
    ['$HOME `x` \\n "q"\nline', '\'$HOME `x` \\n "q"\nline\''],
  ])('%j → %j', (input, quoted) => {
    expect(singleQuote(Buffer.from(input)).toString()).toBe(quoted);
  });

  it('passes bytes ≥ 0x80 through unchanged', () => {
    const bytes = Buffer.from([0x80, 0x81, 0xff, 0x27, 0xfe]);
    expect([...singleQuote(bytes)]).toEqual([0x27, 0x80, 0x81, 0xff, ...Buffer.from("'\\''"), 0xfe, 0x27]);
  });
});

describe('printfFormat', () => {
  it('escapes conversions, escapes, quotes, dashes and every non-printable byte', () => {
    expect(printfFormat(Buffer.from("a%b\\c'd-e\n\0\x7f\xff", 'latin1'))).toBe(
      'a%%b\\134c\\047d\\055e\\012\\000\\177\\377',
    );
  });

  it('is printable ASCII without newline or single quote for all 256 byte values', () => {
    const format = printfFormat(Buffer.from(Array.from({ length: 256 }, (_, i) => i)));
    expect(format).toMatch(/^[\x20-\x7e]*$/);
    expect(format).not.toContain("'");
  });
});

describe('relayFrame', () => {
  it('prefixes every line with a dot, lines inside quoted text included', () => {
    expect(relayFrame(Buffer.from("echo 'a\n\n!INT\nb'\n")).toString()).toBe(".echo 'a\n.\n.!INT\n.b'\n");
  });

  it('terminates a last line that has no newline', () => {
    expect(relayFrame(Buffer.from('x')).toString()).toBe('.x\n');
  });
});

describe('commandScript', () => {
  const nonce = 'c'.repeat(32);

  it('evals the quoted command on its own lines, stdin /dev/null, then the trailer', () => {
    const text = commandScript({ command: Buffer.from('echo hi # &'), nonce, previousStatus: 3 }).toString();
    expect(text).toBe(`__af_r 3;command eval 'echo hi # &\n' </dev/null 8>&- 9>&-;__af_t ${nonce}\n`);
  });

  it('writes given stdin to the private file first and clears it in the trailer', () => {
    const text = commandScript({
      command: Buffer.from('cat'),
      nonce,
      previousStatus: 0,
      stdin: Buffer.from('a\0'),
    }).toString();
    expect(text.startsWith("__af_in 'a\\000';__af_r 0;command eval 'cat\n'")).toBe(true);
    expect(text).toContain(` <"$__af_d/stdin" 8>&- 9>&-;__af_t ${nonce} x\n`);
  });

  it('resync is a bare trailer', () => {
    expect(resyncScript(nonce).toString()).toBe(`__af_t ${nonce}\n`);
  });
});

describe('sessionArgv', () => {
  it('runs the bootstrap with /bin/sh, then the interactive shell', () => {
    const argv = sessionArgv({ shell: '/bin/bash', dir: '/tmp/x' });
    expect(argv.slice(0, 2)).toEqual(['/bin/sh', '-c']);
    expect(argv.slice(3)).toEqual([
      'agentfense-session',
      '/tmp/x',
      '/bin/bash',
      '--norc',
      '--noprofile',
      '--noediting',
      '-i',
    ]);
    expect(sessionArgv({ shell: '/bin/sh', dir: '/tmp/x' }).slice(5)).toEqual(['/bin/sh', '-i']);
  });
});
