#!/usr/bin/env python3
"""Reference vectors for deepseekv4.EngramTokenMap (engram_map_test.go).

Runs the reference's build_compressed_token_map (DeepSeek V4.1
inference/engram.py, spec section 4.11) with Hugging Face's `tokenizers`
on a tokenizer.json, and its normaliser on the strings of normalize_in.json.

    python3 reference.py TOKENIZER.json normalize_in.json OUTDIR

writes OUTDIR/map.json.gz ({"tokenizers": version, "count": N,
"repeats": [[id, compressed id], ...]} where repeats lists only the ids whose
key appeared before: every other id gets the next new compressed id) and
OUTDIR/normalize_out.json (the normalised strings, in order).
"""
import gzip, json, sys
import tokenizers
from tokenizers import Regex, Tokenizer, normalizers

SENTINEL = "\ue000"

def normalizer():
    return normalizers.Sequence([
        normalizers.NFKC(), normalizers.NFD(), normalizers.StripAccents(),
        normalizers.Lowercase(), normalizers.Replace(Regex(r"[ \t\r\n]+"), " "),
        normalizers.Replace(Regex(r"^ $"), SENTINEL), normalizers.Strip(),
        normalizers.Replace(SENTINEL, " "),
    ])

def main(tok_path, norm_in, outdir):
    tok = Tokenizer.from_file(tok_path)
    norm = normalizer()
    keys, repeats = {}, []
    for i in range(tok.get_vocab_size(with_added_tokens=True)):
        text = tok.decode([i], skip_special_tokens=False)
        if "\ufffd" in text:
            key = tok.id_to_token(i)
        else:
            key = norm.normalize_str(text) or text
        if key in keys:
            repeats.append([i, keys[key]])
        else:
            keys[key] = len(keys)
    with gzip.open(outdir + "/map.json.gz", "wt", encoding="utf-8") as f:
        json.dump({"tokenizers": tokenizers.__version__, "count": len(keys), "repeats": repeats}, f)
    strs = json.load(open(norm_in, encoding="utf-8"))
    json.dump([norm.normalize_str(s) for s in strs],
              open(outdir + "/normalize_out.json", "w", encoding="utf-8"), ensure_ascii=False)
    print("tokenizers", tokenizers.__version__, "vocab", tok.get_vocab_size(with_added_tokens=True),
          "count", len(keys), "repeats", len(repeats))

if __name__ == "__main__":
    main(*sys.argv[1:])
