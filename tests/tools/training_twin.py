#!/usr/bin/python3
"""A float64 numpy twin of Trident's training, written from docs/ alone (model.md, data-format.md,
checkpoint-format.md, param-file.md), not from the C++: tests/mpi/training_twin_test.sh compares
Trident's CPU fp32 runs with it, so that the reference backend itself is checked against what the
docs promise (the forward, the hand-written backward, gradient accumulation, clipping, AdamW and
its weight-decay mask, the learning-rate schedule, the data order and validation).

Usage:
  training_twin.py mkinit TEMPLATE.h5 OUT.h5 [--seed N]
      Writes a step-0 checkpoint OUT.h5: parameters of its own drawing (biases and LayerNorm
      weights random too, so that every gradient path carries weight), AdamW moments 0, step,
      samples and tokens 0, checksums per docs/checkpoint-format.md; the other attributes are
      TEMPLATE.h5's (any checkpoint of the same deck). `--run.restart=OUT.h5` starts from it.
  training_twin.py run RUN_DIR INIT.h5|natural
      Reads RUN_DIR/config.ini (the resolved deck), starts from INIT.h5 (or from Trident's own
      initialisation, docs/model.md, with `natural`), replays every step in float64 and compares
      the losses, gradient norms, learning rates and validation losses of RUN_DIR/metrics.jsonl
      and the parameters of RUN_DIR/final-params.h5 (the relative L2 difference over all of them).
      Exit 1 when a step's value differs by more than 1e-5 relative, or the parameters by more
      than 3e-5: Trident's fp32 against float64 agreed to 3.3e-7 and 7e-6 at most (2026-11-25,
      tests/mpi/training_twin_test.sh's runs), and weight decay wrongly applied to the biases
      moves the parameters by 1.8e-4, a clip left out the losses by 7e-4.
  training_twin.py fdcheck RUN_DIR INIT.h5
      Checks the twin's own backward against float64 central differences (exit 1 above 1e-4).
"""
import configparser, json, math, sys
import numpy as np
import h5py

M64 = (1 << 64) - 1
M32 = (1 << 32) - 1


# ---------------------------------------------------------------- random numbers (C++ std)
def seed_seq_generate(v, n):
    """std::seed_seq::generate, [rand.util.seedseq]."""
    b = [0x8b8b8b8b] * n
    s = len(v)
    t = 11 if n >= 623 else 7 if n >= 68 else 5 if n >= 39 else 3 if n >= 7 else (n - 1) // 2
    p = (n - t) // 2
    q = p + t
    m = max(s + 1, n)
    T = lambda x: x ^ (x >> 27)
    for k in range(m):
        r1 = (1664525 * T(b[k % n] ^ b[(k + p) % n] ^ b[(k - 1) % n])) & M32
        if k == 0:
            r2 = (r1 + s) & M32
        elif k <= s:
            r2 = (r1 + k % n + v[k - 1]) & M32
        else:
            r2 = (r1 + k % n) & M32
        b[(k + p) % n] = (b[(k + p) % n] + r1) & M32
        b[(k + q) % n] = (b[(k + q) % n] + r2) & M32
        b[k % n] = r2
    for k in range(m, m + n):
        r3 = (1566083941 * T((b[k % n] + b[(k + p) % n] + b[(k - 1) % n]) & M32)) & M32
        r4 = (r3 - k % n) & M32
        b[(k + p) % n] ^= r3
        b[(k + q) % n] ^= r4
        b[k % n] = r4
    return b


class MT19937_64:
    n, m = 312, 156

    def __init__(self, seed_words):
        a = seed_seq_generate(seed_words, 2 * self.n)
        self.x = [a[2 * i] | (a[2 * i + 1] << 32) for i in range(self.n)]
        if (self.x[0] >> 31) == 0 and all(v == 0 for v in self.x[1:]):
            self.x[0] = 1 << 63
        self.i = self.n

    def _twist(self):
        x, n, m = self.x, self.n, self.m
        up, lo = (M64 << 31) & M64, (1 << 31) - 1
        for i in range(n):
            y = (x[i] & up) | (x[(i + 1) % n] & lo)
            z = x[(i + m) % n] ^ (y >> 1)
            if y & 1:
                z ^= 0xB5026F5AA96619E9
            x[i] = z
        self.i = 0

    def __call__(self):
        if self.i >= self.n:
            self._twist()
        z = self.x[self.i]
        self.i += 1
        z ^= (z >> 29) & 0x5555555555555555
        z ^= (z << 17) & 0x71D67FFFEDA60000
        z ^= (z << 37) & 0xFFF7EEE000000000
        z ^= z >> 43
        return z & M64


