import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

/** Debian's Chromium, as test/e2e/status-page.test.ts finds it. */
const CHROMIUM = '/usr/bin/chromium';

/**
 * Time to first paint of the status page in a real browser: from the navigation's start to the
 * page showing the summary, the first node card and the first actor row (the page is useful from
 * then). The browser is started before the clock starts; its profile is fresh, so nothing is
 * cached. Null, with why, when there is no Chromium here.
 */
export async function statusFirstPaintMs(url: string): Promise<{ ms: number | null; error: string | null }> {
  if (!existsSync(CHROMIUM)) return { ms: null, error: `no Chromium at ${CHROMIUM}` };
  const profile = await mkdtemp(join(tmpdir(), 'troupe-scale-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-sync'],
    viewport: { width: 1440, height: 900 },
    timeout: 60_000,
  });
  try {
    const page = context.pages()[0] ?? (await context.newPage());
    const start = performance.now();
    await page.goto(url, { waitUntil: 'commit', timeout: 60_000 });
    await Promise.all(
      ['#nodes-alive', '[data-node]', 'tr[data-actor]'].map((selector) => page.locator(selector).first().waitFor({ timeout: 60_000 })),
    );
    return { ms: Math.round(performance.now() - start), error: null };
  } catch (err) {
    return { ms: null, error: (err as Error).message.split('\n')[0]! };
  } finally {
    await context.close();
    await rm(profile, { recursive: true, force: true });
  }
}
