#!/usr/bin/env python3
"""Medians of slice-sweep.sh's runs: one markdown table per place, the
median out-of-place time (us) per setting and size, and each setting's
median over the first setting's (the 128 KiB slice).

    python3 results/scripts/slice_report.py OUT_DIR/sweep.log
"""
import statistics
import sys
from collections import defaultdict


def main():
    runs = defaultdict(lambda: defaultdict(list))  # place -> setting -> [{bytes: us}]
    order = defaultdict(list)
    for line in open(sys.argv[1]):
        f = line.split()
        if len(f) < 3 or "WRONG" in f:
            continue
        place, setting, rest = f[0], f[1], f[2:]
        times = {int(rest[i]): float(rest[i + 1]) for i in range(0, len(rest) - 1, 2)}
        if setting not in order[place]:
            order[place].append(setting)
        runs[place][setting].append(times)
    for place, settings in order.items():
        sizes = sorted({b for s in settings for t in runs[place][s] for b in t})
        base = settings[0]
        med = {s: {b: statistics.median(t[b] for t in runs[place][s] if b in t) for b in sizes} for s in settings}
        print(f"\n### {place} ({len(runs[place][base])} rounds; median us, and / {base})\n")
        print("| setting | " + " | ".join(f"{b >> 10} KiB" if b < 1 << 20 else f"{b >> 20} MiB" for b in sizes) + " |")
        print("|---|" + "---|" * len(sizes))
        for s in settings:
            cells = []
            for b in sizes:
                cell = f"{med[s][b]:.0f}"
                if s != base:
                    cell += f" ({med[s][b] / med[base][b]:.2f})"
                cells.append(cell)
            print(f"| {s} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
