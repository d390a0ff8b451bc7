// scripts/gpt2_encode.js: the ids gpt-3-encoder's Encoder.js gives for a UTF-8 file, printed
// space-separated on one line, as `train_lm tokenize --tokenizer gpt2` prints them:
//
//   /usr/bin/node scripts/gpt2_encode.js FILE [GPT2_DIR]     (GPT2_DIR default data/gpt2)
//
// Encoder.js's encode(text) grows its result with Array.concat, a copy per piece, which takes
// hours on a book; its loop is "for each match of pat: bpe(match)", so this runs that loop with
// encode(piece) per piece (checking each piece is one match on its own) and a push.
// scripts/check_gpt2_tokenizer.sh compares the two.
'use strict';
const fs = require('fs');
const path = require('path');
const file = process.argv[2];
if (!file) { console.error('usage: node scripts/gpt2_encode.js FILE [GPT2_DIR]'); process.exit(2); }
const dir = path.resolve(process.argv[3] || path.join(__dirname, '..', 'data', 'gpt2'));
const { encode } = require(path.join(dir, 'Encoder.js'));
const pat = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;
// fatal: invalid UTF-8 is an error here too (train_lm refuses it); ignoreBOM: a leading BOM is
// kept as text, as train_lm reads the file
const text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(fs.readFileSync(file));
const ids = [];
for (const m of text.matchAll(pat)) {
  const again = Array.from(m[0].matchAll(pat));
  if (again.length !== 1 || again[0][0] !== m[0]) throw new Error(`piece ${JSON.stringify(m[0])} splits again`);
  for (const id of encode(m[0])) ids.push(id);
}
process.stdout.write(ids.join(' ') + '\n');