_perm_cache = {}


def permutation(seed, epoch, N):
    key = (seed, epoch, N)
    if key not in _perm_cache:
        g = MT19937_64([seed & M32, seed >> 32, epoch & M32, epoch >> 32])
        order = list(range(N))
        for i in range(N, 1, -1):
            lim = M64 - (M64 % i)
            while True:
                d = g()
                if d < lim:
                    break
            j = d % i
            order[i - 1], order[j] = order[j], order[i - 1]
        _perm_cache[key] = order
    return _perm_cache[key]


# ---------------------------------------------------------------- deck
class Deck:
    def __init__(self, path):
        cp = configparser.ConfigParser(inline_comment_prefixes=("#",))
        cp.read(path)
        self.cp = cp

    def s(self, key):
        sec, k = key.split(".", 1)
        return self.cp[sec][k].strip()

    def i(self, key):
        return int(self.s(key))

    def f(self, key):
        return float(self.s(key))


# ---------------------------------------------------------------- model
def names(L):
    out = ["wte", "wpe"]
    for l in range(L):
        p = f"block{l}."
        out += [p + "ln1.weight", p + "ln1.bias", p + "attn.qkv.weight", p + "attn.qkv.bias",
                p + "attn.proj.weight", p + "attn.proj.bias", p + "ln2.weight", p + "ln2.bias",
                p + "mlp.up.weight", p + "mlp.up.bias", p + "mlp.down.weight", p + "mlp.down.bias"]
    return out + ["ln_f.weight", "ln_f.bias"]


def decays(name):  # docs/model.md: matrices and embeddings
    return name in ("wte", "wpe") or name.endswith(".weight") and ("attn." in name or "mlp." in name)


EPS_LN = 1e-5
GC = math.sqrt(2.0 / math.pi)


def ln_fwd(x, w, b):
    mu = x.mean(-1, keepdims=True)
    xc = x - mu
    var = (xc * xc).mean(-1, keepdims=True)
    rstd = 1.0 / np.sqrt(var + EPS_LN)
    xh = xc * rstd
    return xh * w + b, (xh, rstd)


def ln_bwd(dy, cache, w):
    xh, rstd = cache
    dw = (dy * xh).reshape(-1, xh.shape[-1]).sum(0)
    db = dy.reshape(-1, xh.shape[-1]).sum(0)
    g = dy * w
    dx = rstd * (g - g.mean(-1, keepdims=True) - xh * (g * xh).mean(-1, keepdims=True))
    return dx, dw, db


def gelu_fwd(u):
    a = GC * (u + 0.044715 * u ** 3)
    t = np.tanh(a)
    return 0.5 * u * (1 + t), t


def gelu_bwd(dy, u, t):
    da = GC * (1 + 3 * 0.044715 * u * u)
    return dy * (0.5 * (1 + t) + 0.5 * u * (1 - t * t) * da)


