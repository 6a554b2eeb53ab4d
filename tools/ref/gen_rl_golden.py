#!/usr/bin/env python3
"""PyTorch (float64 autograd) reference for tests/rl/grpo_test.cc and tests/rl/dpo_test.cc.

The policy is the tiny llama of tests/data/train/llama/model; the frozen reference is the same
weights plus seeded Gaussian noise (so the KL is not zero). Rollouts and preference pairs are
seeded random token ids, each sequence run alone (no padding: the C++ side packs and pads).

GRPO (Shao et al. 2024): group-normalized advantages (unbiased std, eps), log-probs at
temperature tau, clipped ratio against the policy's own log-probs before the update, k3 KL to
the reference, token-mean loss over a mini-batch; epochs x mini-batches updates with
clip_grad_norm_ and torch.optim.AdamW. A second case: one sequence-mean update.
DPO (Rafailov et al. 2023, eq. 7): mean over pairs of -log sigmoid(beta * (chosen log-ratio -
rejected log-ratio)), sequence log-probs summed over the response tokens; the loss and every
gradient.

Writes <out>/ref/{config.json,model.safetensors}, <out>/grpo.json, <out>/grpo_final.safetensors,
<out>/dpo.json, <out>/dpo_grads.safetensors.
Usage: /work/venv/bin/python tools/ref/gen_rl_golden.py --out tests/data/rl
"""
import argparse, json, os, shutil, sys
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_model_logits as ref  # noqa: E402
from gen_train_parity import write_safetensors  # noqa: E402

torch.set_default_dtype(torch.float64)
POLICY = "tests/data/train/llama/model"
GRPO = dict(groups=2, group_size=4, tau=0.7, clip_eps=0.2, kl_coef=0.04, adv_eps=1e-6,
            epochs=2, minibatches=2, lr=3e-3, beta1=0.9, beta2=0.999, eps=1e-8, grad_clip=1.0)
DPO = dict(pairs=3, beta=0.1)


def seq_logp(cfg, w, prompt, response, tau):
    """log softmax(z / tau) of each response token, the sequence run alone."""
    full = prompt + response
    logits = ref.forward(cfg, w, full[:-1]) / tau
    lp = torch.log_softmax(logits, -1)
    pos = torch.arange(len(prompt) - 1, len(full) - 1)
    return lp[pos, torch.tensor(response)]


def advantages(rewards, g, eps):
    r = torch.tensor(rewards).view(-1, g)
    return ((r - r.mean(1, keepdim=True)) / (r.std(1, keepdim=True) + eps)).flatten()


def grpo_loss(cfg, w, rows, old, refl, adv, agg, hp):
    ntok = sum(len(r["response"]) for r in rows)
    loss, kl = 0.0, 0.0
    clipped, count = 0, 0
    for i, r in enumerate(rows):
        lp = seq_logp(cfg, w, r["prompt"], r["response"], hp["tau"])
        ratio = torch.exp(lp - old[i])
        a = adv[i]
        surr = torch.minimum(ratio * a, torch.clamp(ratio, 1 - hp["clip_eps"], 1 + hp["clip_eps"]) * a)
        clipped += int(((ratio * a) > torch.clamp(ratio, 1 - hp["clip_eps"], 1 + hp["clip_eps"]) * a).sum())
        count += len(lp)
        q = refl[i] - lp
        k3 = torch.exp(q) - q - 1
        per = -surr + hp["kl_coef"] * k3
        wgt = 1.0 / ntok if agg == "token" else 1.0 / (len(rows) * len(lp))
        loss = loss + wgt * per.sum()
        kl = kl + wgt * k3.sum().item()
    return loss, kl, clipped / count


