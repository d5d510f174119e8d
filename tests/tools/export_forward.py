"""Runs docs/export.md's Python as a user would, on an export, and prints validation losses.

    export_forward.py DOC EXPORT TOKENS SAMPLES SEQ_LEN

DOC is docs/export.md. Its first ```python block (the h5py + numpy forward pass) is run as
written in a scratch directory where model.h5 is EXPORT. The Hugging Face section's renaming
loop (the lines from `hf = {` up to `config =`, pure numpy) is run too, and a forward pass in
Hugging Face's own layout (Conv1D weights [in, out], y = x @ W + b, c_attn split into q, k, v
of C channels each) is computed here from the renamed tensors, without torch. Both are
evaluated on validation samples 0 .. SAMPLES-1 of the token file TOKENS (sample i is the
SEQ_LEN + 1 tokens from train_tokens + i * SEQ_LEN, docs/data-format.md), and printed as

    docs_forward LOSS
    hf_layout_forward LOSS

in float64 (the weights are float32 as stored; the documented forward computes in them).
"""
import os
import re
import shutil
import sys
import tempfile

import h5py
import numpy as np


def python_blocks(markdown):
    return re.findall(r"```python\n(.*?)```", markdown, re.S)


def hf_renaming(block):
    lines = block.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("hf = {"))
    end = next(i for i, l in enumerate(lines) if l.startswith("config ="))
    return "\n".join(lines[start:end]) + "\n"


def cross_entropy(logits, targets):
    z = logits.astype(np.float64)
    z = z - z.max(-1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return -log_p[np.arange(len(targets)), targets].mean()


def hf_layout_logits(hf, L, NH, C, tokens):
    def ln(x, p):
        mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + 1e-5) * hf[p + ".weight"] + hf[p + ".bias"]

    def gelu_new(x):
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))

    T, hs = len(tokens), C // NH
    x = hf["transformer.wte.weight"][tokens] + hf["transformer.wpe.weight"][:T]
    mask = np.triu(np.ones((T, T), dtype=bool), 1)
    for l in range(L):
        h = f"transformer.h.{l}."
        qkv = ln(x, h + "ln_1") @ hf[h + "attn.c_attn.weight"] + hf[h + "attn.c_attn.bias"]
        q, k, v = (a.reshape(T, NH, hs).transpose(1, 0, 2) for a in np.split(qkv, 3, axis=-1))
        s = q @ k.transpose(0, 2, 1) / np.sqrt(hs)
        s[:, mask] = -np.inf
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        y = (p @ v).transpose(1, 0, 2).reshape(T, C)
        x = x + y @ hf[h + "attn.c_proj.weight"] + hf[h + "attn.c_proj.bias"]
        m = gelu_new(ln(x, h + "ln_2") @ hf[h + "mlp.c_fc.weight"] + hf[h + "mlp.c_fc.bias"])
        x = x + m @ hf[h + "mlp.c_proj.weight"] + hf[h + "mlp.c_proj.bias"]
    return ln(x, "transformer.ln_f") @ hf["transformer.wte.weight"].T  # lm_head tied to wte


def main():
    doc, export, tokens_path, samples, seq_len = sys.argv[1:6]
    samples, seq_len = int(samples), int(seq_len)
    blocks = python_blocks(open(doc).read())
    if len(blocks) < 2:
        sys.exit(f"{doc}: expected two ```python blocks, found {len(blocks)}")
    scratch = tempfile.mkdtemp()
    try:
        shutil.copy(export, os.path.join(scratch, "model.h5"))
        os.chdir(scratch)
        names = {}
        exec(blocks[0], names)  # defines w, L, NH, C, V, context, deck, logits
        exec(hf_renaming(blocks[1]), names)  # defines hf from w
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if names["V"] != names["w"]["wte"].shape[0] or "[model]" not in names["deck"]:
        sys.exit("the documented attributes do not describe the export")

    with h5py.File(tokens_path, "r") as f:
        train = int(f.attrs["train_tokens"])
        tokens = f["tokens"][train:train + samples * seq_len + 1].astype(np.int64)
    docs_loss, hf_loss = [], []
    for i in range(samples):
        x, y = tokens[i * seq_len:(i + 1) * seq_len], tokens[i * seq_len + 1:(i + 1) * seq_len + 1]
        docs_loss.append(cross_entropy(names["logits"](x), y))
        hf_loss.append(cross_entropy(hf_layout_logits(names["hf"], names["L"], names["NH"], names["C"], x), y))
    print(f"docs_forward {np.mean(docs_loss):.9f}")
    print(f"hf_layout_forward {np.mean(hf_loss):.9f}")


if __name__ == "__main__":
    main()
