import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { renderManifestHtml } from '../../src/manifestView';
import {
  defaultPrivacyModel,
  privacyAnswerSummary,
  privacyHealthSummary,
  privacyExclusions,
  privacyModelProblem,
  privacyPlanNote,
  renderPrivacy,
  renderPrivacyAnswer,
} from '../../src/privacyView';
import { checkManifest, checkPlanResult, checkPrivacyAnswer, checkRetrieveResult, PRIVACY_EXCLUSION_REASON } from '../../src/protocol';
import { item, manifest, planResult, privacyAnswer, privacySummary, retrieveResult } from '../fixtures';

const NONCE = 'abcdefghijklmnop0123456789';
const HOSTILE = `<img src=x onerror="alert(1)">'&</style><script>alert(2)</script>`;

/** A manifest of a plan for openai that dropped one local-only history entry whole. */
function privateManifest(overrides: Parameters<typeof manifest>[0] = {}) {
  const base = manifest();
  return manifest({
    privacy: privacySummary(),
    excluded: [
      ...(base.excluded ?? []),
      item({ kind: 'history', sourceId: 'v1-24', groupId: null, classification: 'local-only', tokens: 412, score: 9.5, reason: PRIVACY_EXCLUSION_REASON }),
    ],
    ...overrides,
  });
}

function section(html: string): string {
  const start = html.indexOf('<section class="privacy">');
  assert.ok(start >= 0, 'the page has a privacy section');
  return html.slice(start, html.indexOf('</section>', start));
}

describe('manifest privacy section', () => {
  it('shows the destination, the counters by level, the secrets redacted by kind', () => {
    const html = section(renderManifestHtml(privateManifest(), { nonce: NONCE }));
    assert.match(html, /destination <code>openai<\/code> · <strong>remote<\/strong> · may see normal, internal · secrets redacted/);
    // Level rows in the policy's order: classified, withheld, excluded.
    assert.match(html, /<tr><td>internal<\/td><td class="num">1<\/td><td class="num">0<\/td><td class="num">0<\/td><\/tr>/);
    assert.match(html, /<tr><td>local-only<\/td><td class="num">2<\/td><td class="num">2<\/td><td class="num">1<\/td><\/tr>/);
    assert.ok(html.indexOf('<td>internal</td>') < html.indexOf('<td>local-only</td>'));
    assert.match(html, /3 secrets redacted: bearer token 2, OpenAI key 1\./);
  });

  it('lists the items excluded due to privacy policy by kind, source, level and tokens only', () => {
    const page = renderManifestHtml(privateManifest(), { nonce: NONCE });
    const html = section(page);
    assert.match(html, /Excluded due to privacy policy <span class="sub">1 items<\/span>/);
    assert.match(html, /<tr><td>history<\/td><td><code>v1-24<\/code><\/td><td>local-only<\/td><td class="num">412<\/td><\/tr>/);
    // Only the privacy exclusions: the other excluded items stay in the Excluded section.
    assert.doesNotMatch(html, /oversized turn/);
    assert.equal(privacyExclusions(privateManifest()).length, 1);
    // The Excluded section groups them under the reason too.
    assert.match(page, /<tr><td>excluded due to privacy policy<\/td><td class="num">1<\/td><td class="num">412<\/td><\/tr>/);
  });

  it('renders no section for a server without privacy, and the rest of the page as before', () => {
    const html = renderManifestHtml(manifest(), { nonce: NONCE });
    assert.doesNotMatch(html, /class="privacy"/);
    assert.equal(renderPrivacy(manifest()), '');
    assert.equal(renderPrivacy(manifest({ privacy: null })), '', 'privacy: null (none recorded)');
    assert.deepEqual(checkManifest(manifest({ privacy: null })), []);
    assert.match(html, /36,349 tokens/);
  });

  it('says when the policy is off, nothing was held back, no destination was named, or the list is not loaded', () => {
    assert.match(renderPrivacy(manifest({ privacy: { enabled: false } })), /The privacy policy is off/);
    const quiet = renderPrivacy(
      manifest({ privacy: privacySummary({ classified: {}, withheld: {}, excluded: {}, redacted: 0, redactedByKind: {} }) }),
    );
    assert.match(quiet, /Nothing was classified above normal, withheld or dropped\./);
    assert.match(quiet, /No secret was redacted\./);
    assert.match(renderPrivacy(manifest({ privacy: privacySummary({ destination: null }) })), /no destination named/);
    const unknown = privacySummary({ destination: { provider: null, kind: 'remote', allowed: ['normal'], redactSecrets: true } });
    assert.match(renderPrivacy(manifest({ privacy: unknown })), /destination unknown \(treated as remote\)/);
    const local = privacySummary({
      destination: { provider: 'ollama', kind: 'local', allowed: ['normal', 'internal', 'sensitive', 'local-only'], redactSecrets: false },
    });
    assert.match(renderPrivacy(manifest({ privacy: local })), /<strong>local<\/strong> · may see normal, internal, sensitive, local-only · secrets not redacted/);
    // A sparse object (only `enabled`) still renders.
    assert.match(renderPrivacy(manifest({ privacy: { enabled: true } })), /no destination named/);
    const summaryView = manifest({ privacy: privacySummary() });
    delete summaryView.excluded;
    assert.match(renderPrivacy(summaryView), /not loaded \(summary view\)/);
  });

  it('escapes every server-provided value in the section', () => {
    const hostile = privateManifest({
      privacy: privacySummary({
        destination: { provider: HOSTILE, kind: 'remote', allowed: [HOSTILE], redactSecrets: true },
        classified: { [HOSTILE]: 1 },
        redactedByKind: { [HOSTILE]: 1 },
      }),
      excluded: [item({ kind: HOSTILE, sourceId: HOSTILE, classification: HOSTILE, reason: PRIVACY_EXCLUSION_REASON })],
    });
    const html = renderManifestHtml(hostile, { nonce: NONCE });
    assert.doesNotMatch(html, /<script/i);
    assert.doesNotMatch(html, /<img/i);
    assert.equal(html.match(/<\/style>/g)?.length, 1);
    const part = section(html);
    assert.ok(part.split('&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&#39;&amp;').length >= 6, part);
  });

  it('says in one sentence what a plan held back', () => {
    assert.equal(privacyPlanNote(privacySummary()), 'Privacy (openai, remote): 2 withheld, 1 excluded, 3 secrets redacted.');
    assert.equal(privacyPlanNote(privacySummary({ withheld: {}, excluded: {}, redacted: 1 })), 'Privacy (openai, remote): 1 secret redacted.');
    assert.equal(privacyPlanNote(privacySummary({ withheld: {}, excluded: {}, redacted: 0 })), undefined);
    assert.equal(privacyPlanNote({ enabled: false }), undefined);
    assert.equal(privacyPlanNote(undefined), undefined);
    assert.equal(privacyPlanNote(null), undefined);
  });

  it('accepts manifests, plans and retrieve results with privacy, and refuses a malformed one', () => {
    assert.deepEqual(checkManifest(privateManifest()), []);
    assert.deepEqual(checkManifest(manifest({ privacy: { enabled: true } })), []);
    assert.deepEqual(checkPlanResult(planResult({ privacy: privacySummary() })), []);
    assert.deepEqual(checkRetrieveResult(retrieveResult({ privacy: privacySummary({ destination: null }) })), []);
    const bad = { ...privateManifest(), privacy: { enabled: 'yes', redacted: 1.5 } };
    assert.deepEqual(checkManifest(bad), ['result.privacy']);
  });
});

