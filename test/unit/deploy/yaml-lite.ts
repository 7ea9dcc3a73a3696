// Just enough YAML to check our deploy/ manifests (no YAML package is installed): documents split
// by ---, block mappings and sequences (items may be mappings), block scalars (| |- >), flow
// sequences/mappings of scalars, quoted and plain scalars, comments. Anything else is an error,
// so a manifest that parses here uses only plain, portable YAML.

export type Yaml = string | number | boolean | null | Yaml[] | { [k: string]: Yaml };

interface Line {
  no: number;
  indent: number;
  /** Without the indentation and trailing comment. */
  text: string;
  raw: string;
}

const MAX_DEPTH = 64;

function stripComment(s: string): string {
  let q: string | undefined;
  for (let i = 0; i < s.length; i++) {
    const c = s[i]!;
    if (q !== undefined) {
      if (c === '\\' && q === '"') i++;
      else if (c === q) q = undefined;
    } else if (c === '"' || c === "'") {
      if (i === 0 || /[\s:[{,-]/.test(s[i - 1]!)) q = c;
    } else if (c === '#' && (i === 0 || /\s/.test(s[i - 1]!))) {
      return s.slice(0, i);
    }
  }
  return s;
}

function splitTopLevel(s: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let q: string | undefined;
  let cur = '';
  for (const c of s) {
    if (q !== undefined) {
      if (c === q) q = undefined;
      cur += c;
      continue;
    }
    if (c === '"' || c === "'") q = c;
    if (c === '[' || c === '{') depth++;
    if (c === ']' || c === '}') depth--;
    if (c === ',' && depth === 0) {
      out.push(cur.trim());
      cur = '';
      continue;
    }
    cur += c;
  }
  if (cur.trim() !== '') out.push(cur.trim());
  return out;
}

function scalar(raw: string, no: number): Yaml {
  const s = raw.trim();
  if (s.startsWith('"')) {
    if (!s.endsWith('"') || s.length < 2) throw new Error(`line ${no}: unterminated string`);
    return JSON.parse(s) as string;
  }
  if (s.startsWith("'")) {
    if (!s.endsWith("'") || s.length < 2) throw new Error(`line ${no}: unterminated string`);
    return s.slice(1, -1).replace(/''/g, "'");
  }
  if (s.startsWith('[')) {
    if (!s.endsWith(']')) throw new Error(`line ${no}: unterminated flow sequence`);
    return splitTopLevel(s.slice(1, -1)).map((x) => scalar(x, no));
  }
  if (s.startsWith('{')) {
    if (!s.endsWith('}')) throw new Error(`line ${no}: unterminated flow mapping`);
    const o: Record<string, Yaml> = {};
    for (const part of splitTopLevel(s.slice(1, -1))) {
      const i = part.indexOf(':');
      if (i < 0) throw new Error(`line ${no}: bad flow mapping entry ${part}`);
      o[String(scalar(part.slice(0, i), no))] = scalar(part.slice(i + 1), no);
    }
    return o;
  }
  if (/^[&*!%@`]/.test(s)) throw new Error(`line ${no}: unsupported YAML construct ${s}`);
  if (s === '' || s === '~' || s === 'null') return null;
  if (s === 'true') return true;
  if (s === 'false') return false;
  if (/^-?(0|[1-9][0-9]*)$/.test(s)) return Number(s);
  if (/^-?[0-9]+\.[0-9]+$/.test(s)) return Number(s);
  return s;
}

/** Index of the ':' that ends a mapping key (followed by space or end), outside quotes; -1 if none. */
function keyColon(text: string): number {
  let q: string | undefined;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (q !== undefined) {
      if (c === q) q = undefined;
      continue;
    }
    if ((c === '"' || c === "'") && i === 0) q = c;
    else if (c === '[' || c === '{') return -1;
    else if (c === ':' && (i + 1 === text.length || text[i + 1] === ' ')) return i;
  }
  return -1;
}

class Parser {
  private i = 0;
  constructor(private readonly lines: Line[]) {}

  private peek(): Line | undefined {
    while (this.i < this.lines.length && this.lines[this.i]!.text === '') this.i++;
    return this.lines[this.i];
  }

  parseDocument(): Yaml {
    const first = this.peek();
    if (first === undefined) return null;
    const v = this.block(first.indent, 0);
    const rest = this.peek();
    if (rest !== undefined) throw new Error(`line ${rest.no}: unexpected indentation`);
    return v;
  }

  private block(indent: number, depth: number): Yaml {
    if (depth > MAX_DEPTH) throw new Error('nesting too deep');
    const l = this.peek();
    if (l === undefined) return null;
    if (l.text === '-' || l.text.startsWith('- ')) return this.sequence(indent, depth);
    return this.mapping(indent, depth);
  }

  private sequence(indent: number, depth: number): Yaml[] {
    const out: Yaml[] = [];
    for (;;) {
      const l = this.peek();
      if (l === undefined || l.indent !== indent || !(l.text === '-' || l.text.startsWith('- '))) break;
      const rest = l.text === '-' ? '' : l.text.slice(2);
      const restTrim = rest.trimStart();
      const innerIndent = indent + 2 + (rest.length - restTrim.length);
      if (restTrim === '') {
        this.i++;
        const next = this.peek();
        out.push(next !== undefined && next.indent > indent ? this.block(next.indent, depth + 1) : null);
      } else if (restTrim.startsWith('- ') || keyColon(restTrim) > 0) {
        // "- key: v" opens a mapping (or "- - x" a sequence) whose column is the item's.
        this.lines[this.i] = { ...l, indent: innerIndent, text: restTrim };
        out.push(this.block(innerIndent, depth + 1));
      } else {
        this.i++;
        out.push(this.inlineValue(restTrim, l, indent));
      }
    }
    return out;
  }

  private mapping(indent: number, depth: number): Record<string, Yaml> {
    const out: Record<string, Yaml> = {};
    for (;;) {
      const l = this.peek();
      if (l === undefined || l.indent !== indent) break;
      if (l.text.startsWith('- ')) break;
      const c = keyColon(l.text);
      if (c <= 0) throw new Error(`line ${l.no}: expected "key: value", got ${JSON.stringify(l.text)}`);
      const key = String(scalar(l.text.slice(0, c), l.no));
      if (Object.prototype.hasOwnProperty.call(out, key)) throw new Error(`line ${l.no}: duplicate key ${key}`);
      const rest = l.text.slice(c + 1).trim();
      this.i++;
      if (rest === '') {
        const next = this.peek();
        if (next !== undefined && next.indent > indent) out[key] = this.block(next.indent, depth + 1);
        else if (next !== undefined && next.indent === indent && next.text.startsWith('- ')) out[key] = this.sequence(indent, depth + 1);
        else out[key] = null;
      } else {
        out[key] = this.inlineValue(rest, l, indent);
      }
    }
    return out;
  }

  private inlineValue(rest: string, l: Line, parentIndent: number): Yaml {
    const m = /^([|>])([+-]?)$/.exec(rest);
    if (!m) return scalar(rest, l.no);
    // Block scalar: the raw lines indented deeper than the parent.
    const body: string[] = [];
    let blockIndent = -1;
    while (this.i < this.lines.length) {
      const r = this.lines[this.i]!;
      const blank = r.raw.trim() === '';
      const ind = r.raw.length - r.raw.trimStart().length;
      if (!blank && ind <= parentIndent) break;
      if (!blank && blockIndent < 0) blockIndent = ind;
      body.push(blank ? '' : r.raw.slice(blockIndent));
      this.i++;
    }
    while (body.length > 0 && body[body.length - 1] === '') body.pop();
    const text = m[1] === '|' ? body.join('\n') : body.join(' ');
    return m[2] === '-' ? text : `${text}\n`;
  }
}

export function parseYamlDocuments(src: string): Yaml[] {
  const docs: Line[][] = [[]];
  src.split('\n').forEach((raw, idx) => {
    if (/^---\s*$/.test(raw)) {
      docs.push([]);
      return;
    }
    if (raw.includes('\t') && raw.trimStart() !== raw && raw.slice(0, raw.length - raw.trimStart().length).includes('\t')) {
      throw new Error(`line ${idx + 1}: tab in indentation`);
    }
    const indent = raw.length - raw.trimStart().length;
    docs[docs.length - 1]!.push({ no: idx + 1, indent, text: stripComment(raw).trim(), raw });
  });
  return docs
    .map((lines) => new Parser(lines).parseDocument())
    .filter((d) => d !== null);
}

export function parseYaml(src: string): Yaml {
  const docs = parseYamlDocuments(src);
  if (docs.length !== 1) throw new Error(`expected one YAML document, found ${docs.length}`);
  return docs[0]!;
}
