import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { TroupeError } from '../../runtime/internal.js';

/**
 * The files the status page is made of, all served by the head so it works with no internet: the
 * HTML shell and stylesheet (copied to dist/ by the build), the page's own modules (compiled from
 * client/ by the build), and uPlot and dagre straight from their npm packages.
 */

export interface Asset {
  body: Buffer;
  type: string;
}

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
};

/** Where each fixed asset path comes from; resolved on first use, so a missing package fails loudly then. */
const FIXED: Record<string, () => string> = {
  'style.css': () => join(here, 'static', 'style.css'),
  'favicon.svg': () => join(here, 'static', 'favicon.svg'),
  'vendor/uplot.js': () => join(dirname(require.resolve('uplot')), 'uPlot.esm.js'),
  'vendor/uplot.css': () => join(dirname(require.resolve('uplot')), 'uPlot.min.css'),
  'vendor/dagre.js': () => join(dirname(require.resolve('@dagrejs/dagre')), 'dagre.esm.js'),
};

/** The page's compiled modules: a flat folder of plain names, so no path can leave it. */
const APP_FILE = /^app\/([a-z][a-z0-9-]{0,63}\.js(?:\.map)?)$/;

export class StatusAssets {
  readonly #cache = new Map<string, Asset>();
  #page: { html: Buffer; csp: string } | undefined;

  /** An asset under /status/assets/, or undefined when there is none of that name. */
  async get(name: string): Promise<Asset | undefined> {
    const cached = this.#cache.get(name);
    if (cached) return cached;
    const app = APP_FILE.exec(name);
    // Own keys only: `__proto__`, `constructor` or `toString` are on every object, and are no asset.
    const file = app ? join(here, 'client', app[1]!) : Object.hasOwn(FIXED, name) ? FIXED[name]!() : undefined;
    if (!file) return undefined;
    let body: Buffer;
    try {
      body = await readFile(file);
    } catch (err) {
      // Whatever the reason (no such module, a name too long for the file system), no asset; and
      // never the server's own paths in an answer: a 300-character name once answered 500 with one.
      if (app) return undefined;
      throw new TroupeError(
        'TROUPE_ERR_INTERNAL',
        `the status page's asset '${name}' cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
      );
    }
    const ext = file.slice(file.lastIndexOf('.'));
    const asset = { body, type: Object.hasOwn(TYPES, ext) ? TYPES[ext]! : 'application/octet-stream' };
    this.#cache.set(name, asset);
    return asset;
  }

  /**
   * The page itself and its Content-Security-Policy: scripts only from the head plus the page's
   * one inline import map (allowed by its hash), connections only back to the head.
   */
  async page(): Promise<{ html: Buffer; csp: string }> {
    if (this.#page) return this.#page;
    const html = await readFile(join(here, 'static', 'index.html'));
    const importMap = /<script type="importmap">([\s\S]*?)<\/script>/.exec(html.toString('utf8'))?.[1] ?? '';
    const hash = createHash('sha256').update(importMap).digest('base64');
    const csp = [
      "default-src 'self'",
      `script-src 'self' 'sha256-${hash}'`,
      // Bars and chart legends set widths and colours inline.
      "style-src 'self' 'unsafe-inline'",
      "img-src 'self' data:",
      "connect-src 'self'",
      "frame-ancestors 'none'",
      "base-uri 'none'",
      "form-action 'self'",
    ].join('; ');
    this.#page = { html, csp };
    return this.#page;
  }
}
