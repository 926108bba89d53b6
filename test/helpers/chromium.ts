import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import type { BrowserContext, Page } from 'playwright-core';

/** Debian's Chromium (`.ci/run` installs it); playwright-core downloads no browser of its own. */
export const CHROMIUM = '/usr/bin/chromium';

/** A test's `skip` when there is no Chromium here, saying how to get one. */
export const chromiumMissing = existsSync(CHROMIUM)
  ? false
  : `Chromium is not installed at ${CHROMIUM}: apt-get install chromium (.ci/run does) to run the status page tests`;

const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export interface OpenChromium {
  context: BrowserContext;
  page: Page;
  /** Ends the browser and removes its profile. */
  close(): Promise<void>;
}

/** Headless Chromium with a fresh profile in a temporary folder (nothing cached), and its first page. */
export async function openChromium(viewport?: { width: number; height: number }): Promise<OpenChromium> {
  const profile = await mkdtemp(join(tmpdir(), 'troupe-chromium-'));
  let context: BrowserContext;
  try {
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: CHROMIUM_ARGS,
      ...(viewport ? { viewport } : {}),
      timeout: 60_000,
    });
  } catch (err) {
    await rm(profile, { recursive: true, force: true });
    throw err;
  }
  const page = context.pages()[0] ?? (await context.newPage());
  return {
    context,
    page,
    close: async () => {
      await context.close();
      await rm(profile, { recursive: true, force: true });
    },
  };
}
