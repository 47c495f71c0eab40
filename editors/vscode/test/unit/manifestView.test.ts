import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { escapeHtml, reasonGroup, renderManifestHtml } from '../../src/manifestView';
import { item, manifest, planResult } from '../fixtures';

const NONCE = 'abcdefghijklmnop0123456789';
const HOSTILE = `<img src=x onerror="alert(1)">'&</style><script>alert(2)</script>`;

function body(html: string): string {
  return html.slice(html.indexOf('<body>'));
}

describe('manifest webview', () => {
  it('escapes every server-provided string, so a hostile manifest renders as text', () => {
    const html = renderManifestHtml(
      manifest({
        id: `m-${HOSTILE}`,
        model: HOSTILE,
        modelSource: HOSTILE,
        sessionId: HOSTILE,
        branchLeafId: HOSTILE,
        createdAt: HOSTILE,
        promptHash: HOSTILE,
        policyVersion: HOSTILE,
        warnings: [HOSTILE],
        retrieved: [{ entryKey: HOSTILE, score: 1, reason: HOSTILE }],
        included: [item({ kind: HOSTILE, sourceId: HOSTILE, groupId: HOSTILE, classification: HOSTILE, reason: HOSTILE })],
        excluded: [item({ kind: HOSTILE, sourceId: HOSTILE, reason: HOSTILE })],
        budgets: { ...manifest().budgets, [HOSTILE]: 5 },
        planning: { ...manifest().planning, mode: HOSTILE, fallbackReason: HOSTILE, tokens: { [HOSTILE]: 10 } },
      }),
      { nonce: NONCE, plan: planResult({ warnings: [HOSTILE], session: { id: 's', file: HOSTILE, leafId: null } }) },
    );
    assert.doesNotMatch(html, /<script/i);
    assert.doesNotMatch(html, /<img/i);
    assert.equal(html.match(/<\/style>/g)?.length, 1, 'only the page’s own style block closes');
    assert.match(html, /&lt;img src=x onerror=&quot;alert\(1\)&quot;&gt;&#39;&amp;&lt;\/style&gt;&lt;script&gt;/);
  });

  it('has a strict CSP: no scripts, no remote loads, styles only from its nonce', () => {
    const html = renderManifestHtml(manifest(), { nonce: NONCE });
    const csp = /<meta http-equiv="Content-Security-Policy" content="([^"]*)">/.exec(html);
    assert.equal(csp?.[1], `default-src 'none'; style-src 'nonce-${NONCE}';`);
    assert.match(html, new RegExp(`<style nonce="${NONCE}">`));
    // Inline style attributes would be blocked by this CSP: widths must be classes.
    assert.doesNotMatch(body(html), /\sstyle=/);
    assert.doesNotMatch(html, /\s(src|href)=/);
    assert.doesNotMatch(html, /https?:\/\//);
  });

  it('defines a CSS rule for every width and position class it uses', () => {
    const html = renderManifestHtml(manifest(), { nonce: NONCE });
    const used = new Set(body(html).match(/\b[wl]\d+\b/g));
    assert.ok(used.size > 3);
    for (const name of used) {
      assert.match(html, new RegExp(`\\.${name}\\{(width|left):[\\d.]+%\\}`), name);
    }
  });

  it('shows the numbers a person asks for: tokens, limits, counts, kinds against caps', () => {
    const html = body(renderManifestHtml(manifest(), { nonce: NONCE }));
    assert.match(html, /36,349 tokens/);
    assert.match(html, /target 140,000, hard limit 163,232/);
    assert.match(html, /4 included/);
    assert.match(html, /3 excluded/);
    assert.match(html, /anthropic\/claude-sonnet-4-5/);
    // recent: 29,276 of the 32,000 tail cap.
    assert.match(html, /recent<\/td><td class="num">29,276<\/td><td class="num">32,000<\/td>.*91%/);
    assert.match(html, /Retrieved history cap<\/td><td class="num">16,000/);
    assert.match(html, /<code title="d703a1a9-1b7b-4fb1-b512-c9738b1fe617:v1-4">v1-4<\/code><\/td><td class="num">92.94<\/td><td>FTS: selector, files, port, theme; active branch/);
    assert.match(html, /not reported/);
  });

  it('groups excluded items by reason, largest first, and lists every item', () => {
    const html = body(renderManifestHtml(manifest(), { nonce: NONCE }));
    const oversized = html.indexOf('<tr><td>oversized turn</td><td class="num">1</td><td class="num">5,000</td>');
    const older = html.indexOf(
      '<tr><td>older turn outside the recent tail; no retrieval evidence</td><td class="num">2</td><td class="num">26</td>',
    );
    assert.ok(oversized > 0 && older > oversized, 'reasons sorted by tokens');
    assert.match(html, /All excluded items \(3\)/);
    assert.match(html, /<code>v1-9<\/code>/);
  });

  it('shows a bulk item as its range and counts its messages', () => {
    // What the server sends for a long session: the newest excluded turns one by one, the
    // older ones as one bulk item (docs/protocol.md "bulk item").
    const older = 'older turn outside the recent tail; no retrieval evidence';
    const bulk = item({
      kind: 'background',
      sourceId: 'v1-1',
      lastSourceId: 'v1-4872',
      count: 4872,
      groupId: null,
      tokens: 912_345,
      score: 0,
      reason: older,
    });
    const listed = [
      item({ kind: 'background', sourceId: 'v1-4873', groupId: null, tokens: 30, reason: older }),
      item({ kind: 'background', sourceId: 'v1-4874', groupId: null, tokens: 40, reason: older }),
      item({ kind: 'history', sourceId: 's:v1-9', tokens: 5000, reason: 'oversized turn' }),
    ];
    const html = body(
      renderManifestHtml(
        manifest({
          excluded: [bulk, ...listed],
          planning: { ...manifest().planning, counts: { ...manifest().planning.counts, excluded: 4875 } },
        }),
        { nonce: NONCE },
      ),
    );
    assert.match(html, /<td><code>v1-1<\/code> … <code>v1-4872<\/code> \(4,872 messages\)<\/td>/);
    assert.match(html, /4,875 excluded/, 'the Items card counts messages');
    assert.match(html, /Excluded <span class="sub">4,875 items, 917,415 tokens listed/);
    assert.match(html, new RegExp(`<tr><td>${older}</td><td class="num">4,874</td><td class="num">912,415</td>`));
    assert.match(html, /<tr><td>oversized turn<\/td><td class="num">1<\/td><td class="num">5,000<\/td>/);
    assert.match(html, /All excluded items \(4,875\)/);
    // Every other item keeps its plain source id.
    assert.match(html, /<td><code>v1-4873<\/code><\/td>/);
    assert.equal(html.match(/ messages\)/g)?.length, 1);
  });

  it('counts a bulk item left out of a capped table by its messages', () => {
    const bulk = item({ kind: 'background', sourceId: 'v1-1', lastSourceId: 'v1-500', count: 500, groupId: null });
    const many = Array.from({ length: 10 }, (_, index) => item({ sourceId: `v1-${String(501 + index)}` }));
    const html = renderManifestHtml(manifest({ excluded: [...many, bulk] }), { nonce: NONCE, maxRows: 10 });
    assert.match(html, /500 more not shown/);
    assert.doesNotMatch(html, /500 messages/);
  });

  it('treats a count that is not an integer over 1 as one message', () => {
    const odd = [
      item({ sourceId: 'v1-1', count: 1 }),
      item({ sourceId: 'v1-2', count: 2.5 }),
      item({ sourceId: 'v1-3', count: -4 }),
    ];
    const html = body(renderManifestHtml(manifest({ excluded: odd }), { nonce: NONCE }));
    assert.match(html, /All excluded items \(3\)/);
    assert.doesNotMatch(html, / messages\)/);
  });

  it('caps long item tables and says how many rows it left out', () => {
    const many = Array.from({ length: 30 }, (_, index) => item({ sourceId: `v1-${String(index)}` }));
    const html = renderManifestHtml(manifest({ included: many }), { nonce: NONCE, maxRows: 10 });
    assert.match(html, /20 more not shown/);
    assert.doesNotMatch(html, /<code>v1-10<\/code>/);
  });

  it('says the item lists were not loaded for a summary-view manifest', () => {
    const summary = manifest({ itemCounts: { included: 252, excluded: 675 } });
    delete summary.included;
    delete summary.excluded;
    const html = renderManifestHtml(summary, { nonce: NONCE });
    assert.match(html, /Included <span class="sub">252 items/);
    assert.match(html, /Excluded <span class="sub">675 items/);
    assert.equal(html.match(/not loaded \(summary view\)/g)?.length, 2);
  });

  it('counts rolled-up excluded items that are not listed', () => {
    const html = renderManifestHtml(manifest({ excludedRollup: { total: 5000, omitted: 4997 } }), { nonce: NONCE });
    assert.match(html, /4,997 of 5,000 excluded items were rolled up/);
    assert.match(html, /5,000 excluded/);
  });

  it('leads with the fallback reason and the plan warnings', () => {
    const html = renderManifestHtml(
      manifest({ planning: { ...manifest().planning, mode: 'fallback', fallbackReason: 'index could not be updated' } }),
      { nonce: NONCE, plan: planResult({ warnings: ['unknown context window; using 128,000'] }) },
    );
    assert.match(html, /Fell back to the original messages:<\/strong> index could not be updated/);
    assert.match(html, /unknown context window; using 128,000/);
    assert.match(html, /class="pill mode-fallback">fallback/);
  });

  it('refuses a nonce that could break out of the CSP', () => {
    assert.throws(() => renderManifestHtml(manifest(), { nonce: "x'; script-src *" }), /nonce/);
    assert.throws(() => renderManifestHtml(manifest(), { nonce: 'short' }), /nonce/);
  });

  it('escapeHtml covers the five HTML-special characters', () => {
    assert.equal(escapeHtml(`<a href="x">'&'</a>`), '&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;');
  });

  it('shows project items as path:lines with score and reason, and a Project section', () => {
    const snippetId = 'a'.repeat(64);
    const droppedId = 'b'.repeat(64);
    const html = body(
      renderManifestHtml(
        manifest({
          included: [
            item(),
            item({ kind: 'project', sourceId: snippetId, groupId: null, classification: null, tokens: 410, score: 131.5, reason: 'project snippet' }),
          ],
          excluded: [
            item({ kind: 'project', sourceId: droppedId, groupId: null, classification: null, tokens: 900, score: 40, reason: 'over the project cap' }),
          ],
          projectSnippets: [
            {
              snippetId,
              path: 'src/shipping.py',
              fileHash: 'c'.repeat(64),
              lines: [12, 40],
              score: 131.5,
              reason: 'symbol shipping_cost; path',
              modified: true,
              gitCommit: '3f2c9a1e00',
            },
          ],
          projectRevision: { branch: 'main', head: '3f2c9a1e5b7d0011223344', dirty: true, changedPaths: ['src/shipping.py'], indexedAt: '2026-11-30T10:41:07.512Z' },
          project: { status: 'ready', dropped: [{ path: 'src/big.bin', reason: 'binary' }], reindexed: ['src/shipping.py'] },
        }),
        { nonce: NONCE },
      ),
    );
    // The included item: path and lines instead of the 64-hex id (kept as the hover title).
    assert.match(html, new RegExp(`<code title="snippet ${snippetId}">src/shipping.py:12-40</code>`));
    assert.doesNotMatch(html, new RegExp(`<code>${snippetId}</code>`));
    assert.match(html, /src\/shipping.py:12-40<\/code><\/td><td><\/td><td><\/td><td class="num">410<\/td><td class="num">131.50<\/td><td>project snippet; symbol shipping_cost; path<\/td>/);
    // An excluded project item the plan did not send has no snippet record: its id stays.
    assert.match(html, new RegExp(`<code>${droppedId}</code>`));
    // The Project section.
    assert.match(html, /<h2>Project <span class="sub">1 snippets<\/span><\/h2>/);
    assert.match(html, /status <strong>ready<\/strong>/);
    assert.match(html, /branch <code>main<\/code>/);
    assert.match(html, /head <code title="3f2c9a1e5b7d0011223344">3f2c9a1e5b7d<\/code>/);
    assert.match(html, /working tree dirty/);
    assert.match(html, /1 changed file\(s\) re-indexed/);
    assert.match(html, /<td class="num">131.50<\/td><td>symbol shipping_cost; path<\/td><td>modified<\/td>/);
    assert.match(html, /<code>src\/big.bin<\/code>: binary/);
  });

  it('shows the project status without snippets (untrusted workspace), and no section for old servers', () => {
    const untrusted = body(
      renderManifestHtml(manifest({ project: { status: 'untrusted' }, projectSnippets: [], projectRevision: null }), { nonce: NONCE }),
    );
    assert.match(untrusted, /<h2>Project/);
    assert.match(untrusted, /status <strong>untrusted<\/strong>/);
    assert.match(untrusted, /No project snippets were sent/);
    const old = body(renderManifestHtml(manifest(), { nonce: NONCE }));
    assert.doesNotMatch(old, /<h2>Project/);
  });

  it('escapes project paths, reasons and revision fields', () => {
    const html = renderManifestHtml(
      manifest({
        included: [item({ kind: 'project', sourceId: HOSTILE })],
        projectSnippets: [{ snippetId: HOSTILE, path: HOSTILE, fileHash: 'x', lines: [1, 2], score: 1, reason: HOSTILE, modified: false, gitCommit: null }],
        projectRevision: { branch: HOSTILE, head: HOSTILE, dirty: false },
        project: { status: HOSTILE, dropped: [{ path: HOSTILE, reason: HOSTILE }] },
      }),
      { nonce: NONCE },
    );
    assert.doesNotMatch(html, /<script/i);
    assert.doesNotMatch(html, /<img/i);
    assert.equal(html.match(/<\/style>/g)?.length, 1);
  });
  it('shows, per scope, what was sent and why not, and groups below-floor items by floor', () => {
    const floorItem = (sourceId: string, score: number, floor: string, kind = 'history') =>
      item({ kind, sourceId, groupId: null, tokens: 100, score, reason: `below the relevance floor (${score.toFixed(3)} < ${floor})` });
    const html = body(
      renderManifestHtml(
        manifest({
          retrieved: [],
          excluded: [floorItem('s:e1', 0.21, '0.350'), floorItem('s:e2', 0.12, '0.350'), floorItem('snip-1', 0.3, '0.400', 'project')],
          relevance: {
            history: {
              status: 'ok', sent: 0, belowFloor: 2, floor: 0.35, best: 0.21,
              why: 'no candidate reached the relevance floor (best 0.210 < 0.350)',
            },
            project: { status: 'ok', sent: 3, belowFloor: 1, floor: 0.4, best: 0.3, why: null },
            git: { status: 'ok', sent: 0, belowFloor: 0, floor: null, best: null, why: 'nothing matched the request' },
          },
        }),
        { nonce: NONCE },
      ),
    );
    assert.match(html, /<h2>Relevance/);
    assert.match(
      html,
      /<tr><td>history<\/td><td>ok<\/td><td class="num">0<\/td><td class="num">2<\/td><td class="num">0\.350<\/td><td class="num">0\.210<\/td><td>no candidate reached the relevance floor \(best 0\.210 &lt; 0\.350\)<\/td><\/tr>/,
    );
    assert.match(html, /<tr><td>project<\/td><td>ok<\/td><td class="num">3<\/td><td class="num">1<\/td><td class="num">0\.400<\/td><td class="num">0\.300<\/td><td><\/td><\/tr>/);
    assert.match(html, /<tr><td>git<\/td>.*nothing matched the request/);
    assert.match(html, /No history was retrieved for this plan: no candidate reached the relevance floor/);
    // One summary row per floor; the item table keeps each item's own reason.
    assert.match(html, /<tr><td>below the relevance floor \(score &lt; 0\.350\)<\/td><td class="num">2<\/td><td class="num">200<\/td><\/tr>/);
    assert.match(html, /<tr><td>below the relevance floor \(score &lt; 0\.400\)<\/td><td class="num">1<\/td>/);
    assert.match(html, /below the relevance floor \(0\.120 &lt; 0\.350\)/);
    assert.equal(reasonGroup('below the relevance floor (0.210 < 0.350)'), 'below the relevance floor (score < 0.350)');
    assert.equal(
      reasonGroup("below the relative floor (0.520 of the best hit's score < 0.700)"),
      "below the relative floor (share of the best hit's score < 0.700)",
    );
    assert.equal(reasonGroup('oversized turn'), 'oversized turn');
    // A server without the floor: no section.
    assert.doesNotMatch(body(renderManifestHtml(manifest(), { nonce: NONCE })), /<h2>Relevance/);
  });
});
