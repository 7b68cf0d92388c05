# SPDX-License-Identifier: Apache-2.0
"""Turns the outputs of the peer benchmark's runs (train_gcn's and the peers' --metrics JSON lines
and --summary JSON, plus the wall time the harness measured) into the results JSON and the
Markdown tables: per-epoch time, peak RSS, accuracy, ratios Tessera/peer, time to accuracy and
the acceptance figures. Standard library only; run_peers.py calls it and tests/scripts tests it.
"""
import json
import math
import os
import statistics

TESSERA_1 = "tessera-1"
TESSERA_2 = "tessera-2"
PYG = "pyg-gcn"
SAGE = "pyg-sage-minibatch"
PEER_ORDER = ["pyg-gcn", "pyg-gcn-edge-index", "dgl-gcn", SAGE]
TTA_DATASETS = ["arxiv-like", "products-like"]
MB = 1e6


def sage_name(setting):
    """The name a setting of the mini-batch sweep runs under: 'pyg-sage-minibatch
    BATCH:FANOUTS:LR', as run_peers.py's --sage-sweep spells it."""
    return (f"{SAGE} {setting['batch_size']}:{','.join(map(str, setting['fanouts']))}:"
            f"{setting['lr']:g}")


def is_sage(system):
    """The mini-batch peer, under its plain name or a setting's (sage_name)."""
    return system == SAGE or system.startswith(SAGE + " ")


def file_stem(system):
    """A system's name as a file name: no spaces, colons or commas."""
    return system.replace(" ", "-").replace(":", "_").replace(",", "-")


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def read_json(path):
    with open(path) as f:
        return json.load(f)


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def timed_epoch_median(metrics, warmup):
    """Median epoch_s of the epochs after the first `warmup` (all of them if there are no more)."""
    times = [m["epoch_s"] for m in metrics if m["epoch"] > warmup]
    if not times:
        times = [m["epoch_s"] for m in metrics]
    return median(times)


def time_to_accuracy(metrics, wall_s, target):
    """Seconds from process start to the end of the first evaluation with valid_acc >= target:
    the wall time the harness measured (start-up, loading, partitioning, set-up, every epoch,
    the final write and exit) less the epochs and evaluations after that one. None: not reached."""
    for i, m in enumerate(metrics):
        if m.get("valid_acc") is not None and m["valid_acc"] >= target:
            after = sum(n["epoch_s"] + n.get("eval_s", 0.0) for n in metrics[i + 1:])
            return {"seconds": wall_s - after, "epoch": m["epoch"]}
    return None


def run_record(system, dataset, rep, seed, wall_s, summary, metrics, warmup, rusage_maxrss=None):
    """One run's figures in common terms, whichever system wrote the files."""
    is_tessera = system.startswith("tessera")
    record = {
        "system": system, "dataset": dataset, "rep": rep, "seed": seed, "wall_s": wall_s,
        "epochs": len(metrics),
        "epoch_s": timed_epoch_median(metrics, warmup),
        "eval_s": median([m.get("eval_s") for m in metrics if m["epoch"] > warmup]
                         or [m.get("eval_s") for m in metrics]),
        "load_s": summary.get("load_s"), "setup_s": summary.get("setup_s"),
        "best_valid_acc": summary.get("best_valid_acc"),
        "test_acc_at_best_valid": summary.get("test_acc_at_best_valid"),
        "final_test_acc": summary.get("final_test_acc"),
        "valid_curve": [m.get("valid_acc") for m in metrics],
        "epoch_s_list": [m["epoch_s"] for m in metrics],
        "eval_s_list": [m.get("eval_s", 0.0) for m in metrics],
        "rusage_maxrss_bytes": rusage_maxrss,
        "stopped": summary.get("stopped"),
    }
    if is_tessera:
        record["ranks"] = summary.get("ranks", 1)
        record["threads_per_rank"] = summary.get("threads")
        record["peak_rss_bytes"] = summary.get("peak_rss_bytes_max")
        record["peak_rss_bytes_sum"] = summary.get("peak_rss_bytes_sum")
        record["operator_nnz"] = summary.get("graph_edges")
        partition = summary.get("partition", {})
        record["partition_s"] = partition.get("seconds")
        bytes_per_epoch = summary.get("comm_bytes_per_epoch", {})
        record["comm_bytes_per_epoch"] = sum(bytes_per_epoch.values()) if bytes_per_epoch else 0
        # Tessera's CPU kernels and its BLAS with the core OpenBLAS chose (train_gcn --version).
        record["blas"] = (summary.get("provenance") or {}).get("cpu_kernels")
    else:
        record["ranks"] = 1
        record["threads_per_rank"] = summary.get("threads")
        record["peak_rss_bytes"] = summary.get("peak_rss_bytes")
        record["peak_rss_bytes_sum"] = summary.get("peak_rss_bytes")
        record["training_peak_rss_bytes"] = summary.get("training_peak_rss_bytes")
        record["rss_after_import_bytes"] = summary.get("rss_after_import_bytes")
        record["operator_nnz"] = summary.get("operator_nnz")
        record["versions"] = summary.get("versions")
        blas = (summary.get("versions") or {}).get("torch_blas")
        record["blas"] = f"torch's BLAS: {blas}" if blas else None
    return record


