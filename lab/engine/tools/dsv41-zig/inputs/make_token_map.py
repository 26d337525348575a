# sparkfold lab engine (a TensorFold SIMULATOR): the lab's token map for Engram (TF_DS_TOKEN_MAP).
"""make_token_map.py MODEL_DIR OUT: a compressed token map from MODEL_DIR/tokenizer.json, standard library only.

The interface of TensorFold's tools/dsv41-zig/inputs/make_token_map.py (bertholomus/TensorFold
@59402086381a42c74d53053443224eec2790b4c5), written for the lab: every token id of the tokenizer
(model.vocab, a {piece: id} map or a [[piece, score], ...] list, plus added_tokens) is mapped to the id of
its normalized form (NFKC, lower case, the byte-level / sentencepiece space marks and surrounding spaces
removed), numbered in order of first appearance. OUT is written whole (a temporary file renamed):

    {"format": "sparkfold-lab-token-map", "vocab_size": N, "compressed_size": M, "map": [N ids]}

Ids the tokenizer does not name map to themselves' normalized empty form (compressed id of "").
"""

import json
import os
import sys
import tempfile
import unicodedata

FORMAT = "sparkfold-lab-token-map"
SPACE_MARKS = ("\u0120", "\u2581", "\u010a")  # byte-level "Ġ", sentencepiece "▁", byte-level newline "Ċ"


def normalize(piece):
    text = unicodedata.normalize("NFKC", piece)
    for mark in SPACE_MARKS:
        text = text.replace(mark, " ")
    return text.strip().lower()


def vocab_of(tokenizer):
    """{id: piece} from a tokenizer.json document."""
    pieces = {}
    vocab = (tokenizer.get("model") or {}).get("vocab")
    if isinstance(vocab, dict):
        for piece, token_id in vocab.items():
            if isinstance(token_id, int) and token_id >= 0:
                pieces[token_id] = piece
    elif isinstance(vocab, list):  # Unigram: [[piece, score], ...], the id is the position
        for token_id, entry in enumerate(vocab):
            if isinstance(entry, (list, tuple)) and entry and isinstance(entry[0], str):
                pieces[token_id] = entry[0]
    for added in tokenizer.get("added_tokens") or []:
        if isinstance(added, dict) and isinstance(added.get("id"), int) and isinstance(added.get("content"), str):
            pieces[added["id"]] = added["content"]
    return pieces


def token_map(pieces):
    size = max(pieces) + 1
    compressed = {}
    out = []
    for token_id in range(size):
        key = normalize(pieces.get(token_id, ""))
        out.append(compressed.setdefault(key, len(compressed)))
    return {"format": FORMAT, "vocab_size": size, "compressed_size": len(compressed), "map": out}


def main(argv):
    if len(argv) != 3:
        print("usage: make_token_map.py MODEL_DIR OUT", file=sys.stderr)
        return 2
    model_dir, out = argv[1], argv[2]
    path = os.path.join(model_dir, "tokenizer.json")
    try:
        with open(path, encoding="utf-8") as f:
            tokenizer = json.load(f)
    except (OSError, ValueError) as exc:
        print(f"{path} cannot be read as JSON: {exc}", file=sys.stderr)
        return 1
    pieces = vocab_of(tokenizer) if isinstance(tokenizer, dict) else {}
    if not pieces:
        print(f"{path} names no token (no model.vocab, no added_tokens)", file=sys.stderr)
        return 1
    doc = token_map(pieces)
    directory = os.path.dirname(os.path.abspath(out))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".token-map-", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f, separators=(",", ":"))
            f.write("\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    print(json.dumps({"file": out, "vocab_size": doc["vocab_size"], "compressed_size": doc["compressed_size"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