describe('DS4: Privacy Policy', () => {
  it('defaults to the last plan’s model and asks for provider/model', () => {
    assert.equal(defaultPrivacyModel(planResult()), 'anthropic/claude-sonnet-4-5');
    assert.equal(defaultPrivacyModel(undefined), '');
    assert.equal(privacyModelProblem(' openai/gpt-4o '), undefined);
    assert.equal(privacyModelProblem('ollama/qwen3:8b'), undefined);
    assert.equal(privacyModelProblem('ollama'), undefined, 'a bare provider: the policy decides by provider');
    for (const bad of ['', '/gpt-4o', 'openai/', '  ', 'open ai/gpt']) {
      assert.match(privacyModelProblem(bad) ?? '', /provider\/model/, bad);
    }
  });

  it('says the active policy of ds4.health in a few words', () => {
    assert.equal(privacyHealthSummary(undefined), undefined);
    assert.equal(privacyHealthSummary({ enabled: false }), 'privacy off');
    assert.equal(
      privacyHealthSummary({
        enabled: true,
        defaultClassification: 'normal',
        localProviders: ['faux', 'ollama'],
        remoteDefaultAllowed: ['normal', 'internal'],
        remoteProviders: {},
        redactSecrets: true,
      }),
      'privacy on (local: faux, ollama; remote may see: normal, internal; secrets redacted)',
    );
    assert.equal(privacyHealthSummary({ enabled: true, redactSecrets: false, remoteDefaultAllowed: [] }), 'privacy on (local: default; remote may see: none; secrets not redacted)');
  });

  it('summarizes the answer in one line and shows the explanation', () => {
    const answer = privacyAnswer();
    assert.deepEqual(checkPrivacyAnswer(answer), []);
    assert.deepEqual(checkPrivacyAnswer({ ...answer, kind: 'elsewhere', allowed: 'normal' }), ['result.kind', 'result.allowed']);
    assert.equal(
      privacyAnswerSummary(answer, 'openai/gpt-4o'),
      'DS4 privacy: openai/gpt-4o is remote; may see normal, internal; withheld: sensitive, local-only; secrets redacted.',
    );
    assert.match(privacyAnswerSummary({ ...answer, enabled: false }, 'openai/gpt-4o'), /the policy is off/);
    const text = renderPrivacyAnswer(answer, 'openai/gpt-4o');
    assert.match(text, /^# DS4 privacy policy for openai\/gpt-4o\n/);
    assert.match(text, /\| Class \| remote \|\n\| Policy \| on \|\n\| May see \| normal, internal \|\n\| Withheld \| sensitive, local-only \|\n\| Secrets \| redacted \|\n\n/);
    assert.match(renderPrivacyAnswer(privacyAnswer({ rule: 'privacy.remoteDefaultAllowed' }), 'openai'), /\| Decided by \| privacy\.remoteDefaultAllowed \|/);
    assert.ok(text.includes(answer.explanation));
    const local = renderPrivacyAnswer(
      privacyAnswer({ provider: 'ollama', kind: 'local', allowed: ['normal', 'internal', 'sensitive', 'local-only'], withheld: [], redactSecrets: false }),
      'ollama/qwen3',
    );
    assert.match(local, /\| Withheld \| none \|/);
    assert.match(local, /\| Secrets \| not redacted \|/);
    // A table cell cannot be broken by a | in a value.
    assert.match(renderPrivacyAnswer(privacyAnswer({ provider: 'a|b' }), 'a|b/c'), /\| Provider \| a\\\|b \|/);
  });
});
