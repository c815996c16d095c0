"""Contact sheet and realism figures of the object-CXR radiographs: synthetic images with their annotations (red:
rectangles and ellipses, green: polygons, blue circles: ECG snaps, unannotated) and the model's points (yellow, with
probability), the real radiograph RG1_UNCI.dcm of pydicom-data with the model's points, and the grey-level statistics
of both (histogram after the model's percentile scaling, lung/mediastinum contrast, noise).

    PYTHONPATH=shared python training/object_cxr_contact_sheet.py --out algorithms/object_cxr/contact_sheet.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from medchallenge.algorithms.object_cxr import ForeignObjectDetector, Radiograph, read_radiograph
from medchallenge.synth.object_cxr_images import generate_image

MODEL = Path(__file__).resolve().parents[1] / "algorithms" / "object_cxr" / "model" / "object_cxr.onnx"
TILE = 360


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


def draw_points(draw: ImageDraw.ImageDraw, points, scale: float) -> None:
    for probability, x, y, *_ in points:
        if probability < 0.1:
            continue
        r = 7
        draw.ellipse([x * scale - r, y * scale - r, x * scale + r, y * scale + r], outline=(255, 220, 0), width=2)
        draw.text((x * scale + r, y * scale - r), f"{probability:.2f}", fill=(255, 220, 0))


def tile(pixels: np.ndarray, annotations: str, devices, points) -> Image.Image:
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
    draw_points(draw, points, scale)
    return image


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=777, help="a seed the model was not trained on")
    parser.add_argument("--images", type=int, default=7)
    parser.add_argument("--size", type=int, default=1024)
    args = parser.parse_args()
    from pydicom.data import get_testdata_file

    detector = ForeignObjectDetector(MODEL, "cpu")
    tiles, synthetic_stats = [], []
    for index in range(args.images):
        synthetic = generate_image(args.seed, index, args.size, 0.5)
        rows, columns = synthetic.pixels.shape
        radiograph = Radiograph(synthetic.pixels.astype(np.float32), (columns, rows),
                                lambda x, y: list(zip(x.tolist(), y.tolist())))
        prediction = detector.detect(radiograph)
        tiles.append(tile(synthetic.pixels, synthetic.annotation, synthetic.device_points_px, prediction.points))
        synthetic_stats.append(statistics(synthetic.pixels))
    real = read_radiograph(Path(get_testdata_file("RG1_UNCI.dcm")), (512, 512))
    prediction = detector.detect(real)
    lo, hi = np.percentile(real.pixels, [0.5, 99.5])
    display = (np.clip((real.pixels - lo) / (hi - lo), 0, 1) * 255).astype(np.uint8)
    tiles.append(tile(display, "", [], prediction.points))
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
