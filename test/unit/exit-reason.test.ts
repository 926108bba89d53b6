import assert from 'node:assert/strict';
import { test } from 'node:test';
import { describeExit } from '../../head/state/record-changes.js';

test("an actor's exit names its code or signal and the error it died of, not the last frames of its stack", () => {
  const stack = [
    'file:///app/dist/counter.js:12',
    "    throw new Error('the ledger is corrupt');",
    '    ^',
    '',
    'Error: the ledger is corrupt',
    '    at Counter.add (file:///app/dist/counter.js:12:11)',
    '    at ClassInstance.call (file:///app/dist/actors/class-instance.js:80:20)',
    '    at process.processTicksAndRejections (node:internal/process/task_queues:95:5)',
    '    at async Promise.all (index 0)',
    '    at async run (file:///app/dist/actors/class-host.js:44:9)',
    '',
    'Node.js v20.11.0',
  ].join('\n');
  assert.equal(describeExit({ code: 1, signal: null, stderrTail: stack }), 'exited with code 1: Error: the ledger is corrupt');
  assert.equal(describeExit({ code: null, signal: 'SIGKILL', stderrTail: '' }), 'exited with signal SIGKILL');
  // Nothing that reads as an error: the last lines, as written.
  assert.equal(
    describeExit({ code: 3, signal: null, stderrTail: 'loading\nstill loading\n' }),
    'exited with code 3: loading\nstill loading',
  );
  assert.equal(
    describeExit({ code: 2, signal: null, stderrTail: 'troupe actor: bad environment: TROUPE_MODEL_PATH: required\n' }),
    'exited with code 2: troupe actor: bad environment: TROUPE_MODEL_PATH: required',
  );
});
