// Named sets of egress rules, expanded into a policy's rules where a caller names them (like the file
// presets). Host rules only: the addresses behind these names change, the names do not.
import type { NetworkRule } from './policy.js';

export interface NetworkPreset {
  readonly description: string;
  readonly rules: readonly NetworkRule[];
}

const https = (host: string): NetworkRule => ({ action: 'allow', host, ports: [443] });
const web = (host: string): NetworkRule => ({ action: 'allow', host, ports: [80, 443] });

export const NETWORK_PRESETS: Readonly<Record<string, NetworkPreset>> = {
  'package-registries': {
    description:
      'npm, Yarn, PyPI, crates.io, the Go module proxy, RubyGems, Maven Central, Debian and Ubuntu mirrors, and GitHub/GitLab code hosts over HTTPS (git and release downloads)',
    rules: [
      https('registry.npmjs.org'),
      https('registry.yarnpkg.com'),
      https('pypi.org'),
      https('files.pythonhosted.org'),
      https('crates.io'),
      https('static.crates.io'),
      https('index.crates.io'),
      https('proxy.golang.org'),
      https('sum.golang.org'),
      https('rubygems.org'),
      https('repo.maven.apache.org'),
      https('repo1.maven.org'),
      web('deb.debian.org'),
      web('security.debian.org'),
      web('archive.ubuntu.com'),
      web('security.ubuntu.com'),
      https('github.com'),
      https('codeload.github.com'),
      https('objects.githubusercontent.com'),
      https('raw.githubusercontent.com'),
      https('gitlab.com'),
    ],
  },
  'model-apis': {
    description: 'The HTTPS APIs of the common model providers (OpenAI, Anthropic, Google, Mistral, Groq)',
    rules: [
      https('api.openai.com'),
      https('api.anthropic.com'),
      https('generativelanguage.googleapis.com'),
      https('api.mistral.ai'),
      https('api.groq.com'),
    ],
  },
};
