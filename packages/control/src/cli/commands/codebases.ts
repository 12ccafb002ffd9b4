// `agentfense codebase create|upload|list|inspect|files|destroy`: stored codebases (uploaded into the data
// directory) and the linked ones `run` records. Uploads stream file by file with progress on stderr.
import { lstat, opendir } from 'node:fs/promises';
import { createReadStream } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import type { Command } from 'commander';
import { InvalidArgumentError, quotePath } from '@agentfense/protocol/core';
import type { ControlPlane } from '../../control-plane.js';
import type { CodebaseInfo } from '../../codebases/types.js';
import { addDataOption, withControlPlane } from '../control-options.js';
import type { DataFlags } from '../control-options.js';
import { formatTable, printJson } from '../io.js';
import type { CliContext, CliIo } from '../io.js';

interface LocalFile {
  readonly path: string;
  readonly rel: string;
  readonly size: number;
}

/** Regular files under `root`; symlinks and special files are skipped (and counted), never followed. */
async function walk(root: string): Promise<{ files: LocalFile[]; skipped: string[] }> {
  const files: LocalFile[] = [];
  const skipped: string[] = [];
  const visit = async (dir: string): Promise<void> => {
    for await (const entry of await opendir(dir)) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) await visit(path);
      else if (entry.isFile())
        files.push({ path, rel: relative(root, path), size: (await lstat(path)).size });
      else skipped.push(relative(root, path));
    }
  };
  const info = await lstat(root).catch(() => null);
  if (info === null) throw new InvalidArgumentError(`${root} does not exist`);
  if (info.isFile())
    return { files: [{ path: root, rel: root.split('/').at(-1) ?? 'file', size: info.size }], skipped };
  if (!info.isDirectory()) throw new InvalidArgumentError(`${root} is neither a file nor a directory`);
  await visit(root);
  return { files, skipped };
}

