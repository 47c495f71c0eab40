import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { plainNotice } from '../../src/notices';

describe('plainNotice', () => {
  it('breaks every [label](target) link VS Code would make clickable in a notification', () => {
    assert.equal(
      plainNotice('DS4: [open](command:workbench.action.terminal.new) and [x] (https://e.example/a)'),
      'DS4: [open] (command:workbench.action.terminal.new) and [x] (https://e.example/a)',
    );
    assert.equal(plainNotice('a [b]\n(file:///etc/passwd) c'), 'a [b] (file:///etc/passwd) c');
    assert.equal(plainNotice('[[x](command:a)](command:b)'), '[[x] (command:a)] (command:b)');
  });

  it('leaves text without links as it is', () => {
    const text = 'DS4: summary s-1 prepared (the client answered with error -32803: [no model]).';
    assert.equal(plainNotice(text), text);
  });
});
