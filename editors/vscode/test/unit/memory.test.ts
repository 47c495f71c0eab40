import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { ResponseError } from 'vscode-languageserver-protocol';

import {
  MEMORY_ACTION_COMMAND,
  formatTime,
  memorySummary,
  mutationEntryJson,
  mutationNote,
  parseMemoryAction,
  refusedWrite,
  renderArtifactSearch,
  renderMemoryHtml,
  supersedeTarget,
} from '../../src/memoryView';
import { ensureOrAsk, OWNED_SESSION_KEY, OWNED_SESSION_TITLE, OwnedSession, OwnedSessionReopenError } from '../../src/ownedSession';
import {
  checkArtifactSearchResult,
  checkContextMutationResult,
  checkMemoryResult,
  checkSessionAppendResult,
  checkSessionOpenResult,
  type SessionOpenParams,
  type SessionOpenResult,
} from '../../src/protocol';
import { Ds4ContractError, type Ds4Connection, Ds4Requests } from '../../src/requests';
import { artifactSearchResult, memoryItem, memoryResult, mutationResult, pinItem } from '../fixtures';

const NONCE = 'abcdefghijklmnop0123456789';
/** The complete entry line a server sends with a write (`result.entry`). */
const ENTRY = {
  type: 'custom' as const,
  id: '1a2b3c4d',
  parentId: '0000002a',
  timestamp: '2025-12-02T09:02:00.000Z',
  customType: 'ds4-context-memory-v1' as const,
  data: mutationResult().data,
};
const HOSTILE = `<img src=x onerror="alert(1)">'&</style><script>alert(2)</script>`;

function body(html: string): string {
  return html.slice(html.indexOf('<body>'));
}

/** A connection that answers each method from `answers` and records what was sent. */
function answering(answers: Record<string, unknown>): { connection: Ds4Connection; sent: { method: string; param: unknown }[] } {
  const sent: { method: string; param: unknown }[] = [];
  return {
    sent,
    connection: {
      sendRequest<R>(method: string, param: unknown): Promise<R> {
        sent.push({ method, param });
        return Promise.resolve(answers[method] as R);
      },
      sendNotification: () => Promise.resolve(),
      onProgress: () => ({ dispose: () => undefined }),
    },
  };
}

