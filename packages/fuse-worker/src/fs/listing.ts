// A directory's merged, filtered listing as served to the kernel ('.' and '..' first), kept per directory
// node (FsCore.listings) so that a READDIR/READDIRPLUS at offset > 0 continues the same snapshot and the
// read-ahead knows which files come next. The entry at index i has offset i + 1 (its successor's index).
//
// Kept as three flat columns, not one object per entry: a walk leaves one listing per directory, so its
// cost is paid for every entry the kernel is shown. An object per entry with its index, name, inode number
// (a boxed double when above 2^31) and type cost ~75 bytes; a name slot, a double and a type character
// cost 17 (bench/README.md, "Memory per known entry"). Entry objects are made only for the part of a listing a reply
// carries, and the garbage collector takes them back young.
import type { DirEntryOut } from './types.js';

export class Listing {
  /** Entry names, in the order served. */
  readonly names: readonly string[];
  /** d_ino of each entry (the node's st_ino once known, else a hash of its path). */
  readonly #inos: readonly number[];
  /** The file type bits of each entry, shifted down by 12 (S_IFMT >> 12 < 16), one character each. */
  readonly #types: string;

  constructor(names: readonly string[], inos: readonly number[], types: string) {
    if (inos.length !== names.length || types.length !== names.length) {
      throw new Error('a listing needs a d_ino and a type for every name');
    }
    this.names = names;
    this.#inos = inos;
    this.#types = types;
  }

  get length(): number {
    return this.names.length;
  }

  /** File type bits (S_IFDIR, S_IFREG, ...; 0 when unknown) of entry `i`. */
  modeAt(i: number): number {
    return this.#types.charCodeAt(i) << 12;
  }

  /** Entry `i` as the binding packs it. */
  entry(i: number): DirEntryOut {
    return { name: this.names[i]!, ino: this.#inos[i]!, mode: this.modeAt(i), nextOffset: i + 1 };
  }

  /** Entries `from` (included) to `to` (excluded, clamped to the end). */
  entries(from: number, to = this.names.length): DirEntryOut[] {
    const end = Math.min(to, this.names.length);
    const out: DirEntryOut[] = [];
    for (let i = from; i < end; i++) out.push(this.entry(i));
    return out;
  }
}

/** Collects a listing's entries in order. */
export class ListingBuilder {
  readonly #names: string[] = [];
  readonly #inos: number[] = [];
  readonly #types: number[] = [];

  add(name: string, ino: number, mode: number): void {
    this.#names.push(name);
    this.#inos.push(ino);
    this.#types.push((mode >>> 12) & 0xf);
  }

  build(): Listing {
    let types = '';
    // in slices: one call with a huge directory's worth of arguments would overflow the stack
    for (let i = 0; i < this.#types.length; i += 4096) {
      types += String.fromCharCode(...this.#types.slice(i, i + 4096));
    }
    return new Listing(this.#names, this.#inos, types);
  }
}
