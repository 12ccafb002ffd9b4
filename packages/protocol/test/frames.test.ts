// Codec and framing, without any transport: byte-level behaviour a peer in another process relies on.
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_MAX_FRAME_BYTES,
  FrameDecoder,
  InvalidArgumentError,
  ProtocolError,
  createCodec,
  encodeFrame,
  parseMessage,
} from '../src/index.js';

const frameOf = (value: unknown): Buffer => encodeFrame(createCodec().encode(value));

describe('encodeFrame', () => {
  it('prefixes the payload with its big-endian length', () => {
    const frame = encodeFrame(Uint8Array.from([7, 8, 9]));
    expect([...frame]).toEqual([0, 0, 0, 3, 7, 8, 9]);
  });

  it('defaults to a 16 MiB maximum and enforces a configured one', () => {
    expect(DEFAULT_MAX_FRAME_BYTES).toBe(16 * 1024 * 1024);
    expect(() => encodeFrame(new Uint8Array(11), { maxFrameBytes: 10 })).toThrow(
      /frame of 11 bytes exceeds the maximum of 10 bytes/,
    );
    expect(() => encodeFrame(new Uint8Array(11), { maxFrameBytes: 10 })).toThrow(ProtocolError);
    expect(encodeFrame(new Uint8Array(10), { maxFrameBytes: 10 }).byteLength).toBe(14);
  });

  it('rejects a nonsensical maximum', () => {
    expect(() => encodeFrame(new Uint8Array(1), { maxFrameBytes: 0 })).toThrow(InvalidArgumentError);
    expect(() => new FrameDecoder({ maxFrameBytes: 2 ** 32 })).toThrow(InvalidArgumentError);
  });
});

describe('FrameDecoder', () => {
  it('returns nothing until a frame is complete, then exactly that frame', () => {
    const decoder = new FrameDecoder();
    const frame = encodeFrame(Buffer.from('hello'));
    for (const byte of frame.subarray(0, -1)) expect(decoder.push(Uint8Array.of(byte))).toEqual([]);
    expect(decoder.bufferedBytes).toBe(frame.byteLength - 1);
    const frames = decoder.push(frame.subarray(-1));
    expect(frames.map((f) => f.toString())).toEqual(['hello']);
    expect(decoder.bufferedBytes).toBe(0);
  });

  it('splits many frames out of one chunk, including empty payloads', () => {
    const decoder = new FrameDecoder();
    const chunk = Buffer.concat(['a', '', 'bc', 'def'].map((s) => encodeFrame(Buffer.from(s))));
    expect(decoder.push(chunk).map((f) => f.toString())).toEqual(['a', '', 'bc', 'def']);
  });

  it('handles a header split across chunks and a payload spread over several', () => {
    const decoder = new FrameDecoder();
    const payload = Buffer.alloc(1000, 0xab);
    const stream = Buffer.concat([encodeFrame(payload), encodeFrame(Buffer.from('tail'))]);
    const whole = new FrameDecoder().push(stream);
    expect(whole[0]?.equals(payload)).toBe(true);
    expect(decoder.push(stream.subarray(0, 2))).toEqual([]);
    expect(decoder.push(stream.subarray(2, 300))).toEqual([]);
    expect(decoder.push(stream.subarray(300, 1003))).toEqual([]);
    // The last payload byte completes frame one; the second frame's header is split after it.
    expect(decoder.push(stream.subarray(1003, 1006))).toHaveLength(1);
    expect(decoder.bufferedBytes).toBe(2);
    const frames = [...decoder.push(stream.subarray(1006))];
    expect(frames.map((f) => f.toString())).toEqual(['tail']);
  });

  it('rejects an oversized length as soon as the header arrives and stays failed', () => {
    const decoder = new FrameDecoder({ maxFrameBytes: 1024 });
    const header = Buffer.alloc(4);
    header.writeUInt32BE(1025);
    expect(() => decoder.push(header)).toThrow(/frame of 1025 bytes, more than the maximum of 1024 bytes/);
    // The stream position is lost: even a valid frame afterwards is refused.
    expect(() => decoder.push(encodeFrame(Buffer.from('ok')))).toThrow(ProtocolError);
  });

  it('accepts a frame of exactly the maximum size', () => {
    const decoder = new FrameDecoder({ maxFrameBytes: 8 });
    expect(decoder.push(encodeFrame(Buffer.alloc(8), { maxFrameBytes: 8 }))).toHaveLength(1);
  });
});

