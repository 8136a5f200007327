// gen.mjs — Parquet files written by two independent writers, for tests/test_parquet.c:
// parquetjs-lite (PLAIN; UNCOMPRESSED, GZIP, SNAPPY; data pages v1 and v2) and parquet-wasm
// (arrow-rs: dictionary and PLAIN; UNCOMPRESSED, SNAPPY, GZIP, ZSTD; several row groups).
//
//   node tests/parquet/gen.mjs OUTDIR      (modules from build/parquet-writers/node_modules)
//
// Every file holds the same rows: a text column (some nulls, multi-byte UTF-8, an empty
// string, a long text, repeated texts that a dictionary shares) and an id column beside
// it. OUTDIR/expected.jsonl holds the non-null texts in row order as {"text": ...}, and
// OUTDIR/expected.json the counts.
import { createRequire } from "module";
import fs from "fs";
import path from "path";

const out = process.argv[2];
const mods = path.resolve(process.argv[3] || "build/parquet-writers/node_modules");
const require = createRequire(path.join(mods, "x.js"));
const parquet = require("parquetjs-lite");
const arrow = require("apache-arrow");
const pw = require("parquet-wasm/node");

fs.mkdirSync(out, { recursive: true });
// the rows: deterministic, with every case the reader must meet
const rows = [];
const words = ["alpha", "βήτα", "γάμμα", "日本語のテキスト", "emoji 😀 here", "tab\tand\nnewline", "quote \" back\\slash"];
for (let i = 0; i < 1000; i++) {
  let text;
  if (i % 97 === 5) text = null;                                  // nulls
  else if (i === 7) text = "";                                     // an empty string
  else if (i === 11) text = "long ".repeat(5000) + i;              // a long value
  else if (i % 3 === 0) text = words[i % words.length];            // repeats: a dictionary shares them
  else text = `document ${i}: ${words[i % words.length]} ${"x".repeat(i % 17)}`;
  rows.push({ id: i, text });
}
const kept = rows.filter(r => r.text !== null && r.text !== "");
fs.writeFileSync(path.join(out, "expected.jsonl"), kept.map(r => JSON.stringify({ text: r.text })).join("\n") + "\n");
fs.writeFileSync(path.join(out, "expected.json"), JSON.stringify({
  rows: rows.length, nulls: rows.filter(r => r.text === null).length, empty: rows.filter(r => r.text === "").length,
  docs: kept.length }));

async function lite(name, compression, v2) {
  const schema = new parquet.ParquetSchema({
    id: { type: "INT64" },
    text: { type: "UTF8", optional: true, compression },
  });
  const w = await parquet.ParquetWriter.openFile(schema, path.join(out, name),
                                                 { rowGroupSize: 300, pageSize: 128, useDataPageV2: v2 });
  for (const r of rows) await w.appendRow(r.text === null ? { id: r.id } : r);
  await w.close();
}
for (const c of ["UNCOMPRESSED", "GZIP", "SNAPPY"]) {
  await lite(`lite-${c.toLowerCase()}-v1.parquet`, c, false);
  await lite(`lite-${c.toLowerCase()}-v2.parquet`, c, true);
}

// arrow-rs through parquet-wasm
const table = arrow.tableFromArrays({
  id: Int32Array.from(rows.map(r => r.id)),
  text: rows.map(r => r.text),
});
const codecs = { uncompressed: pw.Compression.UNCOMPRESSED, snappy: pw.Compression.SNAPPY,
                 gzip: pw.Compression.GZIP, zstd: pw.Compression.ZSTD };
for (const [cname, codec] of Object.entries(codecs)) {
  for (const dict of [true, false]) {
    for (const ver of [pw.WriterVersion.V1, pw.WriterVersion.V2]) {
      const b = new pw.WriterPropertiesBuilder().setCompression(codec).setDictionaryEnabled(dict)
                  .setMaxRowGroupSize(256).setWriterVersion(ver);
      const bytes = pw.writeParquet(pw.Table.fromIPCStream(arrow.tableToIPC(table, "stream")), b.build());
      fs.writeFileSync(path.join(out, `arrow-${cname}-${dict ? "dict" : "plain"}-v${ver === pw.WriterVersion.V1 ? 1 : 2}.parquet`), bytes);
    }
  }
}

// what the reader refuses, with its reason: other codecs, a nested column
for (const [cname, codec] of [["lz4", pw.Compression.LZ4_RAW], ["brotli", pw.Compression.BROTLI]]) {
  const b = new pw.WriterPropertiesBuilder().setCompression(codec);
  fs.writeFileSync(path.join(out, `unsupported-${cname}.parquet`),
                   pw.writeParquet(pw.Table.fromIPCStream(arrow.tableToIPC(table, "stream")), b.build()));
}
const nested = arrow.tableFromArrays({ id: Int32Array.from([1, 2]) });
const withStruct = new arrow.Table({
  id: nested.getChild("id"),
  text: arrow.vectorFromArray([{ a: "x" }, { a: "y" }]),
});
fs.writeFileSync(path.join(out, "unsupported-nested.parquet"),
                 pw.writeParquet(pw.Table.fromIPCStream(arrow.tableToIPC(withStruct, "stream"))));

// odd files prep must still count and name: no rows at all (arrow-rs writes the schema and
// no row group), a text holding a NUL character, and many columns with long names
const write = (name, t) => fs.writeFileSync(path.join(out, name),
                                            pw.writeParquet(pw.Table.fromIPCStream(arrow.tableToIPC(t, "stream"))));
write("odd-no-rows.parquet", new arrow.Table({ text: arrow.vectorFromArray([], new arrow.Utf8()) }));
write("odd-nul.parquet", arrow.tableFromArrays({ id: Int32Array.from([1, 2, 3]),
                                                 text: ["before", "a\u0000b", "after"] }));
const many = {};
for (let i = 0; i < 40; i++) many[`column_${String(i).padStart(2, "0")}_` + "n".repeat(i === 1 ? 80 : 10)] = ["v"];
write("odd-many-columns.parquet", arrow.tableFromArrays(many));