def forward_backward(P, idx, tgt, cfg, seed_scale, need_grad=True):
    """Returns (sum of token losses, grads dict with d(seed_scale * sum loss))."""
    B, T = idx.shape
    C, NH, L, V = cfg["C"], cfg["NH"], cfg["L"], cfg["V"]
    hs = C // NH
    x = P["wte"][idx] + P["wpe"][:T][None]
    caches = []
    for l in range(L):
        p = f"block{l}."
        h1, c1 = ln_fwd(x, P[p + "ln1.weight"], P[p + "ln1.bias"])
        Wqkv = P[p + "attn.qkv.weight"].reshape(3 * C, C)
        qkv = h1 @ Wqkv.T + P[p + "attn.qkv.bias"].reshape(3 * C)
        q, k, v = (qkv[..., i * C:(i + 1) * C].reshape(B, T, NH, hs).transpose(0, 2, 1, 3) for i in range(3))
        S = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hs)
        mask = np.triu(np.ones((T, T), bool), 1)
        S = np.where(mask, -np.inf, S)
        S = S - S.max(-1, keepdims=True)
        A = np.exp(S)
        A /= A.sum(-1, keepdims=True)
        y = (A @ v).transpose(0, 2, 1, 3).reshape(B, T, C)
        ao = y @ P[p + "attn.proj.weight"].T + P[p + "attn.proj.bias"]
        x2 = x + ao
        h2, c2 = ln_fwd(x2, P[p + "ln2.weight"], P[p + "ln2.bias"])
        u = h2 @ P[p + "mlp.up.weight"].T + P[p + "mlp.up.bias"]
        g, t = gelu_fwd(u)
        mo = g @ P[p + "mlp.down.weight"].T + P[p + "mlp.down.bias"]
        caches.append((x, h1, c1, q, k, v, A, y, x2, h2, c2, u, g, t))
        x = x2 + mo
    hf, cf = ln_fwd(x, P["ln_f.weight"], P["ln_f.bias"])
    logits = hf @ P["wte"].T  # [B, T, Vp]
    lg = logits[..., :V]
    mx = lg.max(-1, keepdims=True)
    lse = mx[..., 0] + np.log(np.exp(lg - mx).sum(-1))
    tok_loss = lse - np.take_along_axis(lg, tgt[..., None], -1)[..., 0]
    loss_sum = tok_loss.sum()
    if not need_grad:
        return loss_sum, None
    G = {n: np.zeros_like(a) for n, a in P.items()}
    dl = np.exp(lg - lse[..., None])
    np.put_along_axis(dl, tgt[..., None], np.take_along_axis(dl, tgt[..., None], -1) - 1, -1)
    dl *= seed_scale
    dlogits = np.zeros_like(logits)
    dlogits[..., :V] = dl
    G["wte"] += dlogits.reshape(-1, dlogits.shape[-1]).T @ hf.reshape(-1, C)
    dhf = dlogits @ P["wte"]
    dx, G["ln_f.weight"], G["ln_f.bias"] = ln_bwd(dhf, cf, P["ln_f.weight"])
    for l in reversed(range(L)):
        p = f"block{l}."
        (xin, h1, c1, q, k, v, A, y, x2, h2, c2, u, g, t) = caches[l]
        # MLP
        dmo = dx
        G[p + "mlp.down.weight"] = dmo.reshape(-1, C).T @ g.reshape(-1, 4 * C)
        G[p + "mlp.down.bias"] = dmo.reshape(-1, C).sum(0)
        dg = dmo @ P[p + "mlp.down.weight"]
        du = gelu_bwd(dg, u, t)
        G[p + "mlp.up.weight"] = du.reshape(-1, 4 * C).T @ h2.reshape(-1, C)
        G[p + "mlp.up.bias"] = du.reshape(-1, 4 * C).sum(0)
        dh2 = du @ P[p + "mlp.up.weight"]
        dln2, G[p + "ln2.weight"], G[p + "ln2.bias"] = ln_bwd(dh2, c2, P[p + "ln2.weight"])
        dx2 = dx + dln2
        # attention
        dao = dx2
        G[p + "attn.proj.weight"] = dao.reshape(-1, C).T @ y.reshape(-1, C)
        G[p + "attn.proj.bias"] = dao.reshape(-1, C).sum(0)
        dy = (dao @ P[p + "attn.proj.weight"]).reshape(B, T, NH, hs).transpose(0, 2, 1, 3)
        dA = dy @ v.transpose(0, 1, 3, 2)
        dv = A.transpose(0, 1, 3, 2) @ dy
        dS = A * (dA - (dA * A).sum(-1, keepdims=True)) / math.sqrt(hs)
        dq = dS @ k
        dk = dS.transpose(0, 1, 3, 2) @ q
        dqkv = np.concatenate([z.transpose(0, 2, 1, 3).reshape(B, T, C) for z in (dq, dk, dv)], -1)
        G[p + "attn.qkv.weight"] = (dqkv.reshape(-1, 3 * C).T @ h1.reshape(-1, C)).reshape(3, C, C)
        G[p + "attn.qkv.bias"] = dqkv.reshape(-1, 3 * C).sum(0).reshape(3, C)
        dh1 = dqkv @ P[p + "attn.qkv.weight"].reshape(3 * C, C)
        dln1, G[p + "ln1.weight"], G[p + "ln1.bias"] = ln_bwd(dh1, c1, P[p + "ln1.weight"])
        dx = dx2 + dln1
    np.add.at(G["wte"], idx.ravel(), dx.reshape(-1, C))
    G["wpe"][:T] += dx.sum(0)
    return loss_sum, G


