"""Contact sheet of synthetic RibFrac CTs: per fracture an axial and a coronal slice through its centre, mask outlined.

    python training/ribfrac_contact_sheet.py --out sheet.png [--seed 0] [--cases 4] [--shape X Y Z]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np


def main() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from medchallenge.synth.ribfrac_ct import case_rng, generate_case

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cases", type=int, default=4)
    parser.add_argument("--shape", type=int, nargs=3, default=None)
    parser.add_argument("--per-row", type=int, default=4, help="fractures per row (two panels each)")
    args = parser.parse_args()
    panels = []
    for index in range(args.cases):
        case = generate_case(case_rng(args.seed, index), tuple(args.shape) if args.shape else None)
        ct, labels = case.ct, case.labels
        sx, _, sz = case.spacing
        panels.append((f"case {index}: overview z={ct.shape[0] // 2}", ct[ct.shape[0] // 2], None, 1.0))
        panels.append((f"case {index}: coronal", ct[::-1, ct.shape[1] // 2 - 40], None, sz / sx))
        for f in case.fractures:
            x, y, z = f.centre_voxel
            z = int(np.clip(z, 0, ct.shape[0] - 1))
            crop = 60
            y0, x0 = max(y - crop, 0), max(x - crop, 0)
            axial = (ct[z, y0:y + crop, x0:x + crop], labels[z, y0:y + crop, x0:x + crop] == f.label)
            zc = max(int(crop * sx / sz), 8)
            z0 = max(z - zc, 0)
            yy = int(np.clip(y, 0, ct.shape[1] - 1))
            coronal = (ct[z0:z + zc, yy, x0:x + crop][::-1], labels[z0:z + zc, yy, x0:x + crop][::-1] == f.label)
            title = f"c{index} L{f.label} {f.appearance} code {f.code}"
            panels.append((title + " ax", *axial, 1.0))
            panels.append((title + " cor", *coronal, sz / sx))
    cols = 2 * args.per_row
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(2.6 * cols, 2.6 * rows))
    for ax in np.ravel(axes):
        ax.axis("off")
    for ax, (title, image, *rest) in zip(np.ravel(axes), panels):
        mask, aspect = (rest[0], rest[1]) if len(rest) == 2 else (None, rest[0])
        ax.imshow(image, cmap="gray", vmin=-400, vmax=1000, aspect=aspect, interpolation="nearest")
        if mask is not None and mask.any():
            ax.contour(mask, levels=[0.5], colors="r", linewidths=0.6)
        ax.set_title(title, fontsize=7)
    fig.tight_layout()
    fig.savefig(args.out, dpi=80)


if __name__ == "__main__":
    main()
