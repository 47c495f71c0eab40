import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { renderManifestHtml } from '../../src/manifestView';
import {
  continuationFailedProblems,
  isHealthResult,
  isManifest,
  isPlanResult,
  type PlanResult,
  usageParamsProblems,
} from '../../src/protocol';
import { type Ds4Connection, Ds4InvalidParamsError, Ds4Requests } from '../../src/requests';
import { calibrationHealthLines, calibrationHealthSummary, hasCriticalCalibration } from '../../src/usageView';
import { calibration, healthCalibration, healthResult, manifest, manifestUsage, planResult, usageParams } from '../fixtures';

const NONCE = 'abcdefghijklmnop0123456789';
const HOSTILE = `<img src=x onerror="alert(1)">'&</style><script>alert(2)</script>`;

function body(html: string): string {
  return html.slice(html.indexOf('<body>'));
}

/** The manifest after the Anthropic response of `usageParams()` was reported. */
function reported() {
  return manifest({
    actualTokens: 39100,
    estimatorVersion: 'chars-v2',
    usage: manifestUsage(),
    modelAwareness: { estimatorVersion: 'chars-v2', calibration: calibration(), modelSwitch: null },
    continuation: null,
  });
}

/** A connection that records notifications. */
function recorder(): { connection: Ds4Connection; notified: { method: string; params: unknown }[] } {
  const notified: { method: string; params: unknown }[] = [];
  return {
    notified,
    connection: {
      sendRequest: () => Promise.reject(new Error('no requests expected')),
      sendNotification(method, params) {
        notified.push({ method, params });
        return Promise.resolve();
      },
      onProgress: () => ({ dispose: () => undefined }),
    },
  };
}