def blas_line(runs):
    """The BLAS (and kernels) each system ran with, from its first run that recorded them."""
    seen = {}
    for r in runs:
        system = SAGE if is_sage(r["system"]) else r["system"]  # one line for the sweep
        if r.get("blas") and system not in seen:
            seen[system] = r["blas"]
    if not seen:
        return ""
    return "BLAS of each system, as it reported: " + "; ".join(
        f"{system}: {blas}" for system, blas in seen.items()) + ".\n"


def _mean_std(values):
    values = [v for v in values if v is not None]
    if not values:
        return None, None
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def aggregate(records, unavailable):
    """Per dataset and system: medians over repetitions of the timing figures, the largest peak
    RSS, accuracy mean and std over the repetitions' seeds. `unavailable` maps a system that could
    not run to its reason; it appears in every dataset's table with that reason."""
    out = {}
    for r in records:
        out.setdefault(r["dataset"], {}).setdefault(r["system"], []).append(r)
    table = {}
    for dataset, systems in out.items():
        rows = {}
        for system, runs in systems.items():
            row = {"system": system, "runs": len(runs), "ranks": runs[0]["ranks"],
                   "threads_per_rank": runs[0]["threads_per_rank"],
                   "epochs": runs[0]["epochs"],
                   "epoch_s": median([r["epoch_s"] for r in runs]),
                   "epoch_s_min_run": min(r["epoch_s"] for r in runs),
                   "epoch_s_max_run": max(r["epoch_s"] for r in runs),
                   "eval_s": median([r["eval_s"] for r in runs]),
                   "load_s": median([r["load_s"] for r in runs]),
                   "peak_rss_bytes": max(r["peak_rss_bytes"] or 0 for r in runs),
                   "peak_rss_bytes_sum": max(r["peak_rss_bytes_sum"] or 0 for r in runs),
                   "operator_nnz": runs[0]["operator_nnz"],
                   "load_during": median([r.get("load_during") for r in runs])}
            for key in ("test_acc_at_best_valid", "final_test_acc", "best_valid_acc"):
                row[key], row[key + "_std"] = _mean_std([r[key] for r in runs])
            if runs[0].get("rss_after_import_bytes") is not None:
                row["rss_after_import_bytes"] = max(r["rss_after_import_bytes"] for r in runs)
            if runs[0].get("training_peak_rss_bytes") is not None:
                row["training_peak_rss_bytes"] = max(r["training_peak_rss_bytes"] or 0
                                                     for r in runs)
            if runs[0].get("versions"):
                row["versions"] = runs[0]["versions"]
            if runs[0].get("comm_bytes_per_epoch") is not None:
                row["comm_bytes_per_epoch"] = runs[0]["comm_bytes_per_epoch"]
            rows[system] = row
        for system, reason in unavailable.items():
            rows.setdefault(system, {"system": system, "unavailable": reason})
        table[dataset] = rows
    return table


