// The inode table: paths of nodes across renames, unlinks and hard links (every name of a node is kept).
import { describe, expect, it } from 'vitest';
import { InodeTable, ROOT_INO } from '../../src/fs/inodes.js';

describe('InodeTable', () => {
  it('follows renames of directories and files', () => {
    const t = new InodeTable();
    const dir = t.remember(ROOT_INO, 'd', true);
    const file = t.remember(dir.ino, 'f', false);
    expect(t.pathOf(file.ino)).toBe('/d/f');
    t.rename(ROOT_INO, 'd', ROOT_INO, 'e');
    expect(t.pathOf(file.ino)).toBe('/e/f');
    t.rename(dir.ino, 'f', ROOT_INO, 'g');
    expect(t.pathOf(file.ino)).toBe('/g');
    expect(t.child(dir.ino, 'f')).toBeUndefined();
  });

  it('keeps a hard-linked node reachable after its first name is unlinked or renamed away', () => {
    const t = new InodeTable();
    const a = t.remember(ROOT_INO, 'a', false);
    t.alias(a.ino, ROOT_INO, 'b');
    t.unlink(ROOT_INO, 'a');
    expect(t.pathOf(a.ino)).toBe('/b');
    t.alias(a.ino, ROOT_INO, 'c');
    t.rename(ROOT_INO, 'c', ROOT_INO, 'd');
    t.unlink(ROOT_INO, 'b');
    expect(t.pathOf(a.ino)).toBe('/d');
    t.unlink(ROOT_INO, 'd');
    expect(t.pathOf(a.ino)).toBeNull();
    // An orphan linked again (through a kept handle) gets its path back.
    t.alias(a.ino, ROOT_INO, 'e');
    expect(t.pathOf(a.ino)).toBe('/e');
  });

  it('a rename over another name of the same node changes nothing; over another node orphans it', () => {
    const t = new InodeTable();
    const a = t.remember(ROOT_INO, 'a', false);
    t.alias(a.ino, ROOT_INO, 'b');
    t.rename(ROOT_INO, 'a', ROOT_INO, 'b');
    expect(t.child(ROOT_INO, 'a')).toBe(a);
    expect(t.child(ROOT_INO, 'b')).toBe(a);
    const c = t.remember(ROOT_INO, 'c', false);
    t.rename(ROOT_INO, 'a', ROOT_INO, 'c');
    expect(t.pathOf(c.ino)).toBeNull();
    expect(t.child(ROOT_INO, 'c')).toBe(a);
    expect(t.child(ROOT_INO, 'b')).toBe(a);
    expect(t.child(ROOT_INO, 'a')).toBeUndefined();
    expect(t.pathOf(a.ino)).toBe('/c');
  });

  it('forgetting a node drops every one of its names', () => {
    const t = new InodeTable();
    const a = t.remember(ROOT_INO, 'a', false);
    t.alias(a.ino, ROOT_INO, 'b');
    t.forget(a.ino, 2);
    expect(t.get(a.ino)).toBeUndefined();
    expect(t.child(ROOT_INO, 'a')).toBeUndefined();
    expect(t.child(ROOT_INO, 'b')).toBeUndefined();
  });
});

// Every entry the kernel knows is one node, so a node's fixed cost is multiplied by the size of the tree a
// sandbox walks (bench/README.md, "Memory per known entry"): a file node carries no map and no array.
describe('InodeTable memory per node', () => {
  it('gives a file no children map and a one-name node no links array', () => {
    const t = new InodeTable();
    const dir = t.remember(ROOT_INO, 'd', true);
    const file = t.remember(dir.ino, 'f', false);
    expect(file.children).toBeUndefined();
    expect(file.links).toBeUndefined();
    expect(dir.children?.get('f')).toBe(file.ino);
    // a second name makes the array; losing it drops the array again
    t.alias(file.ino, ROOT_INO, 'g');
    expect(file.links).toEqual([{ parent: ROOT_INO, name: 'g' }]);
    t.unlink(ROOT_INO, 'g');
    expect(file.links).toBeUndefined();
    // a directory whose last known child goes drops its map
    t.forget(file.ino, 2);
    expect(dir.children).toBeUndefined();
    expect(t.child(dir.ino, 'f')).toBeUndefined();
  });
});