describe('manifest view: model awareness', () => {
  it('says the provider has not reported usage while actualTokens is null', () => {
    const html = body(
      renderManifestHtml(
        manifest({ usage: null, modelAwareness: { estimatorVersion: 'chars-v2', calibration: null, modelSwitch: null } }),
        { nonce: NONCE },
      ),
    );
    assert.match(html, /<div class="label">Actual input<\/div><div class="value">not reported<\/div><div class="detail">the provider has not reported usage<\/div>/);
    assert.match(html, /<h2>Model awareness/);
    assert.match(html, /the provider has not reported usage for this plan/);
    // null: the server did not look calibration up (the plan's provider is unknown).
    assert.match(html, /Calibration: not looked up \(the plan's provider is unknown\)/);
    assert.doesNotMatch(html, /none for this model/);
    // Looked up, nothing reported yet: a calibration with samples 0 (and the server's minimum).
    const none = body(
      renderManifestHtml(
        manifest({
          usage: null,
          modelAwareness: {
            estimatorVersion: 'chars-v2',
            calibration: calibration({ ratio: 1, calibrated: false, samples: 0, accepted: 0, outliers: 0, minimumSamples: 3, warnings: [] }),
            modelSwitch: null,
          },
        }),
        { nonce: NONCE },
      ),
    );
    assert.match(none, /ratio 1\.000 · not calibrated: no usage reported yet \(needs 3 accepted samples\)/);
    assert.doesNotMatch(none, /not looked up/);
    // A server before calibration (no `calibration` key): nothing said about calibration.
    const older = body(renderManifestHtml(manifest({ usage: null, modelAwareness: { estimatorVersion: 'chars-v2' } }), { nonce: NONCE }));
    assert.match(older, /<h2>Model awareness/);
    assert.doesNotMatch(older, /<h3>Calibration|Calibration: not looked up/);
  });

  it('leaves the section out for a server without model awareness', () => {
    const html = body(renderManifestHtml(manifest(), { nonce: NONCE }));
    assert.match(html, /the provider has not reported usage/);
    assert.doesNotMatch(html, /Model awareness/);
  });

  it('shows actual against estimated input tokens and the cache share of a reported call', () => {
    const html = body(renderManifestHtml(reported(), { nonce: NONCE }));
    // 39,100 reported (4,000 + 35,100 cache reads) against the 36,349 estimate: +7.6%.
    assert.match(
      html,
      /<div class="value">39,100 tokens<\/div><div class="detail">\+7\.6% vs the 36,349-token estimate; cache share 89\.8%; reported by anthropic\/claude-sonnet-4-5<\/div>/,
    );
    assert.match(html, /<tr><td>Actual input<\/td><td class="num">39,100<\/td><td class="muted">\+7\.6% vs the 36,349-token estimate<\/td><\/tr>/);
    assert.match(html, /<tr><td>Estimated input<\/td><td class="num">36,349<\/td>/);
    assert.match(html, /<tr><td>Cache read<\/td><td class="num">35,100<\/td>/);
    assert.match(html, /<tr><td>Cache write<\/td><td class="num">0<\/td>/);
    assert.match(html, /<tr><td>Cache share<\/td><td class="num">89\.8%<\/td>/);
    assert.match(html, /<tr><td>Output<\/td><td class="num">412<\/td>/);
    assert.match(html, /<tr><td>Stop reason<\/td><td class="num">stop<\/td>/);
    assert.match(html, /reported by <code>anthropic\/claude-sonnet-4-5<\/code> at 2026-11-30T10:27:19\.204Z/);
  });

  it('computes the cache share when the server gives none, and shows - without input', () => {
    const computed = body(
      renderManifestHtml(manifest({ actualTokens: 100, usage: manifestUsage({ input: 50, cacheRead: 25, cacheWrite: 25, cacheShare: null }) }), {
        nonce: NONCE,
      }),
    );
    assert.match(computed, /<tr><td>Cache share<\/td><td class="num">25\.0%<\/td>/);
    const empty = body(
      renderManifestHtml(manifest({ actualTokens: 0, usage: manifestUsage({ input: 0, cacheRead: 0, cacheWrite: 0, cacheShare: null }) }), {
        nonce: NONCE,
      }),
    );
    assert.match(empty, /<tr><td>Cache share<\/td><td class="num">-<\/td>/);
  });

  it('shows the calibration: ratio, samples, and each warning with its severity', () => {
    const html = body(renderManifestHtml(reported(), { nonce: NONCE }));
    assert.match(html, /Calibration <span class="sub"><code>anthropic\/claude-sonnet-4-5<\/code>, estimator <code>chars-v2<\/code>/);
    assert.match(html, /ratio 1\.310 · calibrated from 5 accepted samples \(6 in the window, 1 outlier\)/);
    assert.match(
      html,
      /<li class="sev-warning"><strong>warning<\/strong> <code>persistent-underestimate<\/code>: the estimate is 31% below/,
    );
    const critical = manifest({
      modelAwareness: {
        estimatorVersion: 'chars-v2',
        calibration: calibration({
          ratio: 0.6,
          warnings: [{ code: 'persistent-overestimate', severity: 'critical', message: 'ratio 0.600 <= 0.625' }],
        }),
        modelSwitch: null,
      },
    });
    assert.match(body(renderManifestHtml(critical, { nonce: NONCE })), /<li class="sev-critical"><strong>critical<\/strong> <code>persistent-overestimate<\/code>/);
  });

  it('says how far an uncalibrated model is from calibration', () => {
    const counted = manifest({
      modelAwareness: {
        estimatorVersion: 'chars-v2',
        calibration: calibration({ ratio: 1, calibrated: false, samples: 2, accepted: 1, outliers: 1, warnings: [] }),
        modelSwitch: null,
      },
    });
    assert.match(body(renderManifestHtml(counted, { nonce: NONCE })), /ratio 1\.000 · not calibrated: 1 of 2 samples accepted/);
    const withMinimum = manifest({
      modelAwareness: {
        estimatorVersion: 'chars-v2',
        calibration: calibration({ ratio: 1, calibrated: false, samples: 2, accepted: 2, outliers: 0, minimumSamples: 3, warnings: [] }),
        modelSwitch: null,
      },
    });
    assert.match(body(renderManifestHtml(withMinimum, { nonce: NONCE })), /ratio 1\.000 · not calibrated: 2 of 3 accepted samples/);
  });

  it('shows a model switch', () => {
    const html = body(
      renderManifestHtml(
        manifest({
          provider: 'openai',
          model: 'gpt-5',
          modelAwareness: {
            estimatorVersion: 'chars-v2',
            calibration: calibration({ provider: 'openai', model: 'gpt-5', calibrated: false, warnings: [] }),
            modelSwitch: { from: 'anthropic/claude-sonnet-4-5', to: 'openai/gpt-5' },
          },
        }),
        { nonce: NONCE },
      ),
    );
    assert.match(html, /<strong>Model switch:<\/strong> switched from <code>anthropic\/claude-sonnet-4-5<\/code> to <code>openai\/gpt-5<\/code>/);
  });

  it('shows the continuation decision: delta with its start, full with its reason', () => {
    const delta = body(
      renderManifestHtml(
        manifest({ continuation: { strategy: 'openai-previous-response-v1', mode: 'delta', deltaStart: 12, reason: null } }),
        { nonce: NONCE },
      ),
    );
    assert.match(delta, /<strong>Continuation<\/strong> <code>openai-previous-response-v1<\/code>: <strong>delta<\/strong>: send the messages from index 12 on/);
    const full = body(
      renderManifestHtml(
        manifest({ continuation: { strategy: 'openai-previous-response-v1', mode: 'full', deltaStart: 0, reason: 'state-expired' } }),
        { nonce: NONCE },
      ),
    );
    assert.match(full, /<strong>full<\/strong>: send the whole request \(reason: <code>state-expired<\/code>\)/);
  });

  it('escapes every model-awareness string and survives mistyped fields', () => {
    const hostile = manifest({
      actualTokens: 10,
      usage: { ...manifestUsage({ provider: HOSTILE, model: HOSTILE, stopReason: HOSTILE, reportedAt: HOSTILE }), output: 'x' as unknown as number },
      modelAwareness: {
        estimatorVersion: HOSTILE,
        calibration: calibration({ provider: HOSTILE, warnings: [{ code: HOSTILE, severity: 'critical', message: HOSTILE }] }),
        modelSwitch: { from: HOSTILE, to: HOSTILE },
      },
      continuation: { strategy: HOSTILE, mode: 'full', deltaStart: 0, reason: HOSTILE },
    });
    const html = renderManifestHtml(hostile, { nonce: NONCE });
    assert.doesNotMatch(html, /<script/i);
    assert.doesNotMatch(html, /<img/i);
    assert.equal(html.match(/<\/style>/g)?.length, 1);
    assert.match(html, /<tr><td>Output<\/td><td class="num">-<\/td>/);
  });
});

describe('wire guards: model awareness', () => {
  it('accept manifests, plans and health with the new fields, and refuse non-objects', () => {
    assert.ok(isManifest(reported()));
    assert.ok(isManifest(manifest({ usage: null, modelAwareness: null, continuation: null })));
    assert.ok(!isManifest({ ...manifest(), usage: 5 }));
    assert.ok(isPlanResult(planResult({ continuation: { strategy: 's', mode: 'full', deltaStart: 0, reason: 'cold-start' } })));
    assert.ok(isHealthResult(healthResult({ calibration: [healthCalibration()] })));
    // The budget's `autoTuned` is the one boolean among numbers.
    assert.ok(isPlanResult(planResult({ budget: { ...planResult().budget, calibrationRatio: 1.31, autoTuned: true } })));
    assert.ok(!isPlanResult(planResult({ budget: { ...planResult().budget, autoTuned: 'yes' } as unknown as PlanResult['budget'] })));
    assert.ok(!isPlanResult(planResult({ budget: { ...planResult().budget, softLimit: true } as unknown as PlanResult['budget'] })));
    const tuned = manifest({ budgets: { ...manifest().budgets, calibrationRatio: 1.31, autoTuned: true } });
    assert.ok(isManifest(tuned));
    const html = body(renderManifestHtml(tuned, { nonce: NONCE }));
    assert.match(html, /<tr><td>Calibration ratio<\/td><td class="num">1\.31<\/td>/);
    assert.match(html, /<tr><td>Auto-tuned \(autoTune raised the target\)<\/td><td class="num">yes<\/td>/);
    assert.ok(!isHealthResult({ ...healthResult(), calibration: {} }));
  });
});

describe('ds4/usage params', () => {
  it('accept Pi’s Usage as is, and the optional continuation fields', () => {
    assert.deepEqual(usageParamsProblems(usageParams()), []);
    assert.deepEqual(usageParamsProblems({ manifestId: 'm', provider: 'p', model: 'x', usage: { input: 0 } }), []);
    assert.deepEqual(
      usageParamsProblems(usageParams({ outputItems: [{ role: 'assistant', content: [] }], outputItemHashes: ['ab'], hasResponseId: false })),
      [],
    );
  });

  it('name each bad field and say what it must be', () => {
    assert.deepEqual(usageParamsProblems(null), ['params must be an object, got null']);
    assert.deepEqual(usageParamsProblems({}), [
      'params.manifestId must be a non-empty string, got nothing',
      'params.provider must be a non-empty string of at most 256 characters, got nothing',
      'params.model must be a non-empty string of at most 256 characters, got nothing',
      'params.usage must be an object with integer token counts ({input, output?, cacheRead?, cacheWrite?}), got nothing',
    ]);
    const bad = { ...usageParams(), usage: { input: -1, output: 1.5, cacheRead: '3', cacheWrite: null } };
    assert.deepEqual(usageParamsProblems(bad), [
      'params.usage.input must be an integer >= 0, got -1',
      'params.usage.output must be an integer >= 0 when given, got 1.5',
      'params.usage.cacheRead must be an integer >= 0 when given, got "3"',
      'params.usage.cacheWrite must be an integer >= 0 when given, got null',
    ]);
    assert.deepEqual(usageParamsProblems({ ...usageParams(), manifestId: ' ', stopReason: 3, outputItems: ['x'], outputItemHashes: [1], hasResponseId: 'no' }), [
      'params.manifestId must be a non-empty string, got " "',
      "params.stopReason must be Pi's stop reason (1..64 characters) when given, got 3",
      'params.outputItems must be a list of objects when given, got ["x"]',
      'params.outputItemHashes must be a list of strings when given, got [1]',
      'params.hasResponseId must be true or false when given, got "no"',
    ]);
    // The server's bounds: provider and model at most 256 characters, stopReason 1..64.
    assert.deepEqual(usageParamsProblems({ ...usageParams(), model: 'm'.repeat(257), stopReason: '' }), [
      `params.model must be a non-empty string of at most 256 characters, got "${'m'.repeat(38)}…`,
      "params.stopReason must be Pi's stop reason (1..64 characters) when given, got \"\"",
    ]);
    assert.deepEqual(usageParamsProblems({ ...usageParams(), model: 'm'.repeat(256), stopReason: 's'.repeat(64) }), []);
    assert.deepEqual(usageParamsProblems({ ...usageParams(), usage: { input: 2 ** 53 } }), [
      'params.usage.input must be an integer >= 0, got 9007199254740992',
    ]);
  });

  it('are checked before sending: bad params throw naming the field and send nothing', async () => {
    const { connection, notified } = recorder();
    const requests = new Ds4Requests(connection);
    await assert.rejects(
      requests.usage({ ...usageParams(), usage: { input: -5 } }),
      (error: unknown) => {
        assert.ok(error instanceof Ds4InvalidParamsError);
        assert.equal(error.method, 'ds4/usage');
        assert.equal(error.message, 'ds4/usage: params.usage.input must be an integer >= 0, got -5');
        return true;
      },
    );
    assert.deepEqual(notified, []);
    const params = usageParams();
    await requests.usage(params);
    assert.deepEqual(notified, [{ method: 'ds4/usage', params }]);
  });
});

describe('ds4/continuationFailed params', () => {
  it('need the session file, and name each bad field; nothing is sent then', async () => {
    assert.deepEqual(continuationFailedProblems({ session: { file: '/s.jsonl' }, provider: 'openai', model: 'gpt-5', reason: 'previous_response_not_found' }), []);
    // `reason` may be the provider's whole error object: the server never reads it.
    assert.deepEqual(continuationFailedProblems({ session: { file: '/s.jsonl' }, reason: { code: 'previous_response_not_found', status: 400 } }), []);
    assert.deepEqual(continuationFailedProblems({ session: { file: '' }, provider: 5 }), [
      'params.session.file must be a non-empty string (the plan\'s session file), got ""',
      'params.provider must be a string when given, got 5',
    ]);
    assert.deepEqual(continuationFailedProblems({}), ["params.session.file must be a non-empty string (the plan's session file), got nothing"]);
    const { connection, notified } = recorder();
    const requests = new Ds4Requests(connection);
    await assert.rejects(requests.continuationFailed({ session: { file: '' } }), Ds4InvalidParamsError);
    assert.deepEqual(notified, []);
    await requests.continuationFailed({ session: { file: '/s.jsonl' }, provider: 'openai' });
    assert.deepEqual(notified, [{ method: 'ds4/continuationFailed', params: { session: { file: '/s.jsonl' }, provider: 'openai' } }]);
  });
});

describe('DS4: Health: calibration', () => {
  it('sums up each profile’s calibration and cache share', () => {
    assert.equal(calibrationHealthSummary(undefined), undefined);
    assert.equal(calibrationHealthSummary([]), 'calibration: no usage reported yet');
    assert.equal(
      calibrationHealthSummary([
        healthCalibration(),
        healthCalibration({ provider: 'openai', model: 'gpt-5', ratio: 1, calibrated: false, samples: 1, accepted: 1, outliers: 0, cacheShare: null, warnings: [] }),
      ]),
      'calibration: anthropic/claude-sonnet-4-5 ratio 1.310, calibrated (5 samples), cache share 83.5%, 1 warning; ' +
        'openai/gpt-5 ratio 1.000, not calibrated (1 of 1 samples accepted), cache share -',
    );
    // The server's minimum (`minimumSamples`, on every calibration it sends).
    assert.equal(
      calibrationHealthSummary([healthCalibration({ ratio: 1, calibrated: false, samples: 2, accepted: 1, minimumSamples: 3, warnings: [] })]),
      'calibration: anthropic/claude-sonnet-4-5 ratio 1.000, 1 of 3 accepted samples, cache share 83.5%',
    );
  });

  it('lists each warning with its severity, and flags a critical one', () => {
    const lines = calibrationHealthLines([healthCalibration()]);
    assert.equal(
      lines[0],
      'anthropic/claude-sonnet-4-5 (chars-v2): ratio 1.310 · calibrated from 5 accepted samples (6 in the window, 1 outlier); cache share 83.5%; last report 2026-11-30T10:27:19.204Z',
    );
    assert.match(lines[1] ?? '', /^ {2}warning persistent-underestimate: the estimate is 31% below/);
    assert.equal(hasCriticalCalibration([healthCalibration()]), false);
    assert.equal(
      hasCriticalCalibration([healthCalibration({ warnings: [{ code: 'persistent-underestimate', severity: 'critical', message: 'm' }] })]),
      true,
    );
  });
});