# ---------------------------------------------------------------- data
class Data:
    def __init__(self, path, T):
        f = h5py.File(path, "r")
        self.tok = f["tokens"][...].astype(np.int64)
        self.ntrain = int(f.attrs["train_tokens"])
        self.T = T
        self.train = self.tok[:self.ntrain]
        self.val = self.tok[self.ntrain:]
        self.N = (len(self.train) - 1) // T
        self.Nval = (len(self.val) - 1) // T

    def sample(self, split, i):
        s = split[i * self.T: i * self.T + self.T + 1]
        return s[:-1], s[1:]

    def train_sample(self, seed, pos):
        e, r = divmod(pos, self.N)
        return self.sample(self.train, permutation(seed, e, self.N)[r])


# ---------------------------------------------------------------- optimiser
def lr_at(s, d):
    lr, mn, W = d.f("optim.lr"), d.f("optim.min_lr"), d.i("optim.warmup_steps")
    D = d.i("optim.decay_steps") or d.i("train.steps")
    if s < W:
        return lr * (s + 1) / W
    if s >= D:
        return mn
    prog = (s - W) / (D - W)
    return mn + 0.5 * (1 + math.cos(math.pi * prog)) * (lr - mn)


def cfg_of(d, P):
    return dict(C=d.i("model.hidden"), NH=d.i("model.heads"), L=d.i("model.layers"),
                V=d.i("model.vocab"))


def load_params(path, L):
    with h5py.File(path, "r") as f:
        P = {n: f[n][...].astype(np.float64) for n in names(L)}
        Mm = {n: f["optimizer.m." + n][...].astype(np.float64) for n in names(L)} if "optimizer.m.wte" in f else None
        Vv = {n: f["optimizer.v." + n][...].astype(np.float64) for n in names(L)} if "optimizer.v.wte" in f else None
        step = int(f.attrs["step"]) if "step" in f.attrs else 0
    return P, Mm, Vv, step


def val_loss(P, data, d, cfg, cursor=0):
    G, T = d.i("train.global_batch"), d.i("train.seq_len")
    nb = d.i("train.eval_batches")
    tot = 0.0
    for b in range(nb):
        for j in range(G):
            i = (cursor + b * G + j) % data.Nval
            x, y = data.sample(data.val, i)
            ls, _ = forward_backward(P, x[None], y[None], cfg, 1.0, need_grad=False)
            tot += ls
    return tot / (nb * G * T)


