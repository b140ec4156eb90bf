// A small static server for the demo: serves the package's dist/ and demo/ folders (and nothing else),
// cross-origin isolated (COOP/COEP), because the CPU backend allocates large tensors in SharedArrayBuffers.
//   node demo/server.mjs [port]        then open http://localhost:PORT/demo/
import { createServer } from 'node:http';
import { readFile } from 'node:fs/promises';
import { extname, join, normalize, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const TYPES = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.mjs': 'text/javascript; charset=utf-8',
  '.map': 'application/json', '.json': 'application/json', '.css': 'text/css' };

export function serve(port = 0) {
  const server = createServer(async (req, res) => {
    let path = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
    if (path === '/' || path === '/demo') path = '/demo/';
    if (path === '/favicon.ico') { res.writeHead(204).end(); return; }
    if (path.endsWith('/')) path += 'index.html';
    const file = normalize(join(root, path));
    if (!(file.startsWith(join(root, 'dist') + '/') || file.startsWith(join(root, 'demo') + '/'))) { res.writeHead(404).end(); return; }
    try {
      const body = await readFile(file);
      res.writeHead(200, {
        'content-type': TYPES[extname(file)] ?? 'application/octet-stream', 'cache-control': 'no-store',
        'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp',
      }).end(body);
    } catch { res.writeHead(404).end(); }
  });
  return new Promise((resolve) => server.listen(port, '127.0.0.1', () => resolve(server)));
}

if (process.argv[1] && fileURLToPath(import.meta.url) === normalize(process.argv[1])) {
  const server = await serve(Number(process.argv[2] ?? 8080));
  process.stdout.write(`nbxtensor demo: http://127.0.0.1:${server.address().port}/demo/\n`);
}
