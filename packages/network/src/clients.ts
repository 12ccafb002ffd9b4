// A sandbox's open connections, counted against its bound: accepted client sockets, and connections a
// relay holds in their place. Each connection holds one slot from its accept to its end, whichever
// path carries it. Without the C accept path the slots are counted here; with it (fast-accept.ts) they
// are counted on the relay's thread, which accepts most connections itself and admits them there.

/** Something the table can end (a socket, or a relayed connection's handle). */
export interface ClientEntry {
  destroy(): void;
}

/** Where the slots are counted: here, or the C accept path's counter. */
export interface Slots {
  acquire(): boolean;
  release(): void;
}

export class ClientTable {
  /** Each entry, and whether it holds a slot this table gives back when it leaves. */
  readonly #entries = new Map<ClientEntry, boolean>();
  #slots: Slots;
  #held = 0;

  constructor(maxConnections: number) {
    this.#slots = {
      acquire: () => this.#held < maxConnections && (this.#held++, true),
      release: () => void this.#held--,
    };
  }

  /** Counts slots with `slots` from now on (the C accept path's; before any connection). */
  countWith(slots: Slots): void {
    this.#slots = slots;
  }

  /** Entries open now (each relayed or accepted connection once). */
  get size(): number {
    return this.#entries.size;
  }

  /** A new connection: false when the sandbox's bound is reached (it is then not taken). */
  admit(entry: ClientEntry): boolean {
    if (!this.#slots.acquire()) return false;
    this.#entries.set(entry, true);
    return true;
  }

  /** A connection whose slot was already acquired (accepted by the C path and handed to Node). */
  adopt(entry: ClientEntry): void {
    this.#entries.set(entry, true);
  }

  /** A connection whose slot the C path holds and gives back itself. */
  track(entry: ClientEntry): void {
    this.#entries.set(entry, false);
  }

  /** `next` carries on `previous`'s connection (a hand-over to the relay): same slot. */
  replace(previous: ClientEntry, next: ClientEntry): void {
    const slot = this.#entries.get(previous) ?? false;
    this.#entries.delete(previous);
    this.#entries.set(next, slot);
  }

  /** The connection ended: its slot is free again. */
  leave(entry: ClientEntry): void {
    const slot = this.#entries.get(entry);
    if (slot === undefined) return;
    this.#entries.delete(entry);
    if (slot) this.#slots.release();
  }

  [Symbol.iterator](): IterableIterator<ClientEntry> {
    return this.#entries.keys();
  }
}
