// msgpack encoding of one message payload (framing lives in frames.ts). Plain msgpack only: no records,
// no structured clone, no typed-array extensions, so any msgpack implementation could be a peer.

import { Packr, Unpackr } from 'msgpackr';
import type { Options } from 'msgpackr';
import { ProtocolError } from '../errors.js';
import { assertPlainData } from './plain-data.js';

/** Turns plain data into msgpack bytes and back; both directions throw ProtocolError on bad input. */
export interface Codec {
  /** Encodes plain data (see plain-data.ts); throws ProtocolError for anything else. */
  encode(value: unknown): Buffer;
  /** Decodes exactly one msgpack value filling all of `bytes`; the result is unchecked `unknown`. */
  decode(bytes: Uint8Array): unknown;
}

// One option set for both sides. `useRecords: false` keeps maps as maps (records are msgpackr-only and
// stateful); `structuredClone: false` refuses the id/pointer extensions; `copyBuffers` makes decoded `bin`
// values own their memory instead of pinning (and aliasing) the receive buffer; `int64AsType: 'number'`
// keeps 64-bit integers as numbers (our counters never exceed 2^53).
const OPTIONS: Options = {
  useRecords: false,
  moreTypes: false,
  structuredClone: false,
  mapsAsObjects: true,
  bundleStrings: false,
  copyBuffers: true,
  int64AsType: 'number',
};

/** Creates a codec; each has its own msgpackr instances, so nothing is shared between connections. */
export function createCodec(): Codec {
  const packr = new Packr(OPTIONS);
  const unpackr = new Unpackr(OPTIONS);
  return {
    encode(value) {
      assertPlainData(value);
      try {
        return packr.pack(value);
      } catch (err) {
        throw new ProtocolError(`cannot encode message: ${errorMessage(err)}`, { cause: err });
      }
    },
    decode(bytes) {
      let value: unknown;
      try {
        value = unpackr.unpack(bytes);
      } catch (err) {
        throw new ProtocolError(`frame is not valid msgpack: ${errorMessage(err)}`, { cause: err });
      }
      // Extensions (Date, Set, RegExp, Error, BigInt...) decode regardless of options: refuse them here.
      assertPlainData(value);
      return value;
    },
  };
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
