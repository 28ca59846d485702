// What `rlx serve` trusts (docs/serve.md, "Security"): a bearer API key on every route but
// /health, and, on policy servers, weight directories only under the root given at start.
// Without these, anyone who can reach the port of `rlx serve --host 0.0.0.0 --policy` could
// make it load any directory on the machine as weights.
import { createHash, timingSafeEqual } from "node:crypto";
import { existsSync, realpathSync } from "node:fs";
import { resolve, sep } from "node:path";

/** The environment variable `rlx serve` reads its API key from (and `rlx eval` sends). */
export const API_KEY_ENV = "RLX_API_KEY";

/** True when the request carries `Authorization: Bearer <key>` (compared in constant time). */
export function hasApiKey(request: Request, key: string): boolean {
  const header = request.headers.get("authorization") ?? "";
  const match = /^Bearer\s+(.+)$/i.exec(header.trim());
  if (!match) return false;
  // equal-length digests, so the comparison's time says nothing about the key
  const digest = (s: string) => createHash("sha256").update(s).digest();
  return timingSafeEqual(digest(match[1]!), digest(key));
}

/** Addresses only this machine can reach: 127.0.0.0/8, ::1, localhost. */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "").toLowerCase();
  return h === "localhost" || h === "::1" || /^127(\.\d{1,3}){3}$/.test(h) || h === "::ffff:127.0.0.1";
}

/**
 * True when `path` is `root` or lies under it, after following every symlink (a link under the
 * root that points elsewhere is outside). A path that does not exist is judged by its name: there
 * is nothing there to load, and the caller's "not a directory" answer is the useful one.
 */
export function isUnderRoot(path: string, root: string): boolean {
  const [target, base] = existsSync(path) ? [realpathSync(path), realpathSync(root)] : [resolve(path), resolve(root)];
  return target === base || target.startsWith(base.endsWith(sep) ? base : base + sep);
}
