// A small YAML reader for etcd configuration files: block mappings (nested by indentation),
// block and flow sequences of scalars, plain/quoted scalars and comments. etcd decodes the file
// with YAML 1.1 rules (sigs.k8s.io/yaml), so yes/no/on/off are booleans too. Anything richer
// (anchors, multi-line scalars, several documents) is rejected with the line number.

export type YamlValue = string | number | boolean | null | YamlValue[] | { [key: string]: YamlValue };

export class YamlError extends Error {}

interface Line {
  no: number;
  indent: number;
  text: string;
}

const MAX_LINES = 100_000;

function stripComment(s: string): string {
  let quote: string | undefined;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (quote !== undefined) {
      if (c === quote) quote = undefined;
      else if (c === '\\' && quote === '"') i++;
      continue;
    }
    if (c === '"' || c === "'") quote = c;
    else if (c === '#' && (i === 0 || s[i - 1] === ' ' || s[i - 1] === '\t')) return s.slice(0, i);
  }
  return s;
}

function unclosedBracket(s: string): boolean {
  let depth = 0;
  let quote: string | undefined;
  for (const c of s) {
    if (quote !== undefined) {
      if (c === quote) quote = undefined;
    } else if (c === '"' || c === "'") quote = c;
    else if (c === '[') depth++;
    else if (c === ']') depth--;
  }
  return depth > 0;
}

function scalar(raw: string, no: number): YamlValue {
  const s = raw.trim();
  if (s.startsWith('"')) {
    if (!s.endsWith('"') || s.length < 2) throw new YamlError(`yaml: line ${no}: found unexpected end of stream`);
    try {
      return JSON.parse(s) as string;
    } catch {
      throw new YamlError(`yaml: line ${no}: found unknown escape character`);
    }
  }
  if (s.startsWith("'")) {
    if (!s.endsWith("'") || s.length < 2) throw new YamlError(`yaml: line ${no}: found unexpected end of stream`);
    return s.slice(1, -1).replace(/''/g, "'");
  }
  if (/^[&*!|>]/.test(s)) throw new YamlError(`yaml: line ${no}: unsupported YAML construct in configuration file`);
  if (s === '' || s === '~' || s === 'null' || s === 'Null' || s === 'NULL') return null;
  if (/^(true|True|TRUE|yes|Yes|YES|on|On|ON|y|Y)$/.test(s)) return true;
  if (/^(false|False|FALSE|no|No|NO|off|Off|OFF|n|N)$/.test(s)) return false;
  if (/^[-+]?(0|[1-9][0-9_]*)$/.test(s)) return Number(s.replace(/_/g, ''));
  if (/^0x[0-9a-fA-F_]+$/.test(s)) return Number(s.replace(/_/g, ''));
  if (/^[-+]?([0-9][0-9_]*)?\.[0-9_]+([eE][-+][0-9]+)?$/.test(s)) return Number(s.replace(/_/g, ''));
  return s;
}

function flowSequence(s: string, no: number): YamlValue[] {
  const inner = s.trim().slice(1, -1).trim();
  if (inner === '') return [];
  const out: YamlValue[] = [];
  let cur = '';
  let quote: string | undefined;
  for (const c of inner) {
    if (quote !== undefined) {
      cur += c;
      if (c === quote) quote = undefined;
    } else if (c === '"' || c === "'") {
      quote = c;
      cur += c;
    } else if (c === ',') {
      out.push(scalar(cur, no));
      cur = '';
    } else if (c === '[' || c === '{') {
      throw new YamlError(`yaml: line ${no}: nested collections are not supported in configuration file`);
    } else cur += c;
  }
  out.push(scalar(cur, no));
  return out;
}

function value(raw: string, no: number): YamlValue {
  const s = raw.trim();
  if (s.startsWith('[')) {
    if (!s.endsWith(']')) throw new YamlError(`yaml: line ${no}: did not find expected ',' or ']'`);
    return flowSequence(s, no);
  }
  if (s.startsWith('{')) {
    if (s === '{}') return {};
    throw new YamlError(`yaml: line ${no}: flow mappings are not supported in configuration file`);
  }
  return scalar(s, no);
}