def add_ratios(table):
    """Tessera/peer ratios per dataset: epoch time and peak RSS of tessera-1 and tessera-2 (the
    largest rank's peak) over each peer. Below 1: Tessera is faster or smaller."""
    for rows in table.values():
        for peer in rows.values():
            # A mini-batch epoch is another unit of work: no ratio (see time to accuracy).
            if peer["system"].startswith("tessera") or "unavailable" in peer or \
                    is_sage(peer["system"]):
                continue
            peer["ratios"] = {}
            for name in (TESSERA_1, TESSERA_2):
                t = rows.get(name)
                if not t or "unavailable" in t:
                    continue
                peer["ratios"][name] = {
                    "epoch_time": t["epoch_s"] / peer["epoch_s"],
                    "peak_rss": t["peak_rss_bytes"] / peer["peak_rss_bytes"],
                }
    return table


def tta_target(entries, root, dataset="arxiv-like", minus_points=1.0):
    """The time-to-accuracy target: tessera-1's best validation accuracy in repetition 0 (seed
    0) on `dataset`, less `minus_points`; None without that run. `entries`: manifest runs."""
    for e in entries:
        if (e["system"], e["dataset"], e["rep"]) == (TESSERA_1, dataset, 0):
            return read_json(os.path.join(root, e["summary"]))["best_valid_acc"] - \
                minus_points / 100.0
    return None


def tessera_1_time_to_target(entries, root, dataset, target):
    """tessera-1's seconds to `target` in repetition 0 on `dataset` (manifest runs); None if it
    did not run or did not reach it."""
    for e in entries:
        if (e["system"], e["dataset"], e["rep"]) == (TESSERA_1, dataset, 0):
            reached = time_to_accuracy(read_jsonl(os.path.join(root, e["metrics"])),
                                       e["wall_s"], target)
            return reached["seconds"] if reached else None
    return None


def time_to_accuracy_table(records, dataset, minus_points=1.0, give_up_factor=None):
    """Target: tessera-1's best validation accuracy in repetition 0, less `minus_points`; each
    run's time to reach it, medians per system."""
    runs = [r for r in records if r["dataset"] == dataset]
    best = next((r["best_valid_acc"] for r in runs
                 if r["system"] == TESSERA_1 and r["rep"] == 0), None)
    if best is None:
        return None
    target = best - minus_points / 100.0
    per_system = {}
    for r in runs:
        metrics = [{"epoch": i + 1, "valid_acc": v, "epoch_s": e, "eval_s": s}
                   for i, (v, e, s) in enumerate(zip(r["valid_curve"], r["epoch_s_list"],
                                                     r["eval_s_list"]))]
        reached = time_to_accuracy(metrics, r["wall_s"], target)
        entry = per_system.setdefault(r["system"], {"system": r["system"], "runs": 0,
                                                    "reached": 0, "seconds": [], "epochs": [],
                                                    "best_valid_acc": [], "wall_s": [],
                                                    "gave_up": 0})
        entry["runs"] += 1
        entry["gave_up"] += r.get("stopped") == "gave_up"
        entry["best_valid_acc"].append(r["best_valid_acc"])
        entry["wall_s"].append(r["wall_s"])
        if reached:
            entry["reached"] += 1
            entry["seconds"].append(reached["seconds"])
            entry["epochs"].append(reached["epoch"])
    rows = []
    for entry in per_system.values():
        rows.append({"system": entry["system"], "runs": entry["runs"],
                     "reached": entry["reached"],
                     "seconds": median(entry["seconds"]),
                     "epoch": median(entry["epochs"]),
                     "best_valid_acc": median(entry["best_valid_acc"]),
                     "wall_s": median(entry["wall_s"]), "gave_up": entry["gave_up"]})
    t1 = next((r for r in rows if r["system"] == TESSERA_1), None)
    for r in rows:
        if t1 and t1["seconds"] and r["seconds"]:
            r["tessera_1_over_this"] = t1["seconds"] / r["seconds"]
    rows.sort(key=lambda r: _order(r["system"]))
    return {"dataset": dataset, "target_valid_acc": target, "tessera_1_best_valid_acc": best,
            "minus_points": minus_points, "systems": rows, "anchor": sweep_anchor(rows),
            "give_up_factor": give_up_factor,
            "give_up_s": give_up_factor * t1["seconds"] if give_up_factor and t1 and
            t1["seconds"] else None}


