"""Contact sheet and realism figures of the object-CXR radiographs: synthetic images with their annotations (red:
rectangles and ellipses, green: polygons, blue circles: ECG snaps, unannotated) and the model's points (yellow with
their probability at or above the model's operating threshold, grey below it), the real radiograph RG1_UNCI.dcm of
pydicom-data with the model's points, and the grey-level statistics of both (histogram after the model's percentile
scaling, lung/mediastinum contrast, noise); with --errors, the error sheet of a validation cohort at full resolution.

    PYTHONPATH=shared python training/object_cxr_contact_sheet.py --out algorithms/object_cxr/contact_sheet.png \
        [--errors VALIDATION_COHORT --errors-out algorithms/object_cxr/error_sheet.png]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from medchallenge.algorithms.object_cxr import ForeignObjectDetector, read_radiograph
from medchallenge.synth.object_cxr_images import generate_image, image_name, write_jpeg

MODEL = Path(__file__).resolve().parents[1] / "algorithms" / "object_cxr" / "model" / "object_cxr.onnx"
TILE = 360
CROP = 320  # full-resolution pixels of an error crop


def statistics(pixels: np.ndarray) -> dict:
    """Grey-level figures on a 512-px copy scaled to its 1st-99th percentiles: histogram (10 bins), the contrast
    between the darkest and brightest thirds of the central band, and the noise (median absolute deviation of the
    difference of neighbouring pixels in the lung fields, i.e. the darkest third)."""
    image = np.asarray(Image.fromarray(pixels.astype(np.float32), mode="F").resize((512, 512), Image.BILINEAR))
    lo, hi = np.percentile(image, [1, 99])
    scaled = np.clip((image - lo) / (hi - lo), 0, 1)
    band = scaled[128:384, 64:448]
    dark, bright = np.percentile(band, [33, 67])
    lungs = band < dark
    diff = np.abs(np.diff(band, axis=1))[lungs[:, 1:]]
    return {"histogram": np.round(np.histogram(scaled, bins=10, range=(0, 1))[0] / scaled.size, 3).tolist(),
            "median": round(float(np.median(scaled)), 3),
            "lung_vs_mediastinum": round(float(np.median(band[band > bright]) - np.median(band[lungs])), 3),
            "noise_mad": round(float(np.median(diff)), 4)}


def draw_points(draw: ImageDraw.ImageDraw, points, scale: float, threshold: float) -> None:
    """Points at or above the operating threshold in yellow with their probability, weaker ones (>= 0.1) in grey."""
    for probability, x, y, *_ in points:
        if probability < 0.1:
            continue
        r, colour = 7, (255, 220, 0) if probability >= threshold else (150, 150, 150)
        draw.ellipse([x * scale - r, y * scale - r, x * scale + r, y * scale + r], outline=colour, width=2)
        draw.text((x * scale + r, y * scale - r), f"{probability:.2f}", fill=colour)


def tile(pixels: np.ndarray, annotations: str, devices, points, threshold: float) -> Image.Image:
    image = Image.fromarray(pixels).convert("RGB")
    scale = TILE / max(image.size)
    image = image.resize((round(image.width * scale), round(image.height * scale)))
    draw = ImageDraw.Draw(image)
    for shape in filter(None, annotations.split(";")):
        kind, *values = shape.split(" ")
        xy = [(float(x) * scale, float(y) * scale) for x, y in zip(values[::2], values[1::2])]
        if kind == "0":
            draw.rectangle(xy, outline=(255, 0, 0), width=2)
        elif kind == "1":
            draw.ellipse(xy, outline=(255, 0, 0), width=2)
        else:
            draw.polygon(xy, outline=(0, 255, 0), width=2)
    for x, y in devices:
        draw.ellipse([x * scale - 5, y * scale - 5, x * scale + 5, y * scale + 5], outline=(0, 140, 255), width=2)
    draw_points(draw, points, scale, threshold)
    return image


def annotation_mask(annotation: str, size: tuple[int, int], scale: float) -> Image.Image:
    """The annotation's shapes filled on a (W, H) x `scale` grid."""
    mask = Image.new("L", (max(1, round(size[0] * scale)), max(1, round(size[1] * scale))), 0)
    draw = ImageDraw.Draw(mask)
    for shape in filter(None, annotation.split(";")):
        kind, *values = shape.split(" ")
        xy = [(float(x) * scale, float(y) * scale) for x, y in zip(values[::2], values[1::2])]
        if kind == "0":
            draw.rectangle(xy[:2], fill=1)
        elif kind == "1":
            draw.ellipse(xy[:2], fill=1)
        else:
            draw.polygon(xy, fill=1)
    return mask