def train(run_dir, init, quiet=False, stop=None):
    try:
        skip = {r["step"] for r in map(json.loads, open(run_dir + "/metrics.jsonl")) if r.get("skipped")}
    except OSError:
        skip = set()
    d = Deck(run_dir + "/config.ini")
    L = d.i("model.layers")
    if init == "natural":
        P, Mm, Vv, step0 = natural_init(d), None, None, 0
    else:
        P, Mm, Vv, step0 = load_params(init, L)
    Mm = Mm or {n: np.zeros_like(a) for n, a in P.items()}
    Vv = Vv or {n: np.zeros_like(a) for n, a in P.items()}
    cfg = cfg_of(d, P)
    T, G, mb = d.i("train.seq_len"), d.i("train.global_batch"), d.i("train.micro_batch")
    seed = d.i("run.seed")
    data = Data(d.s("data.path"), T)
    b1, b2, eps = d.f("optim.beta1"), d.f("optim.beta2"), d.f("optim.eps")
    wd, clip = d.f("optim.weight_decay"), d.f("optim.grad_clip")
    steps = d.i("train.steps")
    eval_every, eval_batches = d.i("train.eval_every"), d.i("train.eval_batches")
    out = []
    for s in range(step0, steps if stop is None else stop):
        xs, ys = zip(*(data.train_sample(seed, s * G + j) for j in range(G)))
        xs, ys = np.array(xs), np.array(ys)
        Gs = {n: np.zeros_like(a) for n, a in P.items()}
        loss = 0.0
        for k in range(G // mb):  # micro-batches; dp only re-partitions the same G samples
            ls, g = forward_backward(P, xs[k * mb:(k + 1) * mb], ys[k * mb:(k + 1) * mb], cfg, 1.0 / (G * T))
            loss += ls
            for n in Gs:
                Gs[n] += g[n]
        loss /= G * T
        norm = math.sqrt(sum(float((g * g).sum()) for g in Gs.values()))
        sc = clip / norm if clip > 0 and norm > clip else 1.0
        lr = lr_at(s, d)
        t = s + 1
        if s + 1 in skip:  # fp16 overflow (taken from Trident's metrics): no update, t still counts
            out.append(dict(step=s + 1, loss=loss, lr=lr, grad_norm=float("nan"), clipped=False, skipped=True))
            continue
        for n in P:
            g = Gs[n] * sc
            Mm[n] = b1 * Mm[n] + (1 - b1) * g
            Vv[n] = b2 * Vv[n] + (1 - b2) * g * g
            mh = Mm[n] / (1 - b1 ** t)
            vh = Vv[n] / (1 - b2 ** t)
            lam = wd if decays(n) else 0.0
            P[n] = P[n] - lr * (mh / (np.sqrt(vh) + eps) + lam * P[n])
        rec = dict(step=s + 1, loss=loss, lr=lr, grad_norm=norm, clipped=sc < 1)
        if eval_batches > 0 and ((eval_every > 0 and (s + 1) % eval_every == 0) or s + 1 == steps):
            rec["val_loss"] = val_loss(P, data, d, cfg)
        out.append(rec)
    return d, P, out, Mm, Vv, Gs


def rel(a, b):
    return abs(a - b) / max(abs(a), abs(b), 1e-30)


def cmd_run(run_dir, init, tol=1e-5, param_tol=3e-5):
    d, P, recs, _, _, _ = train(run_dir, init)
    ref = [json.loads(l) for l in open(run_dir + "/metrics.jsonl")]
    ref = {r["step"]: r for r in ref}
    worst = {}
    print(f"{'step':>4} {'loss twin':>12} {'loss trident':>12} {'rel':>9} {'gnorm rel':>9} {'lr rel':>9} clip  {'val rel':>9}")
    for r in recs:
        t = ref[r["step"]]
        if r.get("skipped"):
            print(f"{r['step']:4d} skipped (fp16 overflow): loss rel {rel(r['loss'], t['loss']):.2e}")
            worst["loss"] = max(worst.get("loss", 0), rel(r["loss"], t["loss"]))
            continue
        rl, rg, rlr = rel(r["loss"], t["loss"]), rel(r["grad_norm"], t["grad_norm"]), rel(r["lr"], t["lr"])
        rv = rel(r["val_loss"], t["val_loss"]) if "val_loss" in r and "val_loss" in t else None
        if ("val_loss" in r) != ("val_loss" in t):
            rv = float("inf")
            print("  val_loss present in only one of twin/trident:", r.get("val_loss"), t.get("val_loss"))
        for k, v in (("loss", rl), ("grad_norm", rg), ("lr", rlr), ("val_loss", rv)):
            if v is not None:
                worst[k] = max(worst.get(k, 0), v)
        print(f"{r['step']:4d} {r['loss']:12.8f} {t['loss']:12.8f} {rl:9.2e} {rg:9.2e} {rlr:9.2e} {'yes' if r['clipped'] else 'no ':4s}"
              + (f" {rv:9.2e} ({r['val_loss']:.6f} vs {t['val_loss']:.6f})" if rv is not None else ""))
    with h5py.File(run_dir + "/final-params.h5", "r") as f:
        allnum = allden = 0.0
        wt = 0.0
        for n, a in P.items():
            b = f[n][...].astype(np.float64)
            a2 = a
            if n == "wte":  # padding rows depend on tp: compare the rows both have, the rest must be 0
                r0 = min(a.shape[0], b.shape[0])
                assert not a[r0:].any() and not b[r0:].any(), "nonzero wte padding rows"
                a2, b = a[:r0], b[:r0]
            diff = np.linalg.norm(a2 - b)
            den = max(np.linalg.norm(a2), np.linalg.norm(b))
            allnum += diff ** 2
            allden += den ** 2
            r_ = diff / den if den > 0 else 0
            if r_ > wt:
                wt, wn = r_, n
            if r_ > 1e-5:
                print(f"  param {n}: rel L2 diff {r_:.2e}, max abs {np.abs(a2 - b).max():.2e}")
        worst["params_all"] = math.sqrt(allnum / allden)
        worst["params_worst_tensor"] = wt
        print(f"  worst tensor: {wn} {wt:.2e}")
    print("max relative differences:", {k: f"{v:.2e}" for k, v in worst.items()})
    bad = [k for k, v in worst.items() if k != "params_worst_tensor" and v > (param_tol if k == "params_all" else tol)]
    if bad:
        print("FAIL:", bad)
        return 1
    print("OK")
    return 0


# ---------------------------------------------------------------- Trident's own initialisation
def fnv1a64(text):
    h = 0xcbf29ce484222325
    for ch in text.encode():
        h = ((h ^ ch) * 0x100000001b3) & M64
    return h


def counter_normal(name, n, seed):
    """docs/model.md's initialisation: Philox-4x32-10 keyed by (run.seed, FNV-1a-64(NAME)) at
    counter e, Box-Muller on its first two words."""
    key = ((seed * 0x9E3779B97F4A7C15) & M64) ^ fnv1a64(name)
    e = np.arange(n, dtype=np.uint64)
    m32 = np.uint64(M32)
    c = [e & m32, e >> np.uint64(32), np.zeros_like(e), np.zeros_like(e)]
    k0, k1 = key & M32, key >> 32
    for _ in range(10):
        p0 = np.uint64(0xD2511F53) * c[0]
        p1 = np.uint64(0xCD9E8D57) * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ np.uint64(k0), p1 & m32, (p0 >> np.uint64(32)) ^ c[3] ^ np.uint64(k1), p0 & m32]
        k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
    u1 = (c[0].astype(np.float64) + 1.0) / 4294967296.0
    u2 = c[1].astype(np.float64) / 4294967296.0
    return (np.sqrt(-2.0 * np.log(u1)) * np.cos(2 * np.pi * u2)).astype(np.float32)