def sweep_anchor(rows):
    """The tuned mini-batch peer: the setting of the sweep with the shortest time to the target,
    and each Tessera row's time over it (below 1: Tessera is there first). None if no setting
    reached the target."""
    reached = [r for r in rows if is_sage(r["system"]) and r["seconds"] is not None]
    if not reached:
        return None
    best = min(reached, key=lambda r: r["seconds"])
    anchor = {"system": best["system"], "seconds": best["seconds"],
              "settings_tried": sum(is_sage(r["system"]) for r in rows)}
    for r in rows:
        if r["system"] in (TESSERA_1, TESSERA_2) and r["seconds"] is not None:
            anchor[r["system"].replace("-", "_") + "_over_anchor"] = r["seconds"] / best["seconds"]
    return anchor


def acceptance(table, dataset, peer=PYG):
    """The issue's acceptance figures: tessera-1 against `peer` on `dataset`."""
    rows = table.get(dataset, {})
    t, p = rows.get(TESSERA_1), rows.get(peer)
    if not t or not p or "unavailable" in t or "unavailable" in p:
        return None
    return {
        "dataset": dataset, "peer": peer, "epochs": t["epochs"],
        "epoch_time_ratio": t["epoch_s"] / p["epoch_s"],
        "peak_rss_ratio": t["peak_rss_bytes"] / p["peak_rss_bytes"],
        "test_acc_at_best_valid_diff_points":
            100 * (t["test_acc_at_best_valid"] - p["test_acc_at_best_valid"]),
        "final_test_acc_diff_points": 100 * (t["final_test_acc"] - p["final_test_acc"]),
        "within_1_point": abs(t["test_acc_at_best_valid"] - p["test_acc_at_best_valid"]) <= 0.01,
    }


def _order(system):
    fixed = [TESSERA_1, TESSERA_2] + PEER_ORDER
    if is_sage(system):
        system = SAGE  # the settings of the sweep in the order they ran
    return fixed.index(system) if system in fixed else len(fixed)


def _fmt(value, digits=2, scale=1.0):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value * scale:,.{digits}f}"


def _acc(row, key):
    if row.get(key) is None:
        return "—"
    return f"{100 * row[key]:.2f} ± {100 * row[key + '_std']:.2f}"


def markdown_table(dataset, rows, cores="?"):
    """One dataset's table: a row per system, ratios Tessera/peer in the peer rows."""
    lines = [f"#### {dataset}", "",
             "| system | ranks × threads | epoch ms | eval ms | load s | peak RSS MB "
             "| test acc @ best valid % | final test acc % | T1/peer time | T1/peer RSS "
             "| T2/peer time | T2/peer RSS | machine load |",
             "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for system in sorted(rows, key=_order):
        row = rows[system]
        if "unavailable" in row:
            lines.append(f"| {system} | not run: {row['unavailable']} |" + " |" * 11)
            continue
        ratios = row.get("ratios", {})
        cells = [system, f"{row['ranks']} × {row['threads_per_rank']}",
                 _fmt(row["epoch_s"], 0, 1e3), _fmt(row["eval_s"], 0, 1e3),
                 _fmt(row["load_s"], 2), _fmt(row["peak_rss_bytes"], 0, 1 / MB),
                 _acc(row, "test_acc_at_best_valid"), _acc(row, "final_test_acc")]
        for name in (TESSERA_1, TESSERA_2):
            r = ratios.get(name)
            cells += ([_ratio(r["epoch_time"]), _ratio(r["peak_rss"])] if r else ["", ""])
        cells.append(_fmt(row.get("load_during"), 1))
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Machine load: the 1-minute load average while the system's runs went on "
              f"(median over runs); this machine has {cores} cores, so more than that means "
              "other work shared them."]
    if any(is_sage(system) and "unavailable" not in row for system, row in rows.items()):
        lines += ["", f"{SAGE} BATCH:FANOUTS:LR: an epoch is one pass over the training nodes in "
                  "mini-batches (no ratio: another unit of work); it stops at the "
                  "time-to-accuracy target (or gives up), so its accuracies are those of that "
                  "point."]
    return "\n".join(lines) + "\n"


