// The wait before each restart of `rlx train --max-restarts N` (src/orchestrator/restarts.ts).
import { expect, test } from "bun:test";
import { backoffSeconds, MAX_BACKOFF_S } from "../../../src/orchestrator/restarts.ts";

test("the backoff starts at restart_backoff_s, doubles, and stops at MAX_BACKOFF_S", () => {
  expect([1, 2, 3, 4].map((n) => backoffSeconds(n, 5))).toEqual([5, 10, 20, 40]);
  expect(backoffSeconds(10, 5)).toBe(MAX_BACKOFF_S);
  expect(backoffSeconds(3, 0)).toBe(0);
});
