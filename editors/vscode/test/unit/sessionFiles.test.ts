import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import { piSessionDir, recentSessionFiles } from '../../src/sessionFiles';

describe('Pi session files', () => {
  it("finds a workspace's session directory the way Pi names it", () => {
    assert.equal(piSessionDir('/Users/me/proj', {}, '/Users/me'), '/Users/me/.pi/agent/sessions/--Users-me-proj--');
    assert.equal(piSessionDir('/w', { PI_CODING_AGENT_DIR: '/agent' }, '/h'), '/agent/sessions/--w--');
    assert.equal(piSessionDir('/w', { PI_CODING_AGENT_DIR: '' }, '/h'), '/h/.pi/agent/sessions/--w--');
    assert.equal(piSessionDir('/w', { PI_CODING_AGENT_SESSION_DIR: '/sessions' }, '/h'), '/sessions');
  });

  it('lists the .jsonl files, newest first, and nothing for a missing directory', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ds4-sessions-'));
    try {
      for (const [name, mtime] of [['old.jsonl', 1000], ['new.jsonl', 3000], ['mid.jsonl', 2000], ['notes.txt', 4000]] as const) {
        writeFileSync(join(dir, name), '{}\n');
        utimesSync(join(dir, name), mtime, mtime);
      }
      mkdirSync(join(dir, 'dir.jsonl'));
      assert.deepEqual(
        recentSessionFiles(dir).map((file) => file.path),
        ['new.jsonl', 'mid.jsonl', 'old.jsonl'].map((name) => join(dir, name)),
      );
      assert.equal(recentSessionFiles(dir, 1).length, 1);
      assert.deepEqual(recentSessionFiles(join(dir, 'missing')), []);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