function splitKey(text: string, no: number): [string, string] {
  let key: string;
  let rest: string;
  if (text.startsWith('"') || text.startsWith("'")) {
    const end = text.indexOf(text[0], 1);
    if (end < 0 || text[end + 1] !== ':') throw new YamlError(`yaml: line ${no}: could not find expected ':'`);
    key = text.slice(1, end);
    rest = text.slice(end + 2);
  } else {
    const m = /^([^:]*?):(\s|$)/.exec(text);
    if (m === null) throw new YamlError(`yaml: line ${no}: could not find expected ':'`);
    key = m[1].trim();
    rest = text.slice(m[0].length);
  }
  return [key, rest];
}

function parseBlock(lines: Line[], start: number, indent: number): [YamlValue, number] {
  const first = lines[start];
  if (first.text.startsWith('- ') || first.text === '-') {
    const seq: YamlValue[] = [];
    let i = start;
    while (i < lines.length && lines[i].indent === indent && (lines[i].text.startsWith('- ') || lines[i].text === '-')) {
      const item = lines[i].text.slice(1).trim();
      if (/^[^'"[{]*:(\s|$)/.test(item)) throw new YamlError(`yaml: line ${lines[i].no}: sequences of mappings are not supported in configuration file`);
      seq.push(value(item, lines[i].no));
      i++;
    }
    return [seq, i];
  }
  const map: { [key: string]: YamlValue } = {};
  let i = start;
  while (i < lines.length && lines[i].indent === indent) {
    const { no, text } = lines[i];
    const [key, rest] = splitKey(text, no);
    i++;
    if (rest.trim() !== '') {
      map[key] = value(rest, no);
      continue;
    }
    if (i < lines.length && (lines[i].indent > indent || (lines[i].indent === indent && lines[i].text.startsWith('- ')))) {
      const [v, next] = parseBlock(lines, i, lines[i].indent);
      map[key] = v;
      i = next;
    } else {
      map[key] = null;
    }
  }
  if (i < lines.length && lines[i].indent > indent) {
    throw new YamlError(`yaml: line ${lines[i].no}: mapping values are not allowed in this context`);
  }
  return [map, i];
}

export function parseYaml(text: string): { [key: string]: YamlValue } {
  const lines: Line[] = [];
  const raw = text.replace(/^\uFEFF/, '').split(/\r?\n/);
  if (raw.length > MAX_LINES) throw new YamlError('yaml: configuration file too long');
  for (let n = 0; n < raw.length; n++) {
    const l = raw[n];
    if (/^(---|\.\.\.)\s*$/.test(l)) {
      if (lines.length === 0) continue;
      throw new YamlError(`yaml: line ${n + 1}: multiple documents are not supported in configuration file`);
    }
    if (/^\t/.test(l)) throw new YamlError(`yaml: line ${n + 1}: found character that cannot start any token`);
    let body = stripComment(l).trimEnd();
    if (body.trim() === '') continue;
    const indent = body.length - body.trimStart().length;
    const no = n + 1;
    // A flow sequence may continue over several lines until its closing bracket.
    while (unclosedBracket(body)) {
      n++;
      if (n >= raw.length) throw new YamlError(`yaml: line ${no}: did not find expected ',' or ']'`);
      body += ' ' + stripComment(raw[n]).trim();
    }
    lines.push({ no, indent, text: body.trim() });
  }
  if (lines.length === 0) return {};
  const [v, next] = parseBlock(lines, 0, lines[0].indent);
  if (next < lines.length) throw new YamlError(`yaml: line ${lines[next].no}: did not find expected key`);
  if (v === null || typeof v !== 'object' || Array.isArray(v)) {
    throw new YamlError('error unmarshaling JSON: json: cannot unmarshal array into Go value of type embed.configYAML');
  }
  return v;
}