def _ratio(value):
    """A ratio Tessera/peer; above 1 the peer is faster or smaller, and the cell says so."""
    text = f"{value:.2f}"
    return f"**{text}** (peer better)" if value > 1.0 else text


def markdown_tta(tta):
    if not tta:
        return ""
    lines = [f"#### Time to {100 * tta['target_valid_acc']:.2f}% validation accuracy on "
             f"{tta['dataset']}", "",
             f"Target: tessera-1's best validation accuracy with seed 0 "
             f"({100 * tta['tessera_1_best_valid_acc']:.2f}%) less {tta['minus_points']:g} "
             "point. Seconds from process start (loading and partitioning included).", "",
             "| system | reached (runs) | at epoch | seconds | tessera-1 / this | "
             "best valid % | whole run s |",
             "|---|--:|--:|--:|--:|--:|--:|"]
    for r in tta["systems"]:
        ratio = r.get("tessera_1_over_this")
        why = "gave up: past the best so far" if r.get("gave_up") else "not reached"
        if r.get("gave_up") and tta.get("give_up_s") and not tta.get("anchor"):
            why = f"gave up: past {tta['give_up_factor']:g}× tessera-1's time"
        seconds = (_fmt(r["seconds"], 1) if r["reached"] else
                   f"> {_fmt(r['wall_s'], 0)} ({why})")
        shown = "—" if not ratio else (f"{ratio:.2f}" if r["system"].startswith("tessera")
                                       else _ratio(ratio))
        lines.append(f"| {r['system']} | {r['reached']} of {r['runs']} | "
                     f"{_fmt(r['epoch'], 0)} | {seconds} | {shown} | "
                     f"{_fmt(r['best_valid_acc'], 2, 100)} | {_fmt(r['wall_s'], 1)} |")
    lines += ["", anchor_sentence(tta)]
    return "\n".join(lines) + "\n"


def anchor_sentence(tta):
    """Tessera against the best setting of the mini-batch sweep, in words."""
    anchor = tta.get("anchor")
    if not anchor:
        tried = [r for r in tta["systems"] if is_sage(r["system"])]
        if not tried:
            return "The mini-batch peer did not run: no anchor."
        limit = tta.get("give_up_s")
        if not limit:
            return f"No setting of the mini-batch sweep ({len(tried)} tried) reached the target: " \
                "no anchor."
        # A run that gave up was still short of the target at the limit; one that ran out of
        # epochs, at its end.
        bound = min(limit if r["gave_up"] else r["wall_s"] for r in tried)
        text = (f"No setting of the mini-batch sweep ({len(tried)} tried) reached the target; "
                f"each gave up past {tta['give_up_factor']:g}× tessera-1's time "
                f"({limit:,.0f} s) or ran out of epochs. No anchor, but a bound: every setting "
                f"needs more than {bound:,.0f} s.")
        for r in tta["systems"]:
            if r["system"] in (TESSERA_1, TESSERA_2) and r["seconds"] is not None:
                text += f" {r['system']} / the best setting: < {r['seconds'] / bound:.2f}."
        return text
    text = (f"Anchor, the best of {anchor['settings_tried']} mini-batch setting(s): "
            f"`{anchor['system']}`, {anchor['seconds']:.1f} s to the target.")
    for name in (TESSERA_1, TESSERA_2):
        ratio = anchor.get(name.replace("-", "_") + "_over_anchor")
        if ratio is not None:
            text += f" {name} / anchor: {_ratio(ratio)}."
    return text


