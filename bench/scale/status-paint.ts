import { CHROMIUM, chromiumMissing, openChromium } from '../../test/helpers/chromium.js';

/**
 * Time to first paint of the status page in a real browser: from the navigation's start to the
 * page showing the summary, the first node card and the first actor row (the page is useful from
 * then). The browser is started before the clock starts; its profile is fresh, so nothing is
 * cached. Null, with why, when there is no Chromium here.
 */
export async function statusFirstPaintMs(url: string): Promise<{ ms: number | null; error: string | null }> {
  if (chromiumMissing) return { ms: null, error: `no Chromium at ${CHROMIUM}` };
  const browser = await openChromium({ width: 1440, height: 900 });
  try {
    const { page } = browser;
    const start = performance.now();
    await page.goto(url, { waitUntil: 'commit', timeout: 60_000 });
    await Promise.all(
      ['#nodes-alive', '[data-node]', 'tr[data-actor]'].map((selector) => page.locator(selector).first().waitFor({ timeout: 60_000 })),
    );
    return { ms: Math.round(performance.now() - start), error: null };
  } catch (err) {
    return { ms: null, error: (err as Error).message.split('\n')[0]! };
  } finally {
    await browser.close();
  }
}
