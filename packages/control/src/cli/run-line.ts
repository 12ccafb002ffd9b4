// What the executable's prelude reads of an `agentfense run … -- cmd` command line before the CLI (and
// commander) loads: the options between `run` and `--`, and the --data value among them.

/** The parts of a run line the prelude needs. */
export interface RunLine {
  /** `run`'s options and arguments before `--`. */
  readonly options: readonly string[];
  /** The `--data` value among them, if given. */
  readonly data: string | undefined;
}

/** The run line of `argv` (without node and script); undefined for any other command line or `--help`. */
export function parseRunLine(argv: readonly string[]): RunLine | undefined {
  const separator = argv.indexOf('--');
  if (argv[0] !== 'run' || separator === -1) return undefined;
  const options = argv.slice(1, separator);
  if (options.includes('--help') || options.includes('-h')) return undefined;
  return { options, data: flagValue(options, '--data') };
}

/** The value of `--name V` or `--name=V` among `options`, if given. */
export function flagValue(options: readonly string[], name: string): string | undefined {
  for (let i = 0; i < options.length; i++) {
    const option = options[i] as string;
    if (option === name) return options[i + 1];
    if (option.startsWith(`${name}=`)) return option.slice(name.length + 1);
  }
  return undefined;
}
