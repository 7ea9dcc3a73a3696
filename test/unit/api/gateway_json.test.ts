import { describe, expect, it } from 'vitest';
import { parseGatewayJson, quoteLargeIntegers } from '../../../src/api/gateway_json';

describe('gateway JSON bodies', () => {
  it('keeps int64 literals beyond a double exact, as decimal strings', () => {
    expect(parseGatewayJson('{"ID": 7587862072907489794, "TTL": 30}')).toEqual({ ID: '7587862072907489794', TTL: 30 });
    expect(parseGatewayJson('{"a":[-9223372036854775808,9007199254740993]}')).toEqual({ a: ['-9223372036854775808', '9007199254740993'] });
    // JSON.parse alone would have rounded it.
    expect(String((JSON.parse('{"ID": 7587862072907489794}') as { ID: number }).ID)).not.toBe('7587862072907489794');
  });

  it('leaves safe integers, fractions, exponents and string contents as they are', () => {
    const text = '{"n":9007199254740991,"f":12345678901234567.5,"e":1e300,"E":-12345678901234567E2,"s":"7587862072907489794 \\" 18446744073709551615"}';
    expect(quoteLargeIntegers(text)).toBe(text);
    expect(parseGatewayJson(text)).toEqual(JSON.parse(text));
  });

  it('leaves malformed bodies for JSON.parse to reject', () => {
    expect(() => parseGatewayJson('{"key": "abc')).toThrow(SyntaxError);
    expect(() => parseGatewayJson('{"ID": 75878620729074897940000 x}')).toThrow(SyntaxError);
  });
});
