import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  checkIndexUpdated,
  checkManifest,
  checkPlanResult,
  checkRetrieveResult,
  isHealthResult,
  isManifest,
  isPlanResult,
  isRebuildIndexResult,
  isRetrieveResult,
} from '../../src/protocol';
import { commitHit, healthResult, item, manifest, planResult, retrieveResult } from '../fixtures';

describe('wire type guards', () => {
  it('accept the documented shapes', () => {
    assert.ok(isPlanResult(planResult()));
    assert.ok(isRetrieveResult(retrieveResult()));
    assert.ok(isManifest(manifest()));
    assert.ok(isHealthResult(healthResult()));
    assert.ok(
      isRebuildIndexResult({ sessions: 1, entries: 1018, failed: [], durationMs: 29.5, results: [{ outcome: 'rebuild' }] }),
    );
  });

  it('accept optional parts absent and fields a newer server adds', () => {
    const plan: Record<string, unknown> = { ...planResult(), futureField: { x: 1 } };
    delete plan.session;
    assert.ok(isPlanResult(plan));
    assert.ok(isPlanResult(planResult({ mode: 'fallback', fallbackReason: 'ds4 is disabled' })));
    const summary: Record<string, unknown> = { ...manifest(), itemCounts: { included: 1, excluded: 2 } };
    delete summary.included;
    delete summary.excluded;
    assert.ok(isManifest(summary));
  });

  it('name the fields that break the contract', () => {
    assert.deepEqual(checkPlanResult({ ...planResult(), mode: 'auto', estimatedTokens: 1.5 }), [
      'result.mode',
      'result.estimatedTokens',
    ]);
    assert.deepEqual(checkManifest({ ...manifest(), included: [item({ tokens: Number.NaN })] }), ['result.included']);
    assert.deepEqual(checkRetrieveResult({ ...retrieveResult(), history: [{ entryKey: 'k' }] }), ['result.history']);
    assert.deepEqual(checkPlanResult(null), ['result']);
    assert.deepEqual(checkPlanResult([]), ['result']);
  });

  it('accept a bulk excluded item and check its count and last source id', () => {
    const bulk = item({ kind: 'background', sourceId: 'v1-1', lastSourceId: 'v1-900', count: 900, groupId: null });
    assert.ok(isManifest(manifest({ excluded: [bulk] })));
    assert.deepEqual(checkManifest({ ...manifest(), excluded: [{ ...bulk, count: '900' }] }), ['result.excluded']);
    assert.deepEqual(checkManifest({ ...manifest(), excluded: [{ ...bulk, lastSourceId: 900 }] }), ['result.excluded']);
  });

  it('check the git scope and the relevance of ds4/retrieve and manifests', () => {
    const relevance = {
      history: { status: 'ok', sent: 0, belowFloor: 2, floor: 0.35, best: 0.21, why: 'no candidate reached the relevance floor (best 0.210 < 0.350)' },
      git: { status: 'ok', sent: 1, belowFloor: 0, floor: null, best: null, why: null },
    };
    assert.ok(isRetrieveResult(retrieveResult({ git: [commitHit()], gitStatus: 'ok', relevance })));
    assert.ok(isRetrieveResult(retrieveResult({ git: [commitHit({ withheld: 'AWS access key id', subject: '' })], gitStatus: 'ok' })));
    assert.ok(isManifest(manifest({ relevance })));
    assert.deepEqual(
      checkRetrieveResult({ ...retrieveResult(), git: [{ ...commitHit(), files: 'a.py' }], gitStatus: 'maybe' }),
      ['result.git', 'result.gitStatus'],
    );
    assert.deepEqual(
      checkRetrieveResult({ ...retrieveResult(), relevance: { history: { ...relevance.history, why: 3 } } }),
      ['result.relevance'],
    );
    assert.deepEqual(checkManifest({ ...manifest(), relevance: [] }), ['result.relevance']);
  });

  it('check ds4/indexUpdated notifications', () => {
    const params = {
      reason: 'edit', only: ['src/shipping.py'], status: 'ready', projectPath: '/home/me/project',
      filesIndexed: 1, filesUnchanged: 0, filesDeleted: 0, filesSkipped: 0, snippets: 1,
      durationMs: 3.1, truncated: false, warnings: [],
    };
    assert.deepEqual(checkIndexUpdated(params), []);
    assert.deepEqual(checkIndexUpdated({ ...params, snippets: '1', truncated: undefined }), ['params.snippets', 'params.truncated']);
  });

  it('are strict about JSON types like the server is', () => {
    assert.ok(!isHealthResult(healthResult({ sessions: '1' as unknown as number })));
    assert.ok(!isHealthResult({ ...healthResult(), server: { ...healthResult().server, trusted: 'yes' } }));
    assert.ok(!isManifest({ ...manifest(), actualTokens: true }));
    assert.ok(!isRetrieveResult(retrieveResult({ status: 'maybe' as 'ok' })));
  });
});
