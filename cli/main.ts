#!/usr/bin/env node
import { TroupeError } from '../runtime/index.js';
import { AGENT_HELP, agentCommand } from './agent.js';
import { DEPLOY_HELP, deployCommand } from './deploy.js';
import { HEAD_HELP, headCommand } from './head.js';
import { STATUS_HELP, statusCommand } from './status.js';
import { UP_HELP, upCommand } from './up.js';

const COMMANDS: Record<string, { summary: string; help: string; run: (argv: string[]) => Promise<void> }> = {
  up: { summary: 'start an embedded cluster (head + local agent) with an example model', help: UP_HELP, run: upCommand },
  head: { summary: 'run the head: scheduler, HTTP API, connection endpoints', help: HEAD_HELP, run: headCommand },
  agent: { summary: 'run a node agent that starts model actors for a head', help: AGENT_HELP, run: agentCommand },
  deploy: { summary: 'create or update a deployment from a JSON or YAML file (HTTP API)', help: DEPLOY_HELP, run: deployCommand },
  status: { summary: 'show nodes, deployments and actors (HTTP API)', help: STATUS_HELP, run: statusCommand },
};

const USAGE = `usage: troupe <command> [flags]

commands:
${Object.entries(COMMANDS)
  .map(([name, c]) => `  ${name.padEnd(8)}${c.summary}`)
  .join('\n')}

Run 'troupe <command> --help' for a command's flags.
`;

function fail(err: unknown): never {
  const code = err instanceof TroupeError ? err.code : 'TROUPE_ERR_INTERNAL';
  process.stderr.write(`troupe: ${code}: ${(err as Error).message ?? String(err)}\n`);
  process.exit(err instanceof TroupeError && err.code === 'TROUPE_ERR_BAD_FLAG' ? 2 : 1);
}

async function main(argv: string[]): Promise<void> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(USAGE);
    return;
  }
  const command = COMMANDS[name];
  if (!command) throw new TroupeError('TROUPE_ERR_BAD_FLAG', `unknown command '${name}'\n\n${USAGE}`);
  if (rest.includes('--help') || rest.includes('-h')) {
    process.stdout.write(command.help);
    return;
  }
  await command.run(rest);
}

main(process.argv.slice(2)).catch(fail);