describe('codec', () => {
  const codec = createCodec();

  it('round-trips plain data, keeping bytes as binary', () => {
    const value = {
      s: 'héllo',
      n: [0, -1, 2 ** 40, 1.5],
      b: true,
      nil: null,
      nested: { deep: [{ x: 1 }] },
      data: Buffer.from([0, 255, 1]),
      u8: Uint8Array.of(9, 8, 7),
    };
    const decoded = codec.decode(codec.encode(value)) as typeof value;
    expect(decoded.s).toBe('héllo');
    expect(decoded.n).toEqual([0, -1, 2 ** 40, 1.5]);
    expect(decoded.nested).toEqual({ deep: [{ x: 1 }] });
    expect(decoded.nil).toBeNull();
    expect(decoded.data).toBeInstanceOf(Uint8Array);
    expect([...decoded.data]).toEqual([0, 255, 1]);
    expect(decoded.u8).toBeInstanceOf(Uint8Array);
    expect([...decoded.u8]).toEqual([9, 8, 7]);
  });

  it('encodes bytes as standard msgpack bin, not as an extension', () => {
    const encoded = codec.encode(Uint8Array.of(1, 2));
    expect([...encoded]).toEqual([0xc4, 2, 1, 2]);
  });

  it('does not alias decoded bytes to the input buffer', () => {
    const encoded = codec.encode({ data: Uint8Array.of(1, 2, 3) });
    const decoded = codec.decode(encoded) as { data: Uint8Array };
    encoded.fill(0);
    expect([...decoded.data]).toEqual([1, 2, 3]);
  });

  it.each([
    ['a Date', { when: new Date(0) }, /\$\.when is a Date/],
    ['a Map', { m: new Map() }, /\$\.m is a Map/],
    ['a Set', [new Set([1])], /\$\[0\] is a Set/],
    ['a bigint', { big: 1n }, /\$\.big is bigint 1/],
    ['a class instance', { e: new Error('x') }, /\$\.e is a Error/],
    ['a non-byte typed array', { f: new Float64Array(1) }, /\$\.f is a Float64Array/],
    ['a function', { f: () => 1 }, /\$\.f is a function/],
  ])('refuses to encode %s', (_label, value, message) => {
    expect(() => codec.encode(value)).toThrow(message);
    expect(() => codec.encode(value)).toThrow(ProtocolError);
  });

  it('refuses cycles instead of overflowing the stack', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(() => codec.encode(cyclic)).toThrow(/nested more than 64 levels deep/);
  });

  it('refuses msgpack extensions a peer might send (timestamp, Set)', () => {
    // fixext4 type -1 (timestamp 32): decodes to a Date in msgpackr whatever the options.
    expect(() => codec.decode(Uint8Array.of(0xd6, 0xff, 0, 0, 0, 0))).toThrow(/is a Date/);
    // A msgpackr Set extension (type 0x73) wrapping an empty array.
    expect(() => codec.decode(Uint8Array.of(0xd4, 0x73, 0x00, 0x90))).toThrow(ProtocolError);
  });

  it('turns undecodable bytes into a ProtocolError', () => {
    expect(() => codec.decode(Uint8Array.of())).toThrow(ProtocolError);
    // 0xc1 is "never used" in msgpack; msgpackr yields a marker object, which the plain-data check refuses.
    expect(() => codec.decode(Uint8Array.of(0xc1))).toThrow(ProtocolError);
    // A str8 header announcing 200 bytes with 1 present.
    expect(() => codec.decode(Uint8Array.of(0xd9, 200, 0x41))).toThrow(/not valid msgpack/);
    // Two values in one frame: trailing data is an error, not silently dropped.
    expect(() => codec.decode(Uint8Array.of(0x01, 0x02))).toThrow(ProtocolError);
  });

  it('does not let a __proto__ key set a prototype', () => {
    // fixmap 1 { "__proto__": { "polluted": true } }
    const key = Buffer.from('__proto__');
    const inner = Buffer.concat([Buffer.of(0x81, 0xa8), Buffer.from('polluted'), Buffer.of(0xc3)]);
    const bytes = Buffer.concat([Buffer.of(0x81, 0xa0 | key.length), key, inner]);
    const decoded = codec.decode(bytes) as Record<string, unknown>;
    expect(Object.getPrototypeOf(decoded)).toBe(Object.prototype);
    expect((decoded as { polluted?: unknown }).polluted).toBeUndefined();
  });
});

