/** Wire objects shaped like docs/protocol.md's examples, for unit tests. */

import type { HealthResult, Manifest, ManifestItem, PlanResult, RetrieveResult } from '../src/protocol';

export function item(overrides: Partial<ManifestItem> = {}): ManifestItem {
  return {
    kind: 'recent',
    sourceId: 'v1-780',
    groupId: 'group:675-682',
    classification: 'normal',
    tokens: 21,
    score: 100.735991,
    reason: 'recent tail: within the tail, target and hard limits',
    ...overrides,
  };
}

export function manifest(overrides: Partial<Manifest> = {}): Manifest {
  return {
    id: 'm-01a22bfe7ae5956d3018a646656d',
    sessionId: 'd703a1a9-1b7b-4fb1-b512-c9738b1fe617',
    branchLeafId: 'v1-1018',
    createdAt: '2026-11-30T10:27:07.621Z',
    provider: 'anthropic',
    model: 'claude-sonnet-4-5',
    modelSource: 'request',
    contextWindow: 200000,
    outputReserve: 32768,
    hardInputLimit: 163232,
    targetInputTokens: 140000,
    estimatedTokens: 36349,
    actualTokens: null,
    fixedTokens: 4200,
    promptHash: 'b30ce00419ee26880aeed3e7a9a0cae044f17dbbe7409699c51d76f181d0f052',
    policyVersion: 'ds4-context-policy-1',
    plannerVersion: 'ds4-lsp-planner-1',
    estimatorVersion: 'chars-v1',
    budgets: {
      contextWindow: 200000,
      outputReserve: 32768,
      safetyMargin: 4000,
      hardInputLimit: 163232,
      softLimit: 160000,
      targetInputTokens: 140000,
      activeInputBudget: 140000,
      recentTailTokens: 32000,
      maxRetrievedHistoryTokens: 16000,
      maxProjectTokens: 20000,
      maxSummaryTokens: 12000,
      maxPinnedTokens: 16000,
      maxMemoryTokens: 8000,
      calibrationRatio: 1.0,
    },
    included: [
      item(),
      item({ sourceId: 'v1-781', tokens: 62 }),
      item({ kind: 'history', sourceId: 'v1-4', groupId: null, tokens: 300, score: 92.944, reason: 'retrieved: FTS: selector, files' }),
      item({ kind: 'current', sourceId: 'current', groupId: null, classification: null, tokens: 27, score: null, reason: 'current turn' }),
    ],
    excluded: [
      item({ kind: 'background', sourceId: 'v1-1', tokens: 15, reason: 'older turn outside the recent tail; no retrieval evidence' }),
      item({ kind: 'background', sourceId: 'v1-2', tokens: 11, reason: 'older turn outside the recent tail; no retrieval evidence' }),
      item({ kind: 'background', sourceId: 'v1-9', tokens: 5000, reason: 'oversized turn' }),
    ],
    summaryIds: [],
    retrievedEventIds: ['d703a1a9-1b7b-4fb1-b512-c9738b1fe617:v1-4'],
    retrieved: [
      {
        entryKey: 'd703a1a9-1b7b-4fb1-b512-c9738b1fe617:v1-4',
        score: 92.944,
        reason: 'FTS: selector, files, port, theme; active branch',
      },
    ],
    planning: {
      mode: 'managed',
      fallbackReason: null,
      counts: { messages: 915, groups: 89, supplements: 12, included: 4, excluded: 3, output: 4 },
      tokens: { recent: 29276, history: 2846, current: 27 },
      rescuedImmediatePredecessor: false,
      oversizedTurnExclusions: 0,
      plannedTokens: null,
    },
    retrieval: { candidates: 72, duplicates: 0, alternateBranchCandidates: 0, alreadyInContext: 24, latencyMs: 2.715 },
    warnings: [],
    ...overrides,
  };
}

export function planResult(overrides: Partial<PlanResult> = {}): PlanResult {
  return {
    mode: 'managed',
    messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }], timestamp: 0 }],
    manifestId: 'm-01a22bfe7ae5956d3018a646656d',
    manifestStored: true,
    estimatedTokens: 36349,
    budget: {
      contextWindow: 200000,
      outputReserve: 32768,
      safetyMargin: 4000,
      hardInputLimit: 163232,
      softLimit: 160000,
      targetInputTokens: 140000,
      recentTailTokens: 32000,
      maxRetrievedHistoryTokens: 16000,
      maxProjectTokens: 20000,
      maxSummaryTokens: 12000,
    },
    model: { provider: 'anthropic', id: 'claude-sonnet-4-5', contextWindow: 200000, maxOutputTokens: 64000, source: 'request' },
    warnings: [],
    stats: {
      counts: { messages: 915, groups: 89, supplements: 12, included: 252, excluded: 675, output: 252 },
      tokens: { recent: 29276, history: 2846, current: 27 },
      rescuedImmediatePredecessor: false,
      oversizedTurnExclusions: 0,
      included: 252,
      excluded: 675,
      durationMs: 101.424,
    },
    session: { id: 'd703a1a9-1b7b-4fb1-b512-c9738b1fe617', file: '/home/me/sessions/s.jsonl', leafId: 'v1-1018' },
    ...overrides,
  };
}

export function retrieveResult(overrides: Partial<RetrieveResult> = {}): RetrieveResult {
  return {
    status: 'ok',
    query: 'port user-message-selector.ts DynamicBorder to the theme',
    history: [
      {
        entryKey: 'd703a1a9-1b7b-4fb1-b512-c9738b1fe617:v1-24',
        entryId: 'v1-24',
        role: 'assistant',
        createdAt: '2025-11-20T23:44:27.052Z',
        score: 232.513,
        reason: 'exact identifier: user-message-selector.ts; FTS: port, theme; active branch',
        excerpt: "Done. I've properly ported `user-message-selector.ts` to use the theme system.",
        tokens: 382,
      },
    ],
    project: [],
    stats: { candidates: 26, duplicates: 0, alternateBranchCandidates: 0, alreadyInContext: 3, latencyMs: 2.744 },
    warnings: [],
    ...overrides,
  };
}

export function healthResult(overrides: Partial<HealthResult> = {}): HealthResult {
  return {
    status: 'ok',
    version: '0.1.0',
    schemaVersion: 2,
    databasePath: '/home/me/.local/share/ds4-lsp/context.db',
    sqliteVersion: '3.40.1',
    fts5: true,
    sessions: 1,
    entries: 1018,
    manifests: 1,
    ephemeralManifests: 0,
    estimator: 'chars-v1',
    notices: [],
    configWarnings: [],
    server: { name: 'ds4-lsp', version: '0.1.0', positionEncoding: 'utf-16', trusted: false },
    ...overrides,
  };
}

/** A `SettingsReader` over a plain object of `ds4.*` keys (without the `ds4.` prefix). */
export function reader(values: Record<string, unknown>): { get(key: string): unknown } {
  return { get: (key: string) => values[key] };
}