def markdown_runs(records):
    """Every run in the order it ran, with the load beside it: the spread behind the medians."""
    lines = ["#### Every run, in order", "",
             "| dataset | system | seed | epoch ms | eval ms | best valid % | wall s "
             "| machine load |", "|---|---|--:|--:|--:|--:|--:|--:|"]
    for r in records:
        lines.append(f"| {r['dataset']} | {r['system']} | {r['seed']} | "
                     f"{_fmt(r['epoch_s'], 0, 1e3)} | {_fmt(r['eval_s'], 0, 1e3)} | "
                     f"{_fmt(r['best_valid_acc'], 2, 100)} | {_fmt(r['wall_s'], 1)} | "
                     f"{_fmt(r.get('load_during'), 1)} |")
    return "\n".join(lines) + "\n"


def markdown_acceptance(acc):
    if not acc:
        return ""
    return "\n".join([
        f"#### Acceptance figures ({acc['dataset']}, tessera-1 vs {acc['peer']}, "
        f"{acc['epochs']} epochs)", "",
        "| figure | value |", "|---|--:|",
        f"| epoch-time ratio Tessera/PyG | {_ratio(acc['epoch_time_ratio'])} |",
        f"| peak-memory ratio Tessera/PyG | {_ratio(acc['peak_rss_ratio'])} |",
        f"| test acc @ best valid, Tessera − PyG | "
        f"{acc['test_acc_at_best_valid_diff_points']:+.2f} points |",
        f"| final test acc, Tessera − PyG | {acc['final_test_acc_diff_points']:+.2f} points |",
        f"| within 1 point (test @ best valid) | {'yes' if acc['within_1_point'] else 'no'} |",
    ]) + "\n"


def peer_faster_sentences(table):
    """Plain sentences for every case where a peer beats tessera-1 on time or memory."""
    out = []
    for dataset, rows in table.items():
        for row in rows.values():
            r = row.get("ratios", {}).get(TESSERA_1)
            if not r:
                continue
            if r["epoch_time"] > 1.0:
                out.append(f"On {dataset}, {row['system']} trains an epoch "
                           f"{r['epoch_time']:.2f}× faster than Tessera on one rank.")
            if r["peak_rss"] > 1.0:
                out.append(f"On {dataset}, {row['system']} peaks at "
                           f"{1 / r['peak_rss']:.2f}× Tessera's one-rank memory.")
    return out


def render(results):
    """The whole Markdown report from the results JSON object."""
    parts = [f"### Tessera against PyG and DGL ({results['date']})", ""]
    if results.get("complete") is False:
        parts += ["**Interrupted run**: the tables hold the runs that finished (see the runs "
                  "column of results.json).", ""]
    for line in results.get("setup_lines", []):
        parts.append(f"- {line}")
    parts.append("")
    for dataset, rows in results["table"].items():
        parts.append(markdown_table(dataset, rows, (results.get("machine") or {}).get("cores")))
    for tta in results.get("time_to_accuracy", []):
        parts.append(markdown_tta(tta))
    parts.append(markdown_acceptance(results.get("acceptance")))
    gemm = results.get("gemm_gflops")
    if gemm:
        parts.append("GEMM on this machine, same run (169,343 × 256 by 256 × 256, f32, "
                     f"{results['settings']['threads']} threads): " + ", ".join(
                         f"{name} {value:.0f} GFLOP/s" for name, value in gemm.items()) + ".\n")
    line = blas_line(results["runs"])
    if line:
        parts.append(line)
    sentences = peer_faster_sentences(results["table"])
    if sentences:
        parts.append("Where a peer is better: " + " ".join(sentences) + "\n")
    parts.append(markdown_runs(results["runs"]))
    return "\n".join(parts)