/** The `command:` links of a page, decoded to their argument. */
function links(html: string): unknown[] {
  const prefix = `command:${MEMORY_ACTION_COMMAND}?`;
  return [...html.matchAll(/href="([^"]*)"/g)]
    .map((match) => (match[1] ?? '').replace(/&amp;/g, '&').replace(/&quot;/g, '"').replace(/&#39;/g, "'"))
    .filter((href) => href.startsWith(prefix))
    .map((href) => (JSON.parse(decodeURIComponent(href.slice(prefix.length))) as unknown[])[0]);
}

describe('durable context: the wire contract', () => {
  it('accepts the documented results and names the fields that do not fit', () => {
    assert.deepEqual(checkContextMutationResult(mutationResult()), []);
    assert.deepEqual(checkContextMutationResult(mutationResult({ appended: true, entryId: '0000000a' })), []);
    assert.deepEqual(checkContextMutationResult(mutationResult({ entry: ENTRY })), []);
    assert.deepEqual(checkContextMutationResult({ ...mutationResult(), entry: { ...ENTRY, id: 7 } }), ['result.entry']);
    assert.deepEqual(checkContextMutationResult({ ...mutationResult(), customType: 'ds4-other', appended: 'no' }), [
      'result.customType',
      'result.appended',
    ]);
    assert.deepEqual(checkMemoryResult(memoryResult()), []);
    assert.deepEqual(checkMemoryResult({ ...memoryResult(), pins: [{ id: 'p1' }] }), ['result.pins']);
    assert.deepEqual(checkArtifactSearchResult(artifactSearchResult()), []);
    assert.deepEqual(checkArtifactSearchResult({ ...artifactSearchResult(), truncated: null }), ['result.truncated']);
    assert.deepEqual(checkSessionOpenResult({ sessionId: 's', file: '/d/sessions/s.jsonl', leafId: null, created: true }), []);
    assert.deepEqual(checkSessionOpenResult({ sessionId: 's', file: 3, leafId: null, created: true }), ['result.file']);
    assert.deepEqual(checkSessionAppendResult({ sessionId: 's', file: '/f', entryIds: ['0000000a'], leafId: '0000000a' }), []);
    assert.deepEqual(checkSessionAppendResult({ sessionId: 's', file: '/f', entryIds: [1], leafId: null }), [
      'result.entryIds',
      'result.leafId',
    ]);
  });

  it('sends each request under its method with the params as given, and checks the answer', async () => {
    const open = { sessionId: 's1', file: '/data/sessions/s1.jsonl', leafId: null, created: true };
    const { connection, sent } = answering({
      'ds4/pin': mutationResult({ customType: 'ds4-context-pin-v1', itemId: 'pin-0123456789abcdef' }),
      'ds4/unpin': mutationResult({ customType: 'ds4-context-pin-v1' }),
      'ds4/remember': mutationResult(),
      'ds4/forget': mutationResult(),
      'ds4/memory': memoryResult(),
      'ds4/artifactSearch': artifactSearchResult(),
      'ds4/sessionOpen': open,
      'ds4/sessionAppend': { sessionId: 's1', file: open.file, entryIds: ['0000000a'], leafId: '0000000a' },
    });
    const requests = new Ds4Requests(connection);
    const session = { file: '/s.jsonl' };
    assert.equal((await requests.pin({ session, content: 'x', scope: 'branch' })).itemId, 'pin-0123456789abcdef');
    await requests.unpin({ session, pinId: 'p1', reason: 'done' });
    await requests.remember({ session, claim: 'retries defaults to 5', supersedes: 'm1' });
    await requests.forget({ session, memoryId: 'm1', status: 'expired' });
    await requests.memory();
    await requests.artifactSearch({ query: 'AssertionError', session });
    assert.deepEqual(await requests.sessionOpen(), open);
    await requests.sessionAppend({ session: { file: open.file }, messages: [{ role: 'user', content: 'hi', timestamp: 1 }] });
    assert.deepEqual(
      sent.map((call) => call.method),
      ['ds4/pin', 'ds4/unpin', 'ds4/remember', 'ds4/forget', 'ds4/memory', 'ds4/artifactSearch', 'ds4/sessionOpen', 'ds4/sessionAppend'],
    );
    assert.deepEqual(sent[2]?.param, { session, claim: 'retries defaults to 5', supersedes: 'm1' });
    assert.deepEqual(sent[4]?.param, {});
    const bad = answering({ 'ds4/remember': { ...mutationResult(), itemId: 5 } });
    await assert.rejects(new Ds4Requests(bad.connection).remember({ session, claim: 'x' }), Ds4ContractError);
  });
});

describe('durable context: writes the server refuses or returns', () => {
  it("reads a conflict's item from the server's RequestFailed error", () => {
    const message = "conflicts with active memory 'm1' (same key 'retries'); pass params.supersedes: \"m1\" to replace it";
    assert.deepEqual(refusedWrite(new ResponseError(-32803, message, { conflictsWith: 'm1' })), { message, conflictsWith: 'm1' });
    // A refusal without a conflict (a repeat, an unknown id): the message only.
    assert.deepEqual(refusedWrite(new ResponseError(-32803, "unknown pin 'p9'")), { message: "unknown pin 'p9'" });
    assert.deepEqual(refusedWrite({ code: -32803, message: 'x', data: { conflictsWith: 7 } }), { message: 'x' });
    // Supersede is offered for a conflict (or when an older server sends no kind), never for a repeat.
    const conflict = refusedWrite(new ResponseError(-32803, message, { conflictsWith: 'm1', kind: 'conflict' }));
    assert.deepEqual(conflict, { message, conflictsWith: 'm1', kind: 'conflict' });
    assert.equal(supersedeTarget(conflict), 'm1');
    const repeat = refusedWrite(new ResponseError(-32803, 'already pinned as p1', { conflictsWith: 'p1', kind: 'repeat' }));
    assert.ok(repeat);
    assert.equal(supersedeTarget(repeat), undefined);
    assert.equal(supersedeTarget({ message, conflictsWith: 'm1' }), 'm1');
    assert.equal(supersedeTarget({ message }), undefined);
    // Not a refusal: InvalidParams, other errors, non-errors.
    assert.equal(refusedWrite(new ResponseError(-32602, 'params.claim: required')), undefined);
    assert.equal(refusedWrite(new Error('boom')), undefined);
    assert.equal(refusedWrite(null), undefined);
  });

  it('copies the complete entry line when the server sends one, else the bare entry', () => {
    const pi = mutationResult();
    assert.deepEqual(JSON.parse(mutationEntryJson(pi)), { type: 'custom', customType: 'ds4-context-memory-v1', data: pi.data });
    assert.doesNotMatch(mutationEntryJson(pi), /\n/);
    const complete = mutationResult({ entry: ENTRY });
    assert.deepEqual(JSON.parse(mutationEntryJson(complete)), ENTRY);
    assert.doesNotMatch(mutationEntryJson(complete), /\n/);
  });

  it('says a Pi-session write is only prepared and how it gets recorded, claiming nobody appends it', () => {
    const note = mutationNote(mutationResult(), 'memory');
    assert.match(note, /memory mem-0123456789abcdef prepared, not yet recorded/);
    assert.match(note, /ds4 never writes it/);
    assert.match(note, /Pi extension can record it with pi\.appendEntry\("ds4-context-memory-v1", data\)/);
    assert.match(note, /append it to the session file/);
    assert.match(note, /DS4-owned session/);
    // Nothing sends the entry to Pi: the note must not say that something appends it.
    assert.doesNotMatch(note, /extension appends it|server imports it/i);
    const owned = mutationNote(mutationResult({ appended: true, entryId: '0000000a' }), 'memory');
    assert.equal(owned, 'DS4: memory mem-0123456789abcdef recorded (entry 0000000a appended to the DS4-owned session).');
  });
});

describe('durable context: the memory page', () => {
  it('lists pins and memory with their provenance, behind a script-free CSP', () => {
    const html = renderMemoryHtml(memoryResult(), { nonce: NONCE, sessionFile: '/s/a.jsonl', owned: true });
    assert.match(html, /content="default-src 'none'; style-src 'nonce-abcdefghijklmnop0123456789';"/);
    assert.doesNotMatch(html, /<script/);
    const page = body(html);
    assert.match(page, /<code>\/s\/a\.jsonl<\/code> \(owned by DS4\)/);
    assert.match(page, /<h2>Pins <span class="sub">1<\/span><\/h2>/);
    assert.match(page, /<pre>Never change the public API of parser\.py<\/pre>/);
    assert.match(page, /file <code>\/home\/me\/demo\/parser\.py<\/code>/);
    assert.match(page, /<p class="claim">the cache is redis<\/p>/);
    assert.match(page, /key <code>the cache<\/code> · from session <code>sess-mem<\/code> entry <code>sess-mem:00000002<\/code> · source entries <code>00000001<\/code>/);
    assert.match(page, /created 1970-01-01T00:00:00\.010Z/);
    assert.match(page, /2 applied, 0 rejected, 0 invalid/);
  });

  it('offers supersede and unpin for an active pin, supersede and forget for active memory, nothing for inactive items', () => {
    const html = renderMemoryHtml(
      memoryResult({
        memory: [memoryItem(), memoryItem({ id: 'm0', status: 'superseded', supersededBy: 'm1' })],
        pins: [pinItem(), pinItem({ id: 'p0', status: 'deleted', statusReason: 'obsolete' })],
      }),
      { nonce: NONCE },
    );
    assert.deepEqual(links(html), [
      { action: 'supersede', kind: 'pin', id: 'p1' },
      { action: 'unpin', kind: 'pin', id: 'p1' },
      { action: 'supersede', kind: 'memory', id: 'm1' },
      { action: 'forget', kind: 'memory', id: 'm1' },
    ]);
    for (const action of links(html)) {
      assert.deepEqual(parseMemoryAction(action), action);
    }
    assert.match(html, /superseded by <code>m1<\/code>/);
    assert.match(html, /reason: obsolete/);
    assert.match(html, /every indexed session/);
  });

  it('escapes item text, ids and problems: user data never becomes markup', () => {
    const html = renderMemoryHtml(
      memoryResult({
        memory: [memoryItem({ id: `m${HOSTILE}`, claim: HOSTILE, key: HOSTILE })],
        pins: [pinItem({ content: HOSTILE, provenance: { ...pinItem().provenance, sourceFile: HOSTILE } })],
        problems: [{ mutationKey: HOSTILE, sessionId: 's', entryId: 'e', kind: 'memory', problem: HOSTILE }],
      }),
      { nonce: NONCE, sessionFile: HOSTILE },
    );
    const page = body(html);
    assert.doesNotMatch(page, /<img|<script|<\/style>/);
    assert.match(page, /&lt;img src=x onerror=&quot;alert\(1\)&quot;&gt;&#39;&amp;&lt;\/style&gt;/);
    // The hostile id survives the round trip through the link, still one argument.
    const [first] = links(html).filter((action) => (action as { kind: string }).kind === 'memory');
    assert.deepEqual(first, { action: 'supersede', kind: 'memory', id: `m${HOSTILE}` });
    assert.throws(() => renderMemoryHtml(memoryResult(), { nonce: 'short' }), /nonce/);
  });

  it('accepts only the actions the page offers', () => {
    assert.equal(parseMemoryAction({ action: 'forget', kind: 'pin', id: 'p1' }), undefined);
    assert.equal(parseMemoryAction({ action: 'unpin', kind: 'memory', id: 'm1' }), undefined);
    assert.equal(parseMemoryAction({ action: 'delete', kind: 'memory', id: 'm1' }), undefined);
    assert.equal(parseMemoryAction({ action: 'forget', kind: 'memory', id: '' }), undefined);
    assert.equal(parseMemoryAction({ action: 'forget', kind: 'memory', id: 'x'.repeat(257) }), undefined);
    assert.equal(parseMemoryAction('forget'), undefined);
    assert.deepEqual(parseMemoryAction({ action: 'forget', kind: 'memory', id: 'm1', extra: 1 }), { action: 'forget', kind: 'memory', id: 'm1' });
  });

  it('shows "-" for a time a Date cannot hold instead of failing the page', () => {
    const far = 9007199254740991; // 2^53-1 ms: the server accepts it, Date does not (> 8.64e15)
    assert.equal(formatTime(far), '-');
    assert.equal(formatTime(-far), '-');
    assert.equal(formatTime(8.64e15), '+275760-09-13T00:00:00.000Z');
    assert.equal(formatTime(Number.NaN), '-');
    const html = renderMemoryHtml(memoryResult({ memory: [memoryItem({ createdAt: far, updatedAt: far })], pins: [] }), { nonce: NONCE });
    assert.match(body(html), /created -/);
  });

  it('summarizes a list in one line', () => {
    assert.equal(memorySummary(memoryResult()), '1 pin, 1 memory item');
    assert.equal(
      memorySummary(memoryResult({ pins: [], memory: [memoryItem(), memoryItem({ id: 'm0', status: 'invalid' })] })),
      '0 pins, 2 memory items (1 inactive)',
    );
  });
});

describe('durable context: artifact search results', () => {
  it('shows each match with its place and excerpt, and what could not be searched', () => {
    const text = renderArtifactSearch(artifactSearchResult());
    assert.equal(
      text,
      [
        'DS4 artifact search for "AssertionError": 1 match in 2 artifacts.',
        '',
        `artifact://sha256/${'a'.repeat(64)} 412:9 (entry 0000002a)`,
        '    E   AssertionError: expected 3 retries',
        '    E   got 5',
        '',
        `not searched: ${'b'.repeat(64)} (missing)`,
        '',
      ].join('\n'),
    );
    const none = renderArtifactSearch(artifactSearchResult({ matches: [], searched: [], truncated: true }));
    assert.match(none, /0 matches in 0 artifacts \(truncated/);
    assert.match(none, /references no stored tool output/);
  });
});

describe("the workspace's server-owned session", () => {
  function store(initial?: unknown) {
    const values = new Map<string, unknown>(initial === undefined ? [] : [[OWNED_SESSION_KEY, initial]]);
    return {
      values,
      get: (key: string): unknown => values.get(key),
      update: (key: string, value: unknown): Promise<void> => {
        values.set(key, value);
        return Promise.resolve();
      },
    };
  }
  function server(known: Set<string>) {
    const asked: SessionOpenParams[] = [];
    let created = 0;
    const open = (params: SessionOpenParams): Promise<SessionOpenResult> => {
      asked.push(params);
      if (params.sessionId !== undefined) {
        return known.has(params.sessionId)
          ? Promise.resolve({ sessionId: params.sessionId, file: `/data/sessions/${params.sessionId}.jsonl`, leafId: '0000000a', created: false })
          : Promise.reject(new ResponseError(-32602, 'params.sessionId: not a session this server owns'));
      }
      created += 1;
      const sessionId = `new-${String(created)}`;
      known.add(sessionId);
      return Promise.resolve({ sessionId, file: `/data/sessions/${sessionId}.jsonl`, leafId: null, created: true });
    };
    return { open, asked };
  }

  it('opens one session per workspace, keeps its id, and reopens it by id after a reload', async () => {
    const state = store();
    const { open, asked } = server(new Set());
    const owned = new OwnedSession(state, open);
    assert.equal(owned.stored, undefined);
    const [a, b] = await Promise.all([owned.ensure(), owned.ensure()]);
    assert.equal(a, b);
    assert.deepEqual(asked, [{ title: OWNED_SESSION_TITLE }]);
    assert.deepEqual(state.values.get(OWNED_SESSION_KEY), { sessionId: 'new-1', file: '/data/sessions/new-1.jsonl' });
    // A new window: the same workspace state, reopened by id.
    const reloaded = server(new Set(['new-1']));
    const again = await new OwnedSession(state, reloaded.open).ensure();
    assert.deepEqual(reloaded.asked, [{ sessionId: 'new-1' }]);
    assert.equal(again.file, '/data/sessions/new-1.jsonl');
    assert.equal(again.created, false);
  });

  it('keeps the stored session when reopening it fails, and surfaces the error', async () => {
    const stored = { sessionId: 'gone', file: '/old/gone.jsonl' };
    const state = store(stored);
    const { open, asked } = server(new Set());
    const owned = new OwnedSession(state, open);
    const error = await owned.ensure().then(
      () => assert.fail('reopening an unknown session resolved'),
      (failure: unknown) => failure,
    );
    assert.ok(error instanceof OwnedSessionReopenError);
    assert.match(error.message, /could not reopen the workspace's DS4-owned session gone \(\/old\/gone\.jsonl\): params\.sessionId: not a session this server owns/);
    assert.match(error.message, /It is kept/);
    assert.deepEqual(error.stored, stored);
    // Nothing created, the stored id untouched: a transient failure must not orphan the old session.
    assert.deepEqual(asked, [{ sessionId: 'gone' }]);
    assert.deepEqual(state.values.get(OWNED_SESSION_KEY), stored);
    // Asked again (the server is back): the same session, reopened by its id.
    const back = server(new Set(['gone']));
    assert.equal((await new OwnedSession(state, back.open).ensure()).sessionId, 'gone');
    assert.deepEqual(back.asked, [{ sessionId: 'gone' }]);
    // Only on request does a new session replace it.
    const started = await owned.startNew();
    assert.equal(started.sessionId, 'new-1');
    assert.deepEqual(asked, [{ sessionId: 'gone' }, { title: OWNED_SESSION_TITLE }]);
    assert.deepEqual(state.values.get(OWNED_SESSION_KEY), { sessionId: 'new-1', file: '/data/sessions/new-1.jsonl' });
    assert.equal(await owned.ensure(), started);
  });

  it('asks before a command replaces a session it cannot reopen', async () => {
    const stored = { sessionId: 'gone', file: '/old/gone.jsonl' };
    const state = store(stored);
    const { open, asked } = server(new Set());
    const owned = new OwnedSession(state, open);
    const questions: string[] = [];
    // Declined: the error comes back marked as shown, the stored session stays.
    const declined = await ensureOrAsk(owned, (message) => {
      questions.push(message);
      return Promise.resolve(false);
    }).then(
      () => assert.fail('resolved without a session'),
      (error: unknown) => error,
    );
    assert.ok(declined instanceof OwnedSessionReopenError);
    assert.equal((declined as unknown as { reported: unknown }).reported, true);
    assert.match(questions[0] ?? '', /could not reopen the workspace's DS4-owned session gone/);
    assert.deepEqual(state.values.get(OWNED_SESSION_KEY), stored);
    // Accepted: a new session, remembered.
    const started = await ensureOrAsk(owned, () => Promise.resolve(true));
    assert.equal(started.sessionId, 'new-1');
    assert.deepEqual(asked, [{ sessionId: 'gone' }, { sessionId: 'gone' }, { title: OWNED_SESSION_TITLE }]);
    assert.deepEqual(state.values.get(OWNED_SESSION_KEY), { sessionId: 'new-1', file: '/data/sessions/new-1.jsonl' });
    // Other errors are not questions.
    const broken = new OwnedSession(store(), () => Promise.reject(new ResponseError(-32601, 'Method Not Found: ds4/sessionOpen')));
    await assert.rejects(ensureOrAsk(broken, () => assert.fail('asked')), /Method Not Found/);
  });

  it('does not keep a failure: the next call asks again', async () => {
    let fail = true;
    const owned = new OwnedSession(store(), (params) =>
      fail
        ? Promise.reject(new ResponseError(-32601, 'Method Not Found: ds4/sessionOpen'))
        : Promise.resolve({ sessionId: 's', file: '/f.jsonl', leafId: null, created: true, ...params }),
    );
    await assert.rejects(owned.ensure(), /Method Not Found/);
    fail = false;
    assert.equal((await owned.ensure()).file, '/f.jsonl');
    // A stored value of the wrong shape is ignored.
    assert.equal(new OwnedSession(store({ sessionId: 5 }), () => Promise.reject(new Error('x'))).stored, undefined);
  });
});