function mib(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

/** Uploads a local file or tree into a stored codebase under `prefix`, printing progress. */
async function uploadTree(
  io: CliIo,
  plane: ControlPlane,
  id: string,
  source: string,
  prefix: string,
): Promise<number> {
  const { files, skipped } = await walk(resolve(source));
  const total = files.reduce((n, f) => n + f.size, 0);
  const tty = (process.stderr as { isTTY?: boolean }).isTTY === true;
  let done = 0;
  let lastReport = 0;
  const report = (force: boolean): void => {
    const now = performance.now();
    if (!force && now - lastReport < (tty ? 100 : 2000)) return;
    lastReport = now;
    const line = `agentfense: uploaded ${mib(done)} of ${mib(total)} (${Math.floor((done / Math.max(total, 1)) * 100)}%)`;
    io.stderr.write(tty ? `\r${line}` : `${line}\n`);
  };
  for (const file of files) {
    const target = prefix === '' ? file.rel : `${prefix.replace(/\/+$/, '')}/${file.rel}`;
    // Count bytes as the upload consumes them (a 'data' listener would switch the stream to flowing
    // mode and race the upload's own reader for the chunks).
    async function* counted(): AsyncGenerator<Buffer> {
      for await (const chunk of createReadStream(file.path)) {
        done += (chunk as Buffer).length;
        report(false);
        yield chunk as Buffer;
      }
    }
    await plane.uploadFile(id, target, counted());
  }
  report(true);
  if (tty) io.stderr.write('\n');
  io.stderr.write(`agentfense: ${files.length} file(s) uploaded to ${id}\n`);
  if (skipped.length > 0)
    io.stderr.write(
      `agentfense: skipped ${skipped.length} symlink(s) or special file(s): ${skipped.slice(0, 5).join(', ')}${skipped.length > 5 ? ', …' : ''}\n`,
    );
  return files.length;
}

function describe(cb: CodebaseInfo): string {
  return `${formatTable([
    ['id', cb.id],
    ['name', cb.name],
    ['kind', cb.kind],
    ['owner', cb.ownerId ?? '-'],
    ['path', cb.path],
    ['files', cb.fileCount === null ? '-' : String(cb.fileCount)],
    ['size', cb.sizeBytes === null ? '-' : `${cb.sizeBytes} bytes`],
    ['created', cb.createdAt],
    ['updated', cb.updatedAt],
  ])}\n`;
}

/** Registers `codebase` and its subcommands on the program. */
export function registerCodebases(program: Command, { io }: CliContext): void {
  const codebase = program
    .command('codebase')
    .description('create, upload to, list, inspect and delete codebases');

  addDataOption(
    codebase.command('create').description('create a stored codebase, optionally uploading a directory'),
  )
    .requiredOption('--name <name>', 'a name for people')
    .option('--owner <id>', 'owner id (for listings by owner)')
    .option('--from <dir>', 'upload this directory into it (symlinks are skipped)')
    .option('--json', 'print the codebase as JSON')
    .action(async (flags: DataFlags & { name: string; owner?: string; from?: string; json?: boolean }) => {
      await withControlPlane(flags, async (plane) => {
        const created = await plane.createCodebase({ name: flags.name, ownerId: flags.owner ?? null });
        if (flags.from !== undefined) await uploadTree(io, plane, created.id, flags.from, '');
        const info = await plane.getCodebase(created.id);
        if (flags.json === true) printJson(io, info);
        else io.stdout.write(`${info.id}\n`);
      });
    });

  addDataOption(
    codebase
      .command('upload')
      .description('upload a file or directory into a stored codebase')
      .argument('<id>', 'codebase id (cb_…)')
      .argument('<source>', 'a local file or directory'),
  )
    .option('--to <path>', 'codebase directory to upload into (default: the root)', '')
    .action(async (id: string, source: string, flags: DataFlags & { to: string }) => {
      await withControlPlane(flags, async (plane) => {
        await plane.getCodebase(id);
        await uploadTree(io, plane, id, source, flags.to.replace(/^\/+/, ''));
      });
    });

  addDataOption(codebase.command('list').description('list codebases'))
    .option('--json', 'print a JSON array')
    .action(async (flags: DataFlags & { json?: boolean }) => {
      await withControlPlane(flags, async (plane) => {
        const all = await plane.listCodebases();
        if (flags.json === true) printJson(io, all);
        else if (all.length === 0) io.stderr.write('agentfense: no codebases\n');
        else
          io.stdout.write(
            `${formatTable([['ID', 'NAME', 'KIND', 'FILES', 'PATH'], ...all.map((c) => [c.id, c.name, c.kind, c.fileCount === null ? '-' : String(c.fileCount), c.path])])}\n`,
          );
      });
    });

  addDataOption(codebase.command('inspect').description('show one codebase').argument('<id>', 'codebase id'))
    .option('--json', 'print the codebase as JSON')
    .action(async (id: string, flags: DataFlags & { json?: boolean }) => {
      await withControlPlane(flags, async (plane) => {
        const info = await plane.getCodebase(id);
        if (flags.json === true) printJson(io, info);
        else io.stdout.write(describe(info));
      });
    });

  addDataOption(
    codebase.command('files').description("list a codebase's files").argument('<id>', 'codebase id'),
  )
    .option('--path <dir>', 'directory to list (default the root)')
    .option('-r, --recursive', 'list everything below it')
    .option('--json', 'print a JSON array')
    .action(async (id: string, flags: DataFlags & { path?: string; recursive?: boolean; json?: boolean }) => {
      await withControlPlane(flags, async (plane) => {
        const files = await plane.listFiles(id, {
          recursive: flags.recursive === true,
          ...(flags.path === undefined ? {} : { path: flags.path }),
        });
        if (flags.json === true) printJson(io, files);
        else io.stdout.write(files.map((f) => `${quotePath(`${f.path}${f.isDir ? '/' : ''}`)}\n`).join(''));
      });
    });

  addDataOption(
    codebase
      .command('destroy')
      .description('delete codebases (refused while sandboxes use them)')
      .argument('<id...>', 'codebase ids'),
  ).action(async (ids: string[], flags: DataFlags) => {
    await withControlPlane(flags, async (plane) => {
      for (const id of ids) {
        await plane.deleteCodebase(id);
        io.stderr.write(`agentfense: deleted ${id}\n`);
      }
    });
  });
}
