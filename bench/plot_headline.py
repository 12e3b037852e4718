#!/usr/bin/python3
"""Plots headline_bench's JSON: transmission time against link rate for the
network baseline and travelling, with the seed's points beside ours, and the
training time per run (the seed's and the built-in trainer's, measured) as
lines to compare with.

usage: /usr/bin/python3 bench/plot_headline.py HEADLINE.json OUT.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        h = json.load(f)
    # Unshaped/uncapped is drawn at the right edge, past the fastest cap.
    rates = [c["rate_bits_per_second"] for c in h["baseline"] if c["rate_bits_per_second"]]
    top = max(rates + [10e9]) * 4
    x = lambda r: r if r else top  # noqa: E731
    mib = h["table_bytes"] >> 20
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    measured, extrapolated = [], []
    for row in h["table"]:
        if row["design"] != "network" or row["transmission_seconds"] is None:
            continue
        pt = (x(row["rate_bits_per_second"]), row["transmission_seconds"])
        (extrapolated if row["extrapolated"] else measured).append(pt)
    line = sorted(measured + extrapolated)
    ax.plot([p[0] for p in line], [p[1] for p in line], "-", color="tab:blue", alpha=0.5)
    ax.plot([p[0] for p in measured], [p[1] for p in measured], "o", color="tab:blue",
            label=f"network (gRPC+mTLS), measured, {mib} MiB")
    if extrapolated:
        ax.plot([p[0] for p in extrapolated], [p[1] for p in extrapolated], "o",
                mfc="none", color="tab:blue", label="network, extrapolated (linear)")
    seed = sorted((x(p["rate_bits_per_second"]), p["seconds"]) for p in h["seed"]["network"])
    ax.plot([p[0] for p in seed], [p[1] for p in seed], "s--", color="tab:gray",
            label="network, seed (CCS'25)")
    travel = [r for r in h["table"] if r["design"] == "travelling"]
    xs = [min(rates + [4e6]) / 1.5, top * 1.5]
    if travel:
        t = travel[0]["transmission_seconds"]
        ax.plot(xs, [t, t], "-", color="tab:green", label=f"travelling, measured ({t:.2f} s)")
    lo, hi = h["seed"]["travelling_seconds"]
    ax.fill_between(xs, [lo, lo], [hi, hi], color="tab:olive", alpha=0.4,
                    label=f"travelling, seed ({lo}-{hi} s)")
    # Training per run beside transmission: the seed's and the built-in
    # trainer's, measured on the same window.
    ts = h["seed"]["training_seconds"]
    ax.plot(xs, [ts, ts], ":", color="tab:red", label=f"training per run, seed ({ts:.0f} s)")
    trained = h.get("training_measured") or {}
    if trained.get("seconds"):
        tm = trained["seconds"]
        ax.plot(xs, [tm, tm], "-.", color="tab:red",
                label=f"training per run, built-in trainer, measured ({tm:.1f} s)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(xs)
    ticks = sorted(set(rates)) + [top]
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{r/1e9:g}G" if r >= 1e9 else f"{r/1e6:g}M" for r in ticks[:-1]]
                       + ["uncapped"])
    ax.minorticks_off()
    ax.set_xlabel("link rate (bit/s)")
    ax.set_ylabel(f"s: transmission of one {mib} MiB window; training per run")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
