// Two connected in-memory transports (VS Code's createProtocolPair), for testing the rpc layer without
// sockets. Messages still go through the codec and the frame decoder, so validation is exercised too.

import type { FrameOptions } from './frames.js';
import { createFramedTransport } from './transport.js';
import type { FramedTransport, MessageTransport } from './transport.js';

/** One end of an in-memory pair. */
export interface PairTransport extends MessageTransport {
  /** Delivers raw bytes to the other end as if written to its socket (garbage, split frames, ...). */
  sendBytes(bytes: Uint8Array): void;
}

/**
 * Creates two transports wired to each other. Delivery is asynchronous (a microtask per write, in order),
 * like a socket; closing one end closes the other without an error, as a peer's orderly close would.
 */
export function createTransportPair(options: FrameOptions = {}): [PairTransport, PairTransport] {
  const ends: FramedTransport[] = [];
  const makeEnd = (peer: () => FramedTransport): FramedTransport =>
    createFramedTransport({
      ...options,
      write: (frame) => queueMicrotask(() => peer().receive(frame)),
      shutdown: () => queueMicrotask(() => peer().close()),
    });
  const a = makeEnd(() => ends[1] as FramedTransport);
  const b = makeEnd(() => ends[0] as FramedTransport);
  ends.push(a, b);
  const withRaw = (end: FramedTransport, peer: FramedTransport): PairTransport =>
    Object.assign(end, {
      sendBytes(bytes: Uint8Array) {
        // Copied: the receiving decoder keeps views, and the caller may reuse its buffer.
        const copy = Uint8Array.from(bytes);
        queueMicrotask(() => peer.receive(copy));
      },
    });
  return [withRaw(a, b), withRaw(b, a)];
}