describe('parseMessage', () => {
  it('accepts each message type and drops unknown fields', () => {
    expect(parseMessage({ type: 'hello', version: 1, extra: 'x' })).toEqual({ type: 'hello', version: 1 });
    expect(parseMessage({ type: 'request', id: 3, method: 'm', params: { a: 1 } })).toEqual({
      type: 'request',
      id: 3,
      method: 'm',
      params: { a: 1 },
    });
    expect(parseMessage({ type: 'response', replyTo: 3, ok: true, result: [1] })).toEqual({
      type: 'response',
      replyTo: 3,
      ok: true,
      result: [1],
    });
    expect(
      parseMessage({
        type: 'response',
        replyTo: 3,
        ok: false,
        error: { code: 'AF_X', message: 'm', stack: 's' },
      }),
    ).toEqual({ type: 'response', replyTo: 3, ok: false, error: { code: 'AF_X', message: 'm' } });
    expect(parseMessage({ type: 'cancel', id: 1 })).toEqual({ type: 'cancel', id: 1 });
    expect(parseMessage({ type: 'event', name: 'audit', payload: [] })).toEqual({
      type: 'event',
      name: 'audit',
      payload: [],
    });
    expect(parseMessage({ type: 'shutdown' })).toEqual({ type: 'shutdown' });
  });

  it.each([
    [null, /message must be an object \(got null\)/],
    [[1], /message must be an object \(got an array of 1\)/],
    [{ type: 'nope' }, /message\.type must be one of 'hello'.*got string "nope"/],
    [{ type: 'request', id: 0, method: 'm' }, /request\.id must be a positive integer/],
    [
      { type: 'request', id: 1.5, method: 'm' },
      /request\.id must be a non-negative integer \(got number 1.5\)/,
    ],
    [{ type: 'request', id: 1, method: 7 }, /request\.method must be a string \(got number 7\)/],
    [{ type: 'response', replyTo: 1, ok: 'yes' }, /response\.ok must be a boolean/],
    [
      { type: 'response', replyTo: 1, ok: false, error: { code: 1 } },
      /response\.error\.code must be a string/,
    ],
    [{ type: 'hello', version: '1' }, /hello\.version must be a non-negative integer/],
    [{ type: 'cancel' }, /cancel\.id must be a non-negative integer \(got undefined\)/],
  ])('rejects %j with a precise ProtocolError', (value, message) => {
    expect(() => parseMessage(value)).toThrow(ProtocolError);
    expect(() => parseMessage(value)).toThrow(message);
  });

  it('decodes a frame end to end into a typed message', () => {
    const decoder = new FrameDecoder();
    const [payload] = decoder.push(frameOf({ type: 'cancel', id: 42 }));
    expect(parseMessage(createCodec().decode(payload as Buffer))).toEqual({ type: 'cancel', id: 42 });
  });
});