def crop_tile(path: Path, centre: tuple[float, float], annotation: str, points, threshold: float,
              label: str) -> Image.Image:
    """A CROP x CROP window of the radiograph at full resolution around `centre`, shown at TILE / 2 px, with the
    annotations and the model's points."""
    image = Image.open(path).convert("L")
    x0 = int(np.clip(centre[0] - CROP / 2, 0, max(image.width - CROP, 0)))
    y0 = int(np.clip(centre[1] - CROP / 2, 0, max(image.height - CROP, 0)))
    window = np.asarray(image.crop((x0, y0, x0 + CROP, y0 + CROP)))
    shifted = ";".join(" ".join([kind] + [str(float(v) - (x0 if k % 2 == 0 else y0)) for k, v in enumerate(values)])
                       for kind, *values in (shape.split(" ") for shape in filter(None, annotation.split(";"))))
    moved = [(p, x - x0, y - y0) for p, x, y, *_ in points]
    result = tile(window, shifted, [], moved, threshold).resize((TILE // 2, TILE // 2))
    ImageDraw.Draw(result).text((4, 4), label, fill=(255, 255, 255))
    return result


def error_sheet(detector: ForeignObjectDetector, cohort: Path, out: Path, per_row: int = 8) -> dict:
    """The validation cohort's worst errors at full resolution: the strongest points at or above the operating
    threshold outside every annotation (false positives, first row) and the objects whose best point is weakest
    (missed, second row); and where the false positives lie (near the image edge: collimation, shoulders, arms)."""
    threshold = detector.post.operating_threshold
    false_positives, misses, edge, central = [], [], 0, 0
    for line in (cohort / "ground_truth" / "annotations.csv").read_text().splitlines()[1:]:
        name, annotation = line.split(",", 1)
        path = cohort / "input" / name
        radiograph = read_radiograph(path, detector.pre.input_size[::-1])
        prediction = detector.detect(radiograph)
        w, h = radiograph.size
        scale = 0.25
        mask = np.asarray(annotation_mask(annotation, (w, h), scale))
        for p, x, y in prediction.points:
            r, c = min(int(y * scale), mask.shape[0] - 1), min(int(x * scale), mask.shape[1] - 1)
            if p >= threshold and not mask[r, c]:
                false_positives.append((p, path, (x, y), annotation, prediction.points))
                near_edge = min(x, y, w - 1 - x, h - 1 - y) < 0.12 * min(w, h)
                edge, central = edge + near_edge, central + (not near_edge)
        for shape in filter(None, annotation.split(";")):
            one = np.asarray(annotation_mask(shape, (w, h), scale))
            best = max([p for p, x, y in prediction.points
                        if one[min(int(y * scale), one.shape[0] - 1), min(int(x * scale), one.shape[1] - 1)]],
                       default=0.0)
            rows, columns = np.nonzero(one)
            if len(rows):
                misses.append((best, path, (columns.mean() / scale, rows.mean() / scale), annotation,
                               prediction.points))
    false_positives.sort(key=lambda e: -e[0])
    misses.sort(key=lambda e: e[0])
    sheet = Image.new("RGB", (per_row * TILE // 2, TILE), (40, 40, 40))
    for row, (entries, what) in enumerate(((false_positives, "FP"), (misses, "object, best"))):
        for k, (p, path, centre, annotation, points) in enumerate(entries[:per_row]):
            sheet.paste(crop_tile(path, centre, annotation, points, threshold, f"{path.name} {what} {p:.2f}"),
                        (k * TILE // 2, row * TILE // 2))
    sheet.quantize(64).save(out, optimize=True)
    return {"false_positive_points_at_threshold": len(false_positives), "near_edge": edge, "central": central,
            "objects": len(misses), "objects_missed_at_threshold": sum(e[0] < threshold for e in misses)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--model", type=Path, default=MODEL)
    parser.add_argument("--seed", type=int, default=2323, help="a seed the model was not trained or tuned on")
    parser.add_argument("--images", type=int, default=7)
    parser.add_argument("--size", type=int, default=None, help="longer side (default: the generator's, 1,500-3,000)")
    parser.add_argument("--errors", type=Path, help="a validation cohort: its worst errors at full resolution ...")
    parser.add_argument("--errors-out", type=Path, help="... drawn into this PNG")
    args = parser.parse_args()
    from pydicom.data import get_testdata_file

    detector = ForeignObjectDetector(args.model, "cpu")
    if args.errors:
        print(json.dumps(error_sheet(detector, args.errors, args.errors_out), indent=1))
    tiles, synthetic_stats = [], []
    with tempfile.TemporaryDirectory() as work:
        for index in range(args.images):
            synthetic = generate_image(args.seed, index, args.size, 0.5)
            path = Path(work) / image_name(index)
            write_jpeg(path, synthetic.pixels)  # the file the algorithm reads, decoded as inference does
            prediction = detector.detect(read_radiograph(path, detector.pre.input_size[::-1]))
            tiles.append(tile(synthetic.pixels, synthetic.annotation, synthetic.device_points_px, prediction.points,
                              detector.post.operating_threshold))
            synthetic_stats.append(statistics(synthetic.pixels))
    real = read_radiograph(Path(get_testdata_file("RG1_UNCI.dcm")), (512, 512))
    prediction = detector.detect(real)
    lo, hi = np.percentile(real.pixels, [0.5, 99.5])
    display = (np.clip((real.pixels - lo) / (hi - lo), 0, 1) * 255).astype(np.uint8)
    tiles.append(tile(display, "", [], prediction.points, detector.post.operating_threshold))
    sheet = Image.new("RGB", (4 * TILE, 2 * TILE), (40, 40, 40))
    for k, image in enumerate(tiles):
        sheet.paste(image, ((k % 4) * TILE, (k // 4) * TILE))
    ImageDraw.Draw(sheet).text((3 * TILE + 8, TILE + 8), f"RG1_UNCI.dcm (real): p={prediction.probability:.2f}",
                               fill=(255, 220, 0))
    sheet.quantize(64).save(args.out, optimize=True)  # 64 colours keep the file small
    figures = {"real_RG1_UNCI": statistics(real.pixels), "real_probability": round(prediction.probability, 4),
               "real_points": [[round(v, 3) for v in p] for p in prediction.points[:5]],
               "synthetic_mean": {key: np.round(np.mean([s[key] for s in synthetic_stats], axis=0), 4).tolist()
                                  for key in ("histogram", "median", "lung_vs_mediastinum", "noise_mad")}}
    print(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
