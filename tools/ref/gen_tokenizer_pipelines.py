#!/usr/bin/env python3
"""tokenizer.json files in the normalizer / pre-tokenizer / decoder layouts real models ship,
written by PyPI `tokenizers` 0.23.3 (transformers 5.24.0 installed beside it, unused here), and
the ids and decoded text `tokenizers` gives for them: lmstack must reproduce both exactly.

No model files can be downloaded, so each pipeline is built with the `tokenizers` API as the
model's tokenizer.json declares it, and its BPE vocabulary (2,000 tokens) is trained by
`tokenizers`' BpeTrainer on the first 120 kB of each shared corpus file
(shared/peers/tokenizers/corpus, CC0/public texts) plus unicode_cases.json:

  qwen2        NFC + Split(Qwen2 regex) + ByteLevel(use_regex=false), ByteLevel decoder
  llama2       Prepend("▁") + Replace(" ", "▁"), byte_fallback, unk, fuse_unk;
               Replace/ByteFallback/Fuse/Strip decoder (Llama 2, TinyLlama, Phi-3 as shipped)
  llama3       Split(Llama 3 regex) + ByteLevel(use_regex=false), ignore_merges
  deepseek_v3  Split(\\p{N}{1,3}) + Split(CJK) + Split(DeepSeek-V3 regex) + ByteLevel
  phi3         transformers 5 conversion of a SentencePiece model: Metaspace(prepend_scheme=
               first, split=false), byte_fallback, added tokens with rstrip
  gemma        Replace(" ", "▁") normalizer, no pre-tokenizer, byte_fallback (Gemma 1/2/3)
  metaspace_split  NFKC + Metaspace(split=true) on a vocabulary with "▁▁" merges (trained with
               split=false, as a SentencePiece vocabulary is)
  bert_like    NFD + StripAccents + Lowercase + Strip + Replace(Regex \\s+) normalizers;
               WhitespaceSplit + Punctuation + Digits(individual) + ByteLevel
  whitespace   NFKD + Lowercase; Whitespace + ByteLevel
  splits       Split(String "!", MergedWithPrevious) + Split((?=[A-Z])) + Split(\\w+) +
               Split(String "-", MergedWithNext) + Split(\\b) + Split(\\d+, Contiguous, invert)
               + Punctuation(MergedWithNext) + ByteLevel

Writes into tests/data/tokenizer/pipelines/:
  <name>.json         the tokenizer.json `tokenizers` saves
  <name>.cases.json   for each string of unicode_cases.json: {"ids", "decoded"} from tokenizers
                      (add_special_tokens=False; decode with skip_special_tokens=False)
  corpus.tsv          name, file, bytes, tokens, FNV-1a 64 of the ids, FNV-1a 64 of the
                      decoded UTF-8, for every pipeline on every shared corpus .txt file

regenerate: /work/venv-ref/bin/python tools/ref/gen_tokenizer_pipelines.py [--shared DIR]
"""
import argparse
import json
import os
import struct

from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers,
                        pre_tokenizers, trainers)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests/data/tokenizer/pipelines")
VOCAB = 2000

QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
         r"|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
          r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
