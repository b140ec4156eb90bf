// Summarises a .cpuprofile: self time per function, top 30.
import { readFileSync, readdirSync } from 'node:fs';
const dir = process.argv[2];
const f = readdirSync(dir).filter((x) => x.endsWith('.cpuprofile')).map((x) => `${dir}/${x}`).sort().pop();
const p = JSON.parse(readFileSync(f, 'utf8'));
const self = new Map(); const byId = new Map(p.nodes.map((n) => [n.id, n])); let tot = 0;
p.samples.forEach((s, i) => { const n = byId.get(s); const k = `${n.callFrame.functionName} ${n.callFrame.url.split('/').slice(-2).join('/')}:${n.callFrame.lineNumber}`; const d = p.timeDeltas[i] ?? 0; self.set(k, (self.get(k) ?? 0) + d); tot += d; });
for (const [k, v] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 30)) console.log(`${(100 * v / tot).toFixed(1)}%  ${k}`);
