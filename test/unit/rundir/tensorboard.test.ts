// The event-file pieces: CRC-32C against published check values (RFC 3720 B.4 and the
// "123456789" check), TFRecord framing read back by hand, and a tracker that cannot write warns
// once and never throws (a run goes on without it).
import { expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TensorBoardLog } from "../../../src/rundir/tensorboard.ts";
import { crc32c, maskedCrc32c, tfRecord } from "../../../src/rundir/tfevents.ts";

test("CRC-32C matches its published check values", () => {
  expect(crc32c(new TextEncoder().encode("123456789"))).toBe(0xe3069283);
  expect(crc32c(new Uint8Array(32))).toBe(0x8a9136aa);
  expect(crc32c(new Uint8Array(32).fill(0xff))).toBe(0x62a8ab43);
  expect(crc32c(Uint8Array.from({ length: 32 }, (_, i) => i))).toBe(0x46dd794e);
});

test("a TFRecord is length, masked CRC of the length, data, masked CRC of the data", () => {
  const data = new TextEncoder().encode("some event bytes");
  const record = tfRecord(data);
  const view = new DataView(record.buffer);
  expect(record.length).toBe(16 + data.length);
  expect(view.getBigUint64(0, true)).toBe(BigInt(data.length));
  expect(view.getUint32(8, true)).toBe(maskedCrc32c(record.subarray(0, 8)));
  expect(record.subarray(12, 12 + data.length)).toEqual(data);
  expect(view.getUint32(12 + data.length, true)).toBe(maskedCrc32c(data));
  const crc = crc32c(data);
  expect(maskedCrc32c(data)).toBe(((((crc >>> 15) | (crc << 17)) >>> 0) + 0xa282ead8) >>> 0);
});

test("a tracker that cannot write warns once and goes quiet", () => {
  const runDir = mkdtempSync(join(tmpdir(), "rlx-tb-"));
  writeFileSync(join(runDir, "tensorboard"), "a file where the folder should be");
  const warnings: string[] = [];
  const tracker = TensorBoardLog.open(runDir, (line) => warnings.push(line));
  tracker.scalars(1, { step: 1, loss: 0.5 });
  tracker.texts(1, [{ tag: "t", text: "x" }]);
  expect(warnings.length).toBe(1);
  expect(warnings[0]).toMatch(/^tensorboard: cannot write .*the run goes on without it$/);
});
