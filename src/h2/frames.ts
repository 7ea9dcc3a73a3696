// HTTP/2 framing constants (RFC 9113 sections 6 and 7) and the frame header codec.

/** The client connection preface (section 3.4). */
export const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

export const FRAME_HEADER_BYTES = 9;

export const enum FrameType {
  DATA = 0x0,
  HEADERS = 0x1,
  PRIORITY = 0x2,
  RST_STREAM = 0x3,
  SETTINGS = 0x4,
  PUSH_PROMISE = 0x5,
  PING = 0x6,
  GOAWAY = 0x7,
  WINDOW_UPDATE = 0x8,
  CONTINUATION = 0x9,
}

export const FLAG_END_STREAM = 0x1;
export const FLAG_ACK = 0x1;
export const FLAG_END_HEADERS = 0x4;
export const FLAG_PADDED = 0x8;
export const FLAG_PRIORITY = 0x20;

export const enum Setting {
  HEADER_TABLE_SIZE = 0x1,
  ENABLE_PUSH = 0x2,
  MAX_CONCURRENT_STREAMS = 0x3,
  INITIAL_WINDOW_SIZE = 0x4,
  MAX_FRAME_SIZE = 0x5,
  MAX_HEADER_LIST_SIZE = 0x6,
}

/** Error codes (section 7); the names Node's http2 constants use, minus the prefix. */
export const enum ErrorCode {
  NO_ERROR = 0x0,
  PROTOCOL_ERROR = 0x1,
  INTERNAL_ERROR = 0x2,
  FLOW_CONTROL_ERROR = 0x3,
  SETTINGS_TIMEOUT = 0x4,
  STREAM_CLOSED = 0x5,
  FRAME_SIZE_ERROR = 0x6,
  REFUSED_STREAM = 0x7,
  CANCEL = 0x8,
  COMPRESSION_ERROR = 0x9,
  CONNECT_ERROR = 0xa,
  ENHANCE_YOUR_CALM = 0xb,
  INADEQUATE_SECURITY = 0xc,
  HTTP_1_1_REQUIRED = 0xd,
}

/** The protocol's defaults and ceilings (section 6.5.2, 6.9.1). */
export const DEFAULT_WINDOW_BYTES = 65_535;
export const MAX_WINDOW_BYTES = 2 ** 31 - 1;
export const DEFAULT_MAX_FRAME_BYTES = 16_384;
export const MAX_FRAME_BYTES_CEILING = 2 ** 24 - 1;

/** A frame header for a payload of `length` bytes. */
export function frameHeader(length: number, type: FrameType, flags: number, streamId: number): Buffer {
  const b = Buffer.allocUnsafe(FRAME_HEADER_BYTES);
  writeFrameHeader(b, 0, length, type, flags, streamId);
  return b;
}

export function writeFrameHeader(b: Buffer, at: number, length: number, type: FrameType, flags: number, streamId: number): void {
  b[at] = (length >>> 16) & 0xff;
  b[at + 1] = (length >>> 8) & 0xff;
  b[at + 2] = length & 0xff;
  b[at + 3] = type;
  b[at + 4] = flags;
  b.writeUInt32BE(streamId & 0x7fffffff, at + 5);
}

/** A whole frame with its payload copied in. */
export function frame(type: FrameType, flags: number, streamId: number, payload: Buffer): Buffer {
  const b = Buffer.allocUnsafe(FRAME_HEADER_BYTES + payload.length);
  writeFrameHeader(b, 0, payload.length, type, flags, streamId);
  payload.copy(b, FRAME_HEADER_BYTES);
  return b;
}

/** A frame whose payload is one 32-bit integer (RST_STREAM, WINDOW_UPDATE). */
export function u32Frame(type: FrameType, streamId: number, value: number): Buffer {
  const b = Buffer.allocUnsafe(FRAME_HEADER_BYTES + 4);
  writeFrameHeader(b, 0, 4, type, 0, streamId);
  b.writeUInt32BE(value >>> 0, FRAME_HEADER_BYTES);
  return b;
}
