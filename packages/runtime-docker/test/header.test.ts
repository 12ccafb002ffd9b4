// SessionHeaderParser: the header is split off however the bytes are chunked; no header means an error text.
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { SessionHeaderParser } from '../src/exec/header.js';

async function parse(chunks: string[]): Promise<{ session: number | null; out: string; preamble: string }> {
  const parser = new SessionHeaderParser();
  const out: Buffer[] = [];
  parser.on('data', (c: Buffer) => out.push(c));
  const done = new Promise((resolve) => parser.on('end', resolve));
  Readable.from(chunks.map((c) => Buffer.from(c))).pipe(parser);
  await done;
  return {
    session: await parser.session,
    out: Buffer.concat(out).toString(),
    preamble: parser.preamble.toString(),
  };
}

describe('SessionHeaderParser', () => {
  it('strips the header and passes the rest through', async () => {
    expect(await parse(['AGENTFENSE-SESSION=42\nerr\n', 'more'])).toEqual({
      session: 42,
      out: 'err\nmore',
      preamble: '',
    });
  });

  it('finds a header split across chunks', async () => {
    expect(await parse(['AGENTFENSE-SES', 'SION=4', '2', '\n', 'x'])).toEqual({
      session: 42,
      out: 'x',
      preamble: '',
    });
  });

  it('keeps what the CLI printed before the header aside, out of the command output', async () => {
    expect(await parse(['WARNING: config\nAGENTFENSE-SESSION=7\nerr'])).toEqual({
      session: 7,
      out: 'err',
      preamble: 'WARNING: config\n',
    });
  });

  it('counts only the first header: a later one is output', async () => {
    expect((await parse(['AGENTFENSE-SESSION=7\nAGENTFENSE-SESSION=9\n'])).out).toBe(
      'AGENTFENSE-SESSION=9\n',
    );
  });

  it('reports no session when the stream ends without a header (the error text is the output)', async () => {
    expect(await parse(['Error response from daemon: No such container: x\n'])).toEqual({
      session: null,
      out: 'Error response from daemon: No such container: x\n',
      preamble: '',
    });
    expect(await parse([])).toEqual({ session: null, out: '', preamble: '' });
  });

  it('gives up on a malformed header', async () => {
    expect(await parse(['AGENTFENSE-SESSION=x1\nrest'])).toEqual({
      session: null,
      out: 'AGENTFENSE-SESSION=x1\nrest',
      preamble: '',
    });
  });
});
