// Reads a file with speedscope's own importer and prints what it understood, as JSON:
// {"importer": the log line naming the importer, "total": total weight,
//  "stacks": [[frames root first joined by ";", self weight], ...]} from the grouped
// (left-heavy) call tree, which merges equal stacks.
//   node speedscope_import.mjs <speedscope package dir> <profile file> <file name to report>
// Used by tests/unit/collapsed_stacks_test.cpp and python/tests/test_python_stacks.py.
//
// speedscope's npm package ships only its browser bundle; the CLI opens a browser. The script
// loads the bundle into a Node vm context with the few browser globals its top level touches,
// and exposes the lazily-initialized importer module (the object with
// importProfileGroupFromText) by adding one assignment after the promise that resolves to it.
// The bundle then stops where it starts the user interface (no `document`), after the point
// that matters. Written against speedscope 1.25.0: the bundle's layout is not an API.
import fs from 'node:fs';
import path from 'node:path';
import vm from 'node:vm';

const [packageDir, profilePath, fileName] = process.argv.slice(2);
const release = path.join(packageDir, 'dist', 'release');
const bundle = fs.readdirSync(release).find(f => /^speedscope-.*\.js$/.test(f));
if (!bundle) { console.error('no speedscope bundle in ' + release); process.exit(3); }
let source = fs.readFileSync(path.join(release, bundle), 'utf8');
const lazy = /var (\w+)=Promise\.resolve\(\)\.then\(\(\)=>\(\w+\(\),\w+\)\);/g;
let match;
while ((match = lazy.exec(source)) !== null) {
  const at = match.index + match[0].length;
  source = source.slice(0, at) + `globalThis.__importers.push(${match[1]});` + source.slice(at);
  lazy.lastIndex = at;
}
const logs = [];
const sandbox = {
  console: {
    log: (...a) => logs.push(a.join(' ')),
    error: (...a) => logs.push(a.join(' ')),
    warn: () => {},
  },
  location: { hash: '', search: '', href: 'file:///speedscope/index.html', protocol: 'file:' },
  navigator: { userAgent: 'node', platform: 'Linux' },
  matchMedia: () => ({ matches: false, addEventListener() {}, removeEventListener() {},
                       addListener() {}, removeListener() {} }),
  localStorage: { getItem: () => null, setItem() {}, removeItem() {} },
  addEventListener() {}, removeEventListener() {}, requestAnimationFrame: () => 0,
  TextDecoder, TextEncoder, URL, atob, btoa, setTimeout, clearTimeout,
  __importers: [],
};
sandbox.globalThis = sandbox; sandbox.window = sandbox; sandbox.self = sandbox;
vm.createContext(sandbox);
try { vm.runInContext(source, sandbox); } catch (e) { /* the user interface needs a DOM */ }
let importer = null;
for (const p of sandbox.__importers) {
  const m = await p;
  if (m && typeof m.importProfileGroupFromText === 'function') importer = m;
}
if (!importer) { console.error('speedscope importer not found in ' + bundle); process.exit(3); }
const text = fs.readFileSync(profilePath, 'utf8');
const group = await importer.importProfileGroupFromText(fileName, text);
if (!group || group.profiles.length !== 1) {
  console.error('speedscope did not import the file: ' + logs.join(' | '));
  process.exit(4);
}
const profile = group.profiles[0];
const stacks = [];
const walk = (node, prefix) => {
  for (const child of node.children) {
    const frames = prefix.concat([child.frame.name]);
    if (child.getSelfWeight() > 0) stacks.push([frames.join(';'), child.getSelfWeight()]);
    walk(child, frames);
  }
};
walk(profile.getGroupedCalltreeRoot(), []);
const importerLog = logs.find(l => l.startsWith('Importing')) || '';
console.log(JSON.stringify({ importer: importerLog, total: profile.getTotalWeight(), stacks }));
