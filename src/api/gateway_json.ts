// JSON request bodies for the gateway, read without losing int64 precision.
//
// grpc-gateway (Go's jsonpb) reads an int64 field written as a bare JSON number exactly; JSON.parse
// turns it into a double, and a lease ID such as 7587862072907489794 comes back as
// 7587862072907489792: a keep-alive or revoke of a lease that does not exist. Integer literals too
// large for a double are turned into JSON strings before parsing; protobufjs reads an int64 field
// from a decimal string exactly, as jsonpb accepts one too.

/** Digits of Number.MAX_SAFE_INTEGER (9007199254740991): shorter integers are exact as doubles. */
const SAFE_DIGITS = 16;

function isDigit(c: number): boolean {
  return c >= 0x30 && c <= 0x39;
}

/** Integer literals outside the double's exact range, quoted; everything else as written. */
export function quoteLargeIntegers(text: string): string {
  let out = '';
  let copied = 0;
  let i = 0;
  const n = text.length;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      // Skip the string, escapes included; an unterminated one is JSON.parse's to reject.
      i++;
      while (i < n) {
        const d = text.charCodeAt(i);
        if (d === 0x5c /* \ */) i += 2;
        else if (d === 0x22) break;
        else i++;
      }
      i++;
      continue;
    }
    if (c !== 0x2d /* - */ && !isDigit(c)) {
      i++;
      continue;
    }
    const start = i;
    if (c === 0x2d) i++;
    const digitsStart = i;
    while (i < n && isDigit(text.charCodeAt(i))) i++;
    const digits = i - digitsStart;
    let integer = true;
    while (i < n) {
      const d = text.charCodeAt(i);
      if (d === 0x2e /* . */ || d === 0x65 /* e */ || d === 0x45 /* E */ || d === 0x2b /* + */ || d === 0x2d) {
        integer = false;
        i++;
      } else if (isDigit(d)) {
        i++;
      } else {
        break;
      }
    }
    if (!integer || digits < SAFE_DIGITS) continue;
    const literal = text.slice(start, i);
    if (Number.isSafeInteger(Number(literal))) continue;
    out += text.slice(copied, start) + '"' + literal + '"';
    copied = i;
  }
  return copied === 0 ? text : out + text.slice(copied);
}

/** JSON.parse, with int64-sized integer literals kept exact (as decimal strings). */
export function parseGatewayJson(text: string): unknown {
  return JSON.parse(quoteLargeIntegers(text));
}