def results_from_manifest(manifest, root):
    """The results object from run_peers.py's manifest: every run's files (paths relative to
    `root`) read and reduced, then the tables, time to accuracy and acceptance figures."""
    warmup = manifest["settings"]["warmup"]
    records = []
    for e in manifest["runs"]:
        summary = read_json(os.path.join(root, e["summary"]))
        metrics = read_jsonl(os.path.join(root, e["metrics"]))
        record = run_record(e["system"], e["dataset"], e["rep"], e["seed"], e["wall_s"],
                            summary, metrics, warmup, e.get("rusage_maxrss_bytes"))
        record["load_average"] = e.get("load_average")
        record["load_during"] = e.get("load_during")
        record["tessera_binary"] = e.get("tessera_binary")
        records.append(record)
    table = add_ratios(aggregate(records, manifest.get("unavailable", {})))
    datasets = [d for d in TTA_DATASETS if any(r["dataset"] == d for r in records)]
    results = {k: manifest.get(k) for k in
               ("date", "command", "machine", "settings", "versions", "unavailable",
                "load_average_before", "load_average_after", "minutes", "gemm_gflops",
                "complete", "pip_freeze")}
    results["table"] = table
    factor = (manifest.get("settings") or {}).get("sage_give_up_factor")
    results["time_to_accuracy"] = [t for t in (time_to_accuracy_table(records, d,
                                                                      give_up_factor=factor)
                                               for d in datasets) if t]
    results["acceptance"] = acceptance(table, "arxiv-like")
    results["runs"] = records
    results["setup_lines"] = setup_lines(results)
    return results


def setup_lines(results):
    """What a reader needs to judge the tables: machine, load, versions, settings, command."""
    s, v, m = results["settings"], results["versions"], results["machine"]
    loads = [r["load_average"] for r in results["runs"] if r.get("load_average") is not None]
    load = (f"load average {min(loads):.1f}–{max(loads):.1f} at the runs' starts"
            if loads else "load average not recorded")
    peers = [f"{k} {v[k]}" for k in ("torch", "torch_geometric", "torch_sparse", "dgl") if k in v]
    lines = [
        f"Machine: {m['cpu']}, {m['cores']} cores; {load}"
        + (f"; {results['minutes']:.0f} minutes in all" if results.get("minutes") else "") + ".",
        f"Versions: Tessera {v.get('tessera', '?')}" + "".join(", " + p for p in peers) + ".",
        f"Model: GCN, {s['num_layers']} layers, {s['hidden_channels']} hidden, dropout "
        f"{s['dropout']}, Adam lr {s['lr']}, full batch, evaluation every epoch; {s['threads']} "
        f"threads per system (tessera-2: 2 ranks × {s['threads'] // 2}).",
        "Epochs: " + ", ".join(f"{s[key]} on {name}" for name, key in
                               (("Cora", "epochs_cora"), ("arxiv-like", "epochs_arxiv"),
                                ("products-like", "epochs_products"))
                               if any(r["dataset"] == name.lower() for r in results["runs"]))
        + "; epoch time = "
        f"median over the epochs after the first {s['warmup']}, then the median over "
        f"{s['reps']} repetition(s) (seeds {', '.join(map(str, s['seeds']))}), the systems' "
        f"order rotated per repetition; accuracies are mean ± std over those seeds.",
        f"Command: `{results['command'].strip()}`.",
    ]
    if any(is_sage(r["system"]) for r in results["runs"]):
        lines.insert(-1, f"{SAGE}: after the first repetition, on each dataset but Cora, a sweep of "
                     f"{len(s.get('sage_sweep') or [None])} setting(s) (batch size, fan-outs, "
                     f"learning rate; {s.get('sage_reps', 1)} run(s) each) of at most "
                     f"{s['sage_epochs']} epochs, each run stopped at the first evaluation at or "
                     "above the time-to-accuracy target, or given up once past the best time so "
                     "far" + (f" or past {s['sage_give_up_factor']:g}× tessera-1's time"
                              if s.get("sage_give_up_factor") else "")
                     + "; the best setting is the anchor.")
    for system, reason in (results.get("unavailable") or {}).items():
        lines.append(f"{system} not run: {reason}")
    builds = sorted({r["tessera_binary"] for r in results["runs"] if r.get("tessera_binary")})
    if len(builds) > 1:
        lines.append(f"**Tessera's build changed during the run**: {len(builds)} different "
                     f"binaries ({', '.join(builds)}); see tessera_binary in every run.")
    return lines