def run_grpo(cfg, init, refw, rows, agg, epochs, minibatches, hp):
    w = {k: v.clone().requires_grad_(True) for k, v in init.items()}
    opt = torch.optim.AdamW(list(w.values()), lr=hp["lr"], betas=(hp["beta1"], hp["beta2"]),
                            eps=hp["eps"], weight_decay=0.0)
    adv = advantages([r["reward"] for r in rows], hp["group_size"], hp["adv_eps"])
    with torch.no_grad():
        old = [seq_logp(cfg, w, r["prompt"], r["response"], hp["tau"]) for r in rows]
        refl = [seq_logp(cfg, refw, r["prompt"], r["response"], hp["tau"]) for r in rows]
    out = dict(advantages=adv.tolist(), old_logprobs=[o.tolist() for o in old], losses=[], kls=[],
               clip_fracs=[], grad_norms=[])
    per_mb = len(rows) // minibatches
    for _ in range(epochs):
        for m in range(minibatches):
            sl = slice(m * per_mb, (m + 1) * per_mb)
            opt.zero_grad()
            loss, kl, cf = grpo_loss(cfg, w, rows[sl], old[sl], refl[sl], adv[sl], agg, hp)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(list(w.values()), hp["grad_clip"])
            opt.step()
            out["losses"].append(loss.item())
            out["kls"].append(kl)
            out["clip_fracs"].append(cf)
            out["grad_norms"].append(norm.item())
    return out, w


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=17)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    cfg, init = ref.load_dir(POLICY)
    V = cfg["vocab_size"]
    # Reference model: policy + noise, stored as f32 (what the C++ side reads back).
    refw = {k: (v.numpy() + rng.normal(0, 0.05, v.shape)).astype(np.float32) for k, v in init.items()}
    os.makedirs(os.path.join(a.out, "ref"), exist_ok=True)
    shutil.copy(os.path.join(POLICY, "config.json"), os.path.join(a.out, "ref", "config.json"))
    write_safetensors(os.path.join(a.out, "ref", "model.safetensors"), refw)
    refw = {k: torch.tensor(v.astype(np.float64)) for k, v in refw.items()}

    hp = GRPO
    rows = []
    for g in range(hp["groups"]):
        prompt = rng.integers(1, V, size=int(rng.integers(2, 5))).tolist()
        for _ in range(hp["group_size"]):
            rows.append(dict(group=g, prompt=prompt,
                             response=rng.integers(1, V, size=int(rng.integers(1, 6))).tolist(),
                             reward=float(rng.choice([0.0, 0.1, 1.0, 1.1]))))
    token, w_token = run_grpo(cfg, init, refw, rows, "token", hp["epochs"], hp["minibatches"], hp)
    seqmean, _ = run_grpo(cfg, init, refw, rows, "seq", 1, 1, hp)
    json.dump(dict(hparams=hp, rollouts=rows, token_mean=token, seq_mean=seqmean),
              open(os.path.join(a.out, "grpo.json"), "w"), indent=1)
    write_safetensors(os.path.join(a.out, "grpo_final.safetensors"),
                      {k: t.detach().numpy() for k, t in w_token.items()})

    pairs = []
    for _ in range(DPO["pairs"]):
        pairs.append(dict(prompt=rng.integers(1, V, size=int(rng.integers(2, 5))).tolist(),
                          chosen=rng.integers(1, V, size=int(rng.integers(1, 6))).tolist(),
                          rejected=rng.integers(1, V, size=int(rng.integers(1, 6))).tolist()))
    w = {k: v.clone().requires_grad_(True) for k, v in init.items()}
    loss, margins = 0.0, []
    for p in pairs:
        pc = seq_logp(cfg, w, p["prompt"], p["chosen"], 1.0).sum()
        pr = seq_logp(cfg, w, p["prompt"], p["rejected"], 1.0).sum()
        with torch.no_grad():
            rc = seq_logp(cfg, refw, p["prompt"], p["chosen"], 1.0).sum()
            rr = seq_logp(cfg, refw, p["prompt"], p["rejected"], 1.0).sum()
        h = DPO["beta"] * ((pc - rc) - (pr - rr))
        margins.append(h.item())
        loss = loss - torch.nn.functional.logsigmoid(h) / len(pairs)
    loss.backward()
    json.dump(dict(hparams=DPO, pairs=pairs, loss=loss.item(), margins=margins),
              open(os.path.join(a.out, "dpo.json"), "w"), indent=1)
    write_safetensors(os.path.join(a.out, "dpo_grads.safetensors"),
                      {k: t.grad.numpy() for k, t in w.items()})
    print("grpo token-mean losses", token["losses"], "kls", token["kls"], "clip", token["clip_fracs"])
    print("grpo seq-mean loss", seqmean["losses"], "dpo loss", loss.item())


if __name__ == "__main__":
    main()
