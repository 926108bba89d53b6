import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { COMMANDS } from '../helpers/control-model/commands.js';
import { emptyModel } from '../helpers/control-model/model.js';
import { RealSystem } from '../helpers/control-model/system.js';

/**
 * A model-based test of the control plane (issue 38): seeded random sequences of deploys,
 * updates and deletes, versions with weights, promote and rollback, a multiplexed set growing, a
 * deployment scaled from zero, a graph over them and a class actor with checkpoint(), mixed with
 * faults (head kill -9 or SIGTERM and restart, agent kill -9 and rejoin, actor kill -9). After
 * each command the cluster must serve what the reference model (plain data) says, probed over the
 * SDK, HTTP and gRPC for WHICH model and version answers. A failure prints the seed and the shrunk
 * sequence; TROUPE_TEST_MODEL_SEED replays it. `npm run soak:model` runs thousands of steps
 * (TROUPE_TEST_MODEL_RUNS runs of up to TROUPE_TEST_MODEL_COMMANDS commands each).
 */
const SEED = process.env.TROUPE_TEST_MODEL_SEED === 'random' ? Date.now() % 2 ** 31 : Number(process.env.TROUPE_TEST_MODEL_SEED ?? 380_038);
const RUNS = Number(process.env.TROUPE_TEST_MODEL_RUNS ?? 6);
const MAX_COMMANDS = Number(process.env.TROUPE_TEST_MODEL_COMMANDS ?? 15);
/** Shrinking reruns sequences on the real cluster: bounded, so a failure is reported in minutes. */
const SHRINK_BUDGET_MS = Number(process.env.TROUPE_TEST_MODEL_SHRINK_MS ?? 120_000);

describe('the control plane against its reference model', { timeout: Math.max(10 * 60_000, RUNS * MAX_COMMANDS * 60_000) }, () => {
  let real: RealSystem;

  before(async () => {
    real = await RealSystem.start();
  });
  after(async () => {
    await real?.stop();
  });

  test(`${RUNS} seeded runs of up to ${MAX_COMMANDS} commands (seed ${SEED}): every probe answered by the model and version the reference allows`, async () => {
    const began = Date.now();
    await fc.assert(
      fc.asyncProperty(fc.commands(COMMANDS, { maxCommands: MAX_COMMANDS, size: 'max' }), async (commands) => {
        await real.reset();
        const model = emptyModel();
        await fc.asyncModelRun(() => ({ model, real }), commands);
      }),
      {
        seed: SEED,
        numRuns: RUNS,
        // Past the budget, shrinking stops and the smallest failing sequence found so far is reported.
        interruptAfterTimeLimit: Math.max(SHRINK_BUDGET_MS, RUNS * MAX_COMMANDS * 30_000),
        markInterruptAsFailure: false,
        verbose: 1,
        reporter: (details) => {
          if (!details.failed) return;
          throw new Error(
            `the control plane disagreed with its model (seed ${details.seed}, path '${details.counterexamplePath}'; replay with TROUPE_TEST_MODEL_SEED=${details.seed}):\n` +
              `shrunk sequence: ${String(details.counterexample?.[0])}\n` +
              `what failed: ${details.errorInstance instanceof Error ? details.errorInstance.message : String(details.errorInstance)}\n` +
              (fc.defaultReportMessage(details) ?? ''),
          );
        },
      },
    );
    process.stderr.write(
      `# control-plane model: ${real.steps.length} commands in ${RUNS} runs, ${Math.round((Date.now() - began) / 1000)} s\n` +
        (process.env.TROUPE_TEST_MODEL_LIST ? real.steps.map((s) => `#   ${s}\n`).join('') : ''),
    );
  });
});
