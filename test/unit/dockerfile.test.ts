import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { describe, test } from 'node:test';

/**
 * Docker cannot run here, so the images are checked by reading their Dockerfiles: the stages, what
 * each installs, who the final image runs as and what it runs. The same install commands were run
 * by hand (build stage, then `npm ci --omit=dev --ignore-scripts` and the assembled /app serving a
 * model) when the files were written; this keeps those essentials from drifting.
 */

interface Instruction {
  op: string;
  args: string;
}
interface Stage {
  from: string;
  name: string | undefined;
  body: Instruction[];
}

const ROOT = new URL('../../../', import.meta.url);

/** Instructions with continuation lines joined and comments dropped, grouped into stages. */
function parse(text: string): { args: Map<string, string>; stages: Stage[] } {
  const lines = text
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  const args = new Map<string, string>();
  const stages: Stage[] = [];
  for (const line of lines) {
    const [, op = '', rest = ''] = /^(\S+)\s*(.*)$/.exec(line) ?? [];
    const ins = { op: op.toUpperCase(), args: rest.replace(/\s+/g, ' ') };
    if (ins.op === 'ARG' && stages.length === 0) {
      const [name, value = ''] = ins.args.split('=');
      args.set(name!, value);
    } else if (ins.op === 'FROM') {
      const [, from = '', name] = /^(\S+)(?: AS (\S+))?$/i.exec(ins.args) ?? [];
      stages.push({ from: from.replace(/\$\{(\w+)\}/g, (_, n: string) => args.get(n) ?? `\${${n}}`), name, body: [] });
    } else {
      assert.ok(stages.length > 0, `${ins.op} before any FROM`);
      stages.at(-1)!.body.push(ins);
    }
  }
  return { args, stages };
}

const exec = (stage: Stage, op: string) => stage.body.filter((i) => i.op === op).map((i) => i.args);
const json = (stage: Stage, op: string) => {
  const found = exec(stage, op);
  assert.equal(found.length, 1, `one ${op}`);
  return JSON.parse(found[0]!) as string[];
};

async function dockerfile(name: string) {
  return parse(await readFile(new URL(name, ROOT), 'utf8'));
}

function checkCommon(name: string, stages: Stage[]): Stage {
  const names = stages.map((s) => s.name);
  assert.ok(stages.length >= 3, `${name} is multi-stage`);
  // Every COPY --from names an earlier stage, so the build order is the file's order.
  stages.forEach((stage, i) => {
    for (const copy of exec(stage, 'COPY')) {
      const from = /--from=(\S+)/.exec(copy)?.[1];
      if (from) assert.ok(names.slice(0, i).includes(from), `${name}: COPY --from=${from} names an earlier stage`);
    }
  });
  const build = stages.find((s) => s.name === 'build');
  assert.ok(build, `${name} has a build stage`);
  const buildRuns = exec(build, 'RUN').join(' && ');
  assert.match(buildRuns, /npm ci --ignore-scripts/, 'the build installs dev dependencies too (no --omit)');
  assert.doesNotMatch(buildRuns, /--omit=dev/);
  assert.match(buildRuns, /npm run build/);

  const runtime = stages.at(-1)!;
  const runs = stages.flatMap((s) => exec(s, 'RUN')).join(' && ');
  assert.match(runs, /npm ci --omit=dev --ignore-scripts/, 'production dependencies, without `prepare` (tsc is a dev dependency)');
  const copies = exec(runtime, 'COPY');
  assert.ok(
    copies.some((c) => /--from=build \S*dist \.\/dist/.test(c)),
    'dist/ comes from the build stage',
  );
  assert.ok(
    copies.some((c) => /--from=\S+ \S*node_modules \.\/node_modules/.test(c)),
    'node_modules comes from the production install',
  );
  assert.ok(!copies.some((c) => /--from=build \S*node_modules/.test(c)), 'no dev dependencies in the image');
  // node_modules/@troupe/client links to the workspace, which 'troupe' re-exports: it is built and copied.
  assert.ok(
    copies.some((c) => /--from=build \S*packages\/client\/dist \.\/packages\/client\/dist/.test(c)),
    'the client workspace comes from the build stage',
  );

  const users = exec(runtime, 'USER');
  assert.equal(users.length, 1, `${name}: the final stage sets USER`);
  assert.ok(!['root', '0', '0:0'].includes(users[0]!), `${name}: runs as a non-root user, not ${users[0]}`);
  assert.deepEqual(json(runtime, 'ENTRYPOINT'), ['node', 'dist/cli/main.js']);
  const env = exec(runtime, 'ENV').join(' ');
  assert.match(env, /TROUPE_HOST=0\.0\.0\.0/, 'listens beyond loopback in a container, so the head demands a token');
  assert.doesNotMatch(env, /TROUPE_TOKEN/, 'no token baked into the image');
  assert.match(exec(runtime, 'EXPOSE').join(' '), /\b8470\b/);
  return runtime;
}

describe('container images', () => {
  test('Dockerfile: multi-stage, production dependencies only, non-root, runs the head by default', async () => {
    const { stages } = await dockerfile('Dockerfile');
    const runtime = checkCommon('Dockerfile', stages);
    assert.match(runtime.from, /^node:20/);
    assert.deepEqual(json(runtime, 'CMD').slice(0, 1), ['head']);
  });

  test('Dockerfile.gpu: on a CUDA 12 + cuDNN runtime base, with the CUDA 12 provider of onnxruntime-node', async () => {
    const { stages } = await dockerfile('Dockerfile.gpu');
    const runtime = checkCommon('Dockerfile.gpu', stages);
    assert.match(runtime.from, /^nvidia\/cuda:12\.[\d.]+-cudnn-runtime-/);
    const runs = stages.flatMap((s) => exec(s, 'RUN')).join(' && ');
    assert.match(
      runs,
      /ONNXRUNTIME_NODE_INSTALL=cuda12 node node_modules\/onnxruntime-node\/script\/install\.js/,
      'as docs/operations.md says for GPU hosts',
    );
    assert.ok(
      exec(runtime, 'COPY').some((c) => /--from=\S+ \/usr\/local\/bin\/node /.test(c)),
      'node comes from the official image',
    );
    assert.match(exec(runtime, 'ENV').join(' '), /NVIDIA_DRIVER_CAPABILITIES=compute,utility/, 'the agent needs nvidia-smi (utility)');
    assert.equal(json(runtime, 'CMD')[0], 'agent');
  });

  test('.dockerignore keeps local builds and dependencies out of the build context', async () => {
    const ignored = (await readFile(new URL('.dockerignore', ROOT), 'utf8')).split('\n').map((l) => l.trim());
    for (const path of ['node_modules', 'dist', '.troupe', '.git']) assert.ok(ignored.includes(path), path);
    for (const needed of ['package.json', 'package-lock.json', 'scripts', 'head'])
      assert.ok(!ignored.includes(needed), `${needed} is needed by the build`);
  });
});