DEEPSEEK_V3 = (r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?"
               r"[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def fnv64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def byte_level(pre, normalizer=None, ignore_merges=False, specials=("<|endoftext|>",)):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=list(specials),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    return tok, trainer


def sentencepiece(normalizer, pre, decoder, specials):
    """A SentencePiece-converted BPE: <0xNN> byte tokens right after the specials."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer, tok.pre_tokenizer, tok.decoder = normalizer, pre, decoder
    trainer = trainers.BpeTrainer(vocab_size=VOCAB - 256, special_tokens=list(specials),
                                  limit_alphabet=400, show_progress=False)
    return tok, trainer


SP_DECODER = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                decoders.Fuse(), decoders.Strip(" ", 1, 0)])


def pipelines():
    bl = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    iso = "isolated"
    return {
        "qwen2": byte_level(pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(QWEN2), iso), bl]),
                            normalizers.NFC(),
                            specials=("<|endoftext|>", "<|im_start|>", "<|im_end|>")),
        "llama2": sentencepiece(
            normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")]),
            None, SP_DECODER, ("<unk>", "<s>", "</s>")),
        "llama3": byte_level(pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(LLAMA3), iso),
                                                      bl]), ignore_merges=True,
                             specials=("<|begin_of_text|>", "<|end_of_text|>")),
        "deepseek_v3": byte_level(pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(r"\p{N}{1,3}"), iso),
            pre_tokenizers.Split(Regex("[一-龥\u3040-ゟ゠-ヿ]+"), iso),
            pre_tokenizers.Split(Regex(DEEPSEEK_V3), iso), bl]),
            specials=("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>")),
        "phi3": sentencepiece(None, pre_tokenizers.Metaspace("▁", "first", split=False),
                              SP_DECODER, ("<unk>", "<s>", "</s>")),
        "gemma": sentencepiece(normalizers.Replace(" ", "▁"), None, decoders.Sequence([
            decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]),
            ("<pad>", "<eos>", "<bos>", "<unk>")),
        "metaspace_split": sentencepiece(normalizers.NFKC(),
                                         pre_tokenizers.Metaspace("▁", "always", split=False),
                                         decoders.Sequence([decoders.ByteFallback(),
                                                            decoders.Metaspace("▁", "always")]),
                                         ("<unk>", "<s>", "</s>")),
        "bert_like": byte_level(pre_tokenizers.Sequence([
            pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation(),
            pre_tokenizers.Digits(individual_digits=True), bl]),
            normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents(),
                                  normalizers.Lowercase(), normalizers.Strip(),
                                  normalizers.Replace(Regex(r"\s+"), " ")])),
        "whitespace": byte_level(pre_tokenizers.Sequence([pre_tokenizers.Whitespace(), bl]),
                                 normalizers.Sequence([normalizers.NFKD(),
                                                       normalizers.Lowercase()])),
        "splits": byte_level(pre_tokenizers.Sequence([
            pre_tokenizers.Split("!", "merged_with_previous"),
            pre_tokenizers.Split(Regex("(?=[A-Z])"), iso),
            pre_tokenizers.Split(Regex(r"\w+"), iso),
            pre_tokenizers.Split("-", "merged_with_next"),
            pre_tokenizers.Split(Regex(r"\b"), iso),
            pre_tokenizers.Split(Regex(r"\d+"), "contiguous", invert=True),
            pre_tokenizers.Punctuation("merged_with_next"), bl])),
    }


def sp_byte_vocab(j, num_specials):
    """Moves the trained tokens up by 256 and puts <0x00>..<0xFF> after the specials."""
    vocab = {}
    for t, i in sorted(j["model"]["vocab"].items(), key=lambda kv: kv[1]):
        vocab[t] = i if i < num_specials else i + 256
    vocab.update({f"<0x{b:02X}>": num_specials + b for b in range(256)})
    j["model"]["vocab"] = dict(sorted(vocab.items(), key=lambda kv: kv[1]))
    for a in j["added_tokens"]:
        a["id"] = vocab[a["content"]]
    return j


def j_is_sentencepiece(tok):
    return json.loads(tok.to_str())["model"].get("byte_fallback", False)


def train(name, tok, trainer, texts):
    # SentencePiece-style pipelines may leave a whole text as one word: train them on lines.
    lines = [line for t in texts for line in t.splitlines(keepends=True)]
    tok.train_from_iterator(lines if j_is_sentencepiece(tok) else texts, trainer)
    j = json.loads(tok.to_str())
    if j["model"].get("byte_fallback"):
        j = sp_byte_vocab(j, len(trainer.special_tokens))
    if name == "metaspace_split":  # trained with split=false, so "▁▁" merges exist
        j["pre_tokenizer"]["split"] = True
    if name == "phi3":  # Phi-3's chat markers: added, not special, rstrip
        tok2 = Tokenizer.from_str(json.dumps(j))
        tok2.add_tokens([AddedToken("<|user|>", rstrip=True, normalized=False),
                         AddedToken("<|end|>", rstrip=True, normalized=False)])
        j = json.loads(tok2.to_str())
    return j


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(ROOT, "../shared"))
    args = ap.parse_args()
    corpus = os.path.join(args.shared, "peers/tokenizers/corpus")
    files = sorted(f for f in os.listdir(corpus) if f.endswith(".txt"))
    full = {f: open(os.path.join(corpus, f), encoding="utf-8", newline="").read() for f in files}
    cases = json.load(open(os.path.join(OUT, "unicode_cases.json"), encoding="utf-8"))
    texts = [t[:120_000] for t in full.values()] + cases
    rows = ["# pipeline\tfile\tbytes\ttokens\tfnv1a64 of ids (u32 LE)\tfnv1a64 of decoded UTF-8"]
    for name, (tok, trainer) in pipelines().items():
        path = os.path.join(OUT, name + ".json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(train(name, tok, trainer, texts), f, ensure_ascii=False, indent=1)
        tok = Tokenizer.from_file(path)
        out = []
        for text in cases:
            ids = tok.encode(text, add_special_tokens=False).ids
            out.append({"ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False)})
        with open(os.path.join(OUT, name + ".cases.json"), "w", encoding="utf-8") as f:
            f.write("[\n" + ",\n".join(json.dumps(o, ensure_ascii=False) for o in out) + "\n]\n")
        for fname, text in full.items():
            ids = tok.encode(text, add_special_tokens=False).ids
            dec = tok.decode(ids, skip_special_tokens=False).encode("utf-8", "surrogatepass")
            rows.append(f"{name}\t{fname}\t{len(text.encode())}\t{len(ids)}\t"
                        f"{fnv64(struct.pack(f'<{len(ids)}I', *ids))}\t{fnv64(dec)}")
        print(name, "done", flush=True)
    with open(os.path.join(OUT, "corpus.tsv"), "w") as f:
        f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
