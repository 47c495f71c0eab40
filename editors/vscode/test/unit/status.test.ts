import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { stderrLineLevel } from '../../src/serverLog';
import { applyProgress, COMMANDS, formatInt, MANAGE_TRUST_COMMAND, presentStatus, type StatusState } from '../../src/status';
import { healthResult, planResult } from '../fixtures';

const ready: StatusState = { phase: { kind: 'ready' }, trusted: true };

describe('status bar', () => {
  it('follows a rebuild: begin 0%, reports, then ready again', () => {
    let state = applyProgress(ready, { kind: 'begin', title: 'ds4: rebuilding the index', percentage: 0 });
    assert.equal(presentStatus(state).text, '$(sync~spin) DS4 indexing 0%');
    state = applyProgress(state, { kind: 'report', percentage: 42, message: '5/12 sessions' });
    assert.equal(presentStatus(state).text, '$(sync~spin) DS4 indexing 42%');
    assert.match(presentStatus(state).tooltip, /5\/12 sessions/);
    // A report without a percentage keeps the last one.
    state = applyProgress(state, { kind: 'report', message: '6/12 sessions' });
    assert.equal(presentStatus(state).text, '$(sync~spin) DS4 indexing 42%');
    state = applyProgress(state, { kind: 'end', message: '12 session(s), 9000 entries, 0 failed' });
    assert.equal(presentStatus(state).text, '$(database) DS4 ready');
  });

  it('says compacting while the server compacts a session, and the summary it waits for', () => {
    let state = applyProgress(ready, { kind: 'begin', title: 'ds4: compacting the session', percentage: 0 });
    assert.equal(presentStatus(state).text, '$(sync~spin) DS4 compacting 0%');
    state = applyProgress(state, { kind: 'report', percentage: 50, message: "waiting for the client's summary" });
    assert.equal(presentStatus(state).text, '$(sync~spin) DS4 compacting 50%');
    assert.equal(presentStatus(state).tooltip, "DS4: compacting a session\nwaiting for the client's summary");
    state = applyProgress(state, { kind: 'end' });
    assert.equal(presentStatus(state).text, '$(database) DS4 ready');
    // The next indexing run says indexing again.
    state = applyProgress(state, { kind: 'begin', title: 'ds4: rebuilding the index' });
    assert.equal(presentStatus(state).text, '$(sync~spin) DS4 indexing');
  });

  it('shows indexing without a number when the server reports none', () => {
    const state = applyProgress(ready, { kind: 'begin', title: 'ds4: checking health' });
    assert.equal(presentStatus(state).text, '$(sync~spin) DS4 indexing');
  });

  it('shows what is indexed and the last plan when ready', () => {
    const presentation = presentStatus({ ...ready, health: healthResult(), lastPlan: planResult() });
    assert.equal(presentation.severity, 'normal');
    assert.equal(presentation.command, COMMANDS.showManifest);
    assert.match(presentation.tooltip, /1 session, 1,018 entries indexed/);
    assert.match(presentation.tooltip, /Last plan: 36,349 of 200,000 tokens \(managed\), m-01a22bfe7ae5956d3018a646656d/);
  });

  it('shows the last project sync, and warns when it failed or was truncated', () => {
    const synced = presentStatus({
      ...ready,
      project: { status: 'ready', reason: 'edit', filesIndexed: 1, snippets: 3, truncated: false },
    });
    assert.equal(synced.text, '$(database) DS4 ready');
    assert.match(synced.tooltip, /Project index: ready; last sync \(edit\) re-read 1 file, 3 snippets written/);
    const failed = presentStatus({
      ...ready,
      project: { status: 'error', reason: 'watched', error: 'disk full', filesIndexed: 0, snippets: 0, truncated: true },
    });
    assert.equal(failed.text, '$(warning) DS4 ready');
    assert.equal(failed.severity, 'warning');
    assert.match(failed.tooltip, /Project index error: disk full \(last sync: watched\)/);
    assert.match(failed.tooltip, /project.maxFiles or project.maxTotalBytes/);
  });

  it('says untrusted (restricted mode) and offers to manage trust', () => {
    const presentation = presentStatus({ ...ready, trusted: false });
    assert.equal(presentation.text, '$(shield) DS4 untrusted');
    assert.equal(presentation.severity, 'warning');
    assert.equal(presentation.command, MANAGE_TRUST_COMMAND);
  });

  it('warns when the server ignored settings', () => {
    const presentation = presentStatus({
      ...ready,
      health: healthResult({ status: 'warning', configWarnings: ["setting 'retrieval.maxResults' = 0 was ignored"] }),
    });
    assert.equal(presentation.text, '$(warning) DS4 ready');
    assert.equal(presentation.severity, 'warning');
    assert.match(presentation.tooltip, /1 setting ignored/);
    const stale = presentStatus({
      ...ready,
      health: healthResult({ status: 'warning', warnings: ['2 project snippet(s) sent to the model have changed since'] }),
    });
    assert.match(stale.tooltip, /2 project snippet\(s\) sent to the model have changed since/);
  });

  it('shows an error with its message and a way to the output', () => {
    const presentation = presentStatus({ phase: { kind: 'error', message: "cannot start 'ds4-lsp': not found" }, trusted: true });
    assert.equal(presentation.text, '$(error) DS4 error');
    assert.equal(presentation.severity, 'error');
    assert.match(presentation.tooltip, /cannot start 'ds4-lsp': not found/);
    assert.equal(presentation.command, COMMANDS.showOutput);
  });

  it('offers a restart when stopped, and spins while starting', () => {
    assert.equal(presentStatus({ phase: { kind: 'stopped' }, trusted: true }).command, COMMANDS.restart);
    assert.equal(presentStatus({ phase: { kind: 'starting' }, trusted: true }).text, '$(sync~spin) DS4 starting');
  });

  it('formats integers with thousands separators on every machine', () => {
    assert.equal(formatInt(0), '0');
    assert.equal(formatInt(999), '999');
    assert.equal(formatInt(1018), '1,018');
    assert.equal(formatInt(1234567.6), '1,234,568');
    assert.equal(formatInt(-45000), '-45,000');
  });
});

describe('server stderr', () => {
  it('routes log lines by their level and anything else as an error', () => {
    assert.equal(stderrLineLevel('2026-11-30 10:44:18,123 INFO ds4_lsp.server: ds4/plan served'), 'info');
    assert.equal(stderrLineLevel('2026-11-30 10:44:18,123 WARNING ds4_lsp.server: x'), 'warn');
    assert.equal(stderrLineLevel('2026-11-30 10:44:18,123 DEBUG ds4_lsp: x'), 'debug');
    assert.equal(stderrLineLevel('2026-11-30 10:44:18,123 CRITICAL ds4_lsp: x'), 'error');
    assert.equal(stderrLineLevel('Traceback (most recent call last):'), 'error');
    assert.equal(stderrLineLevel('ds4-lsp: error: unrecognized arguments: --stdio'), 'error');
  });
});
