/**
 * GET /console: the operator console, a static page (src/api/console/: HTML, one script, one stylesheet) that holds
 * no data. It asks for an operator key and reads everything through the JSON API with it, so the page itself is
 * public and every number on it comes through the same access rules as any other caller's.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { access } from '../../core/auth/caller';
import { describeOnly } from './openapi';

/**
 * Only this origin's script and stylesheet run, the page talks only to this origin, and nothing may frame it:
 * no inline script, so data rendered by mistake as markup could not run either.
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const FILES = [
  { url: '/console', file: 'index.html', type: 'text/html; charset=utf-8' },
  { url: '/console/task-page.js', file: 'task-page.js', type: 'text/javascript; charset=utf-8' },
  { url: '/console/console.js', file: 'console.js', type: 'text/javascript; charset=utf-8' },
  { url: '/console/console.css', file: 'console.css', type: 'text/css; charset=utf-8' },
];

export async function consoleRoutes(app: FastifyInstance): Promise<void> {
  describeOnly(app);
  for (const { url, file, type } of FILES) {
    // Read once at start-up: a missing file stops the server from starting rather than failing a request.
    const body = readFileSync(join(__dirname, '..', 'console', file));
    const schema = { tags: ['console'], summary: `The operator console: ${file} (static; it holds no data and reads the API with the key you give it)`, response: { 200: { description: type } } };
    app.get(url, { config: access.public, schema }, async (_req, reply) =>
      reply
        .type(type)
        .header('content-security-policy', CONSOLE_CSP)
        .header('x-content-type-options', 'nosniff')
        .header('referrer-policy', 'no-referrer')
        .header('cache-control', 'no-cache')
        .send(body),
    );
  }
}