def natural_init(d):
    L, C, V = d.i("model.layers"), d.i("model.hidden"), d.i("model.vocab")
    vm, ctx, seed = d.i("model.vocab_multiple"), d.i("model.context"), d.i("run.seed")
    Vp = -(-V // vm) * vm
    sh = {"wte": (Vp, C), "wpe": (ctx, C)}
    for l in range(L):
        p = f"block{l}."
        sh.update({p + "ln1.weight": (C,), p + "ln1.bias": (C,), p + "attn.qkv.weight": (3, C, C),
                   p + "attn.qkv.bias": (3, C), p + "attn.proj.weight": (C, C), p + "attn.proj.bias": (C,),
                   p + "ln2.weight": (C,), p + "ln2.bias": (C,), p + "mlp.up.weight": (4 * C, C),
                   p + "mlp.up.bias": (4 * C,), p + "mlp.down.weight": (C, 4 * C), p + "mlp.down.bias": (C,)})
    sh.update({"ln_f.weight": (C,), "ln_f.bias": (C,)})
    P = {}
    for n, s in sh.items():
        if n.endswith("proj.weight") or n.endswith("down.weight"):
            std = 0.02 / math.sqrt(2 * L)
        elif decays(n):
            std = 0.02
        else:
            P[n] = (np.ones(s) if "ln" in n and n.endswith("weight") else np.zeros(s))
            continue
        a = (np.float32(std) * counter_normal(n, int(np.prod(s)), seed)).astype(np.float64).reshape(s)
        if n == "wte":
            a[V:] = 0
        P[n] = a
    return P


# ---------------------------------------------------------------- init / checkpoint writing
def mix64(z):
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xbf58476d1ce4e5b9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94d049bb133111eb)
    return z ^ (z >> np.uint64(31))


