import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { prettyLine } from '../../runtime/log-pretty.js';

describe('readable log lines (--log-format pretty)', () => {
  const time = new Date(2026, 10, 25, 19, 26, 39, 123).getTime();

  test('time, level, component, message, then the other fields as key=value', () => {
    const line = JSON.stringify({ level: 30, time, name: 'troupe-head', actor: 'mlp#0', pid: 41, msg: 'actor ready' });
    assert.equal(prettyLine(line, false), '19:26:39.123 INFO  head actor ready  actor=mlp#0 pid=41\n');
  });

  test('values with spaces, objects and arrays are JSON; an error brings its stack, indented', () => {
    const line = JSON.stringify({
      level: 50,
      time,
      name: 'troupe-agent',
      reason: 'a b',
      gpus: [0, 1],
      err: { type: 'Error', message: 'boom', stack: 'Error: boom\n    at x' },
      msg: 'actor died',
    });
    assert.equal(prettyLine(line, false), '19:26:39.123 ERROR agent actor died  reason="a b" gpus=[0,1]\n    Error: boom\n        at x\n');
  });

  test('colour only when asked; text that is not a JSON object passes unchanged', () => {
    const line = JSON.stringify({ level: 40, time, name: 'troupe-head', msg: 'slow' });
    assert.match(prettyLine(line, true), /\u001b\[33mWARN \u001b\[0m/);
    assert.equal(prettyLine('plain text from a child', false), 'plain text from a child\n');
    assert.equal(prettyLine('[1,2]', false), '[1,2]\n');
  });
});
