/**
 * Parse JSON printed by Go tools, keeping integers above 2^53 (cluster/member/lease IDs) exact
 * by turning every integer of 16+ digits into a string.
 */
export function parseGoJson<T = Record<string, unknown>>(text: string): T {
  return JSON.parse(text.replace(/([:\[,]\s*)(-?\d{16,})(?=\s*[,}\]])/g, '$1"$2"')) as T;
}