def checksum(a):
    a = np.ascontiguousarray(a, np.float32).ravel()
    idx = np.arange(a.size, dtype=np.uint64)
    with np.errstate(over="ignore"):
        return np.uint64(mix64((idx * np.uint64(0x9e3779b97f4a7c15)) ^ a.view(np.uint32).astype(np.uint64)).sum(dtype=np.uint64))


def cmd_mkinit(template, out, seed=7):
    rng = np.random.default_rng(seed)
    with h5py.File(template, "r") as f:
        attrs = dict(f.attrs)
        shapes = {n: f[n].shape for n in f.keys()}
    V = int(attrs["vocab"])
    L = max(int(n.split(".")[0][5:]) for n in shapes if n.startswith("block")) + 1
    P = {}
    for n in names(L):
        sh = shapes[n]
        if n.endswith("proj.weight") or n.endswith("down.weight"):
            a = rng.normal(0, 0.02 / math.sqrt(2 * L), sh)
        elif n in ("wte", "wpe") or n.endswith(".weight") and ("attn" in n or "mlp" in n):
            a = rng.normal(0, 0.02, sh)
        elif "ln" in n and n.endswith(".weight"):
            a = 1 + rng.normal(0, 0.1, sh)
        else:
            a = rng.normal(0, 0.02, sh)
        if n == "wte":
            a[V:] = 0
        P[n] = a.astype(np.float32)
    with h5py.File(out, "w") as f:
        for n in names(L):
            for pre in ("", "optimizer.m.", "optimizer.v."):
                a = P[n] if pre == "" else np.zeros(shapes[n], np.float32)
                ds = f.create_dataset(pre + n, data=a)
                ds.attrs["checksum"] = checksum(a)
        for k, v in attrs.items():
            f.attrs[k] = v
        for k in ("step", "samples", "tokens"):
            f.attrs[k] = np.int64(0)
        f.attrs["lr"] = np.float64(0)
    print("wrote", out)


def cmd_fdcheck(run_dir, init):
    d = Deck(run_dir + "/config.ini")
    L = d.i("model.layers")
    P, _, _, _ = load_params(init, L)
    cfg = cfg_of(d, P)
    T = d.i("train.seq_len")
    data = Data(d.s("data.path"), T)
    xs, ys = zip(*(data.train_sample(d.i("run.seed"), j) for j in range(2)))
    xs, ys = np.array(xs), np.array(ys)
    _, G = forward_backward(P, xs, ys, cfg, 1.0)
    rng = np.random.default_rng(0)
    worst = 0
    for n in P:
        for _ in range(3):
            i = tuple(rng.integers(0, s) for s in P[n].shape)
            if n == "wte":
                i = (int(xs[0, 0]),) + i[1:]
            h = 1e-5
            P[n][i] += h
            lp, _ = forward_backward(P, xs, ys, cfg, 1.0, False)
            P[n][i] -= 2 * h
            lm, _ = forward_backward(P, xs, ys, cfg, 1.0, False)
            P[n][i] += h
            fd = (lp - lm) / (2 * h)
            e = abs(fd - G[n][i]) / max(abs(fd), abs(G[n][i]), 1e-6)
            worst = max(worst, e)
            if e > 1e-4:
                print(f"{n}{i}: fd {fd:.8e} analytic {G[n][i]:.8e}")
    print("finite differences: worst rel error", worst)
    return 1 if worst > 1e-4 else 0


if __name__ == "__main__":
    a = sys.argv[1:]
    if a and a[0] == "mkinit" and len(a) >= 3:
        cmd_mkinit(a[1], a[2], int(a[a.index("--seed") + 1]) if "--seed" in a else 7)
    elif a and a[0] == "run" and len(a) >= 3:
        sys.exit(cmd_run(a[1], a[2]))
    elif a and a[0] == "fdcheck" and len(a) >= 3:
        sys.exit(cmd_fdcheck(a[1], a[2]))
    else:
        sys.exit(__doc__)
