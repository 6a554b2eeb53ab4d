#!/usr/bin/env python3
"""Summarises the runs of tools/bench/peers.sh: medians over the alternating repetitions,
lmstack / peer ratios and the % of this machine's limits (lmstack doctor), printed as a
Markdown table and written as JSON (schema lmstack.peers.v1, docs/bench_peers.md).

The % of limit of a llama.cpp figure uses lmstack's count of the same work: prefill FLOPs per
token of the model at that prompt length, decode bytes read per token (weights + KV) at the same
context, so both tools are judged by one yardstick and the two % differ by the ratio alone.
Standard library only."""
import argparse, datetime, json, statistics, sys
from collections import defaultdict


def med(xs):
    return statistics.median(xs) if xs else None


def fmt(x, digits=1):
    return "-" if x is None else f"{x:,.{digits}f}"


def pct(x):
    return "-" if x is None else f"{100 * x:.0f}%"


def main():
    ap = argparse.ArgumentParser()
    for k in ("raw", "doctor", "out", "llama-cpp-python", "lmstack-commit", "command"):
        ap.add_argument("--" + k, required=True)
    for k in ("threads", "prompt", "gen", "reps", "train-batch", "train-seq"):
        ap.add_argument("--" + k, type=int, required=True)
    a = ap.parse_args()
    doctor = json.load(open(a.doctor))
    runs = [json.loads(line) for line in open(a.raw) if line.strip()]

    # samples[(model, type)][(tool, phase)] = [tok/s ...]; lmstack's fractions kept per sample.
    samples = defaultdict(lambda: defaultdict(list))
    frac = defaultdict(lambda: defaultdict(list))  # lmstack fraction of limit per tok/s sample
    extra, versions = {}, {}
    for r in runs:
        key, res = (r["model"], r["type"]), r["result"]
        if r["tool"] == "llama.cpp":
            for t in res:
                phase = "prefill" if t["n_prompt"] > 0 and t["n_gen"] == 0 else "decode"
                samples[key][("llama.cpp", phase)].append(t["avg_ts"])
                versions["llama.cpp"] = f"{t['build_commit']} (build {t['build_number']})"
                extra.setdefault(key, {})["llama_model_type"] = t["model_type"]
                extra[key]["gguf_bytes"] = t["model_size"]
                extra[key]["n_params"] = t["model_n_params"]
                extra[key]["llama_repack"] = t.get("repack")
                versions["llama.cpp cpu_info"] = t.get("cpu_info", "")
        elif r["what"] == "prefill":
            samples[key][("lmstack", "prefill")].append(res["tok_s"])
            frac[key]["prefill"].append(res["fraction_of_peak"] / res["tok_s"])
            extra.setdefault(key, {})["peak_f32_gflops"] = res["peak_f32_gflops"]
        elif r["what"] == "decode":
            samples[key][("lmstack", "decode")].append(res["tok_s"])
            frac[key]["decode"].append(res["fraction_of_roofline"] / res["tok_s"])
            e = extra.setdefault(key, {})
            e["decode_bytes_per_token"] = res["weight_bytes"] + res["kv_bytes"]
            e["decode_roof"] = "LLC read" if res["fits_llc"] else "DRAM read"
            e["decode_roof_gbs"] = res["llc_read_gbs"] if res["fits_llc"] else res["dram_read_gbs"]
        elif r["what"] == "train":
            samples[key][(r["tool"], "train")].append(res["tok_s"])
            if r["tool"] == "lmstack":
                frac[key]["train"].append(res["mfu"] / res["tok_s"])
                extra.setdefault(key, {})["peak_gflops"] = res["peak_gflops"]
            else:
                versions["pytorch"] = res["version"]

    rows, train_rows = [], []
    for key in samples:  # in the order they ran: --models, then --types
        s = samples[key]
        if ("lmstack", "train") in s or ("pytorch", "train") in s:
            lm, pt = med(s[("lmstack", "train")]), med(s[("pytorch", "train")])
            per = med(frac[key]["train"])
            train_rows.append({
                "model": key[0], "dtype": key[1], "batch": a.train_batch, "seq": a.train_seq,
                "lmstack_tok_s": lm, "pytorch_tok_s": pt,
                "ratio": lm / pt if lm and pt else None,
                "lmstack_mfu": per * lm if per and lm else None,
                "pytorch_mfu": per * pt if per and pt else None,
                "peak_gflops": extra.get(key, {}).get("peak_gflops"),
                "runs": min(len(v) for v in s.values()),
                "samples": {"lmstack": s[("lmstack", "train")],
                            "pytorch": s[("pytorch", "train")]}})
            continue
        row = {"model": key[0], "type": key[1], **extra.get(key, {})}
        for phase in ("prefill", "decode"):
            lm, ll = med(s[("lmstack", phase)]), med(s[("llama.cpp", phase)])
            per = med(frac[key][phase])
            row[phase] = {"lmstack_tok_s": lm, "llama_cpp_tok_s": ll,
                          "ratio": lm / ll if lm and ll else None,
                          "lmstack_of_limit": per * lm if per and lm else None,
                          "llama_cpp_of_limit": per * ll if per and ll else None,
                          "samples": {"lmstack": s[("lmstack", phase)],
                                      "llama.cpp": s[("llama.cpp", phase)]}}
        row["runs"] = min(len(v) for v in s.values())
        rows.append(row)

    m, q, c = doctor["memory"], doctor["quality"], doctor["compute"]
    runs_done = min([r["runs"] for r in rows + train_rows] or [0])
    lines = [
        f"machine: {doctor['cpu']['model']}, {doctor['cpu']['logical_cpus']} logical CPUs; "
        f"doctor: DRAM read {m['dram_read_gbs']:.1f} GB/s, LLC read {m['llc_read_gbs']:.1f} GB/s, "
        f"f32 FMA {c['peak_f32_gflops']:.0f} GFLOP/s"
        + (f" (busy: {', '.join(q['busy_reasons'])})" if q.get("busy") else " (quiet)"),
        f"lmstack {a.lmstack_commit}; llama.cpp {versions.get('llama.cpp', '-')} from "
        f"llama-cpp-python {a.llama_cpp_python}; PyTorch {versions.get('pytorch', '-')}; "
        f"{a.threads} threads, medians of {runs_done} alternating runs"
        + (f" (of {a.reps} asked)" if runs_done < a.reps else ""),
        "",
    ]
    if rows:
        lines += [
            f"| model | type | prefill {a.prompt} lmstack tok/s | llama.cpp | ratio | % of f32 FMA "
            f"peak (lmstack / llama.cpp) | decode {a.gen} lmstack tok/s | llama.cpp | ratio | "
            f"% of read roofline (lmstack / llama.cpp) |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in rows:
            p, d = r["prefill"], r["decode"]
            lines.append(
                f"| {r['model']} | {r['type']} | {fmt(p['lmstack_tok_s'])} | "
                f"{fmt(p['llama_cpp_tok_s'])} | {fmt(p['ratio'], 2)} | "
                f"{pct(p['lmstack_of_limit'])} / {pct(p['llama_cpp_of_limit'])} | "
                f"{fmt(d['lmstack_tok_s'])} | {fmt(d['llama_cpp_tok_s'])} | {fmt(d['ratio'], 2)} | "
                f"{pct(d['lmstack_of_limit'])} / {pct(d['llama_cpp_of_limit'])} "
                f"({r.get('decode_roof', '?')}) |")
        lines.append("")
    if train_rows:
        lines += [
            "| training (model shape) | dtype | batch x seq | lmstack tok/s | PyTorch tok/s | ratio "
            "| MFU lmstack / PyTorch |",
            "|---|---|---|---:|---:|---:|---:|"]
        for r in train_rows:
            lines.append(
                f"| {r['model']} | {r['dtype']} | {r['batch']} x {r['seq']} | "
                f"{fmt(r['lmstack_tok_s'], 0)} | {fmt(r['pytorch_tok_s'], 0)} | "
                f"{fmt(r['ratio'], 2)} | {pct(r['lmstack_mfu'])} / {pct(r['pytorch_mfu'])} |")
    print("\n".join(lines))

    out = {
        "schema": "lmstack.peers.v1",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": a.command,
        "settings": {"threads": a.threads, "prompt_tokens": a.prompt, "gen_tokens": a.gen,
                     "reps": a.reps, "train_batch": a.train_batch, "train_seq": a.train_seq},
        "versions": {"lmstack": a.lmstack_commit, "llama-cpp-python": a.llama_cpp_python,
                     **versions},
        "machine": {"cpu": doctor["cpu"], "memory": doctor["memory"],
                    "compute": doctor["compute"], "quality": doctor["quality"]},
        "inference": rows,
        "training": train_rows,
        "table": lines,
    }
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
