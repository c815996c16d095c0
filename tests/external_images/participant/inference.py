"""
A participant's algorithm at a realistic size, written as grand-challenge-forge's algorithm template is (run()
looks the interface up by the slugs of its input sockets and calls that interface's handler), with ONNX Runtime
instead of torch. The networks come from the algorithm's model tarball, extracted by grand-challenge to
/opt/ml/model:

- ct-image -> tb-cavern-boxes: `unet3d.onnx`, nnU-Net's default 3-D U-Net, over tiles of up to 128^3 voxels
  (the CT padded to multiples of 32), two tiles per run; foreground above 0.5, connected components, their boxes.
- chest-x-ray -> foreign-object-likelihood, foreign-objects: `resnet50.onnx`, the radiograph resized to 512 x 512;
  the likelihood is the network's sigmoid, no points (a classifier).

ONNX Runtime's CUDA provider when the image has it (the GPU variant) and a GPU is visible, without TF32; the CPU
otherwise. The log says which provider ran and how long the network took.
"""

import json
import time
from glob import glob
from pathlib import Path

import numpy
import onnxruntime
import SimpleITK

INPUT_PATH = Path("/input")
OUTPUT_PATH = Path("/output")
MODEL_PATH = Path("/opt/ml/model")

TILE = 128
DIVISOR = 32
TILES_PER_RUN = 2
MAX_BOXES = 20
RADIOGRAPH_SIZE = 512
IMAGENET_MEAN = numpy.array([0.485, 0.456, 0.406], numpy.float32).reshape(1, 3, 1, 1)
IMAGENET_STD = numpy.array([0.229, 0.224, 0.225], numpy.float32).reshape(1, 3, 1, 1)


def run():
    # The key is a tuple of the slugs of the input sockets
    interface_key = get_interface_key()

    # Lookup the handler for this particular set of sockets (i.e. the interface)
    handler = {
        ("ct-image",): ct_image_handler,
        ("chest-x-ray",): chest_x_ray_handler,
    }[interface_key]

    # Call the handler
    return handler()


def ct_image_handler():
    image = load_image_file(location=INPUT_PATH / "images/ct")
    session = create_session(MODEL_PATH / "unet3d.onnx")
    volume = SimpleITK.GetArrayFromImage(image).astype(numpy.float32)  # (z, y, x)
    volume = (numpy.clip(volume, -1000.0, 200.0) + 400.0) / 600.0
    probability = segment(session, volume)
    write_json_file(
        location=OUTPUT_PATH / "tb-cavern-boxes.json",
        content={"version": 1, "boxes": component_boxes(probability)},
    )
    return 0


def chest_x_ray_handler():
    image = load_image_file(location=INPUT_PATH / "images/chest-x-ray")
    session = create_session(MODEL_PATH / "resnet50.onnx")
    pixels = SimpleITK.GetArrayFromImage(image).astype(numpy.float32)
    if pixels.ndim == 3 and pixels.shape[-1] in (3, 4):  # RGB(A) -> grey
        pixels = pixels[..., :3].mean(axis=-1)
    pixels = pixels.reshape(pixels.shape[-2:])
    rows = numpy.linspace(0, pixels.shape[0] - 1, RADIOGRAPH_SIZE).round().astype(int)
    columns = numpy.linspace(0, pixels.shape[1] - 1, RADIOGRAPH_SIZE).round().astype(int)
    pixels = pixels[numpy.ix_(rows, columns)]
    pixels = (pixels - pixels.min()) / max(float(pixels.max() - pixels.min()), 1e-6)
    batch = (numpy.repeat(pixels[None, None], 3, axis=1) - IMAGENET_MEAN) / IMAGENET_STD
    (logit,) = timed_run(session, batch.astype(numpy.float32))
    likelihood = float(1.0 / (1.0 + numpy.exp(-float(logit[0, 0]))))
    write_json_file(location=OUTPUT_PATH / "foreign-object-likelihood.json", content=round(likelihood, 6))
    write_json_file(
        location=OUTPUT_PATH / "foreign-objects.json",
        content={"name": "Foreign objects", "type": "Multiple points", "points": [],
                 "version": {"major": 1, "minor": 0}},
    )
    return 0


def create_session(path):
    providers = ["CPUExecutionProvider"]
    if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
        # the GPU variant: the CUDA and cuDNN libraries are pip wheels (nvidia-*), loaded from there
        onnxruntime.preload_dlls(directory="")
        providers.insert(0, ("CUDAExecutionProvider", {"use_tf32": 0}))
    session = onnxruntime.InferenceSession(str(path), providers=providers)
    print(f"{path.name}: ONNX Runtime {onnxruntime.__version__}, providers {session.get_providers()}")
    return session


def timed_run(session, batch):
    start = time.perf_counter()
    outputs = session.run(None, {session.get_inputs()[0].name: batch})
    print(f"network: input {list(batch.shape)} in {time.perf_counter() - start:.3f} s")
    return outputs


def tile_starts(size, tile):
    starts = list(range(0, size - tile + 1, tile))
    if starts[-1] + tile < size:
        starts.append(size - tile)
    return starts


def segment(session, volume):
    """Foreground probability per voxel: the padded volume in tiles of up to TILE^3, TILES_PER_RUN per run."""
    padded_shape = [-(-s // DIVISOR) * DIVISOR for s in volume.shape]
    padded = numpy.zeros(padded_shape, numpy.float32)
    padded[tuple(slice(0, s) for s in volume.shape)] = volume
    tile = [min(TILE, s) for s in padded_shape]
    corners = [(z, y, x) for z in tile_starts(padded_shape[0], tile[0])
               for y in tile_starts(padded_shape[1], tile[1]) for x in tile_starts(padded_shape[2], tile[2])]
    probability = numpy.zeros(padded_shape, numpy.float32)
    for first in range(0, len(corners), TILES_PER_RUN):
        group = corners[first:first + TILES_PER_RUN]
        windows = [tuple(slice(c, c + t) for c, t in zip(corner, tile)) for corner in group]
        batch = numpy.stack([padded[w][None] for w in windows])
        (logits,) = timed_run(session, batch)
        foreground = 1.0 / (1.0 + numpy.exp(logits[:, 0] - logits[:, 1]))
        for window, values in zip(windows, foreground):
            probability[window] = values
    return probability[tuple(slice(0, s) for s in volume.shape)]


def component_boxes(probability):
    """Boxes of the connected foreground components at least two voxels long on every axis, by maximum
    probability, at most MAX_BOXES; corners are inclusive voxel indices (x, y, z)."""
    mask = SimpleITK.GetImageFromArray((probability > 0.5).astype(numpy.uint8))
    labels = SimpleITK.ConnectedComponent(mask)
    statistics = SimpleITK.LabelIntensityStatisticsImageFilter()
    statistics.Execute(labels, SimpleITK.GetImageFromArray(probability))
    boxes = []
    for label in statistics.GetLabels():
        x, y, z, size_x, size_y, size_z = statistics.GetBoundingBox(label)
        if min(size_x, size_y, size_z) < 2:
            continue
        boxes.append({"voxel_bbox": [x, y, z, x + size_x - 1, y + size_y - 1, z + size_z - 1],
                      "probability": round(float(statistics.GetMaximum(label)), 6)})
    boxes.sort(key=lambda box: -box["probability"])
    return boxes[:MAX_BOXES]


def get_interface_key():
    # The inputs.json is a system generated file that contains information about
    # the inputs that interface with the algorithm
    inputs = load_json_file(
        location=INPUT_PATH / "inputs.json",
    )
    socket_slugs = [sv["interface"]["slug"] for sv in inputs]
    return tuple(sorted(socket_slugs))


def load_json_file(*, location):
    # Reads a json file
    with open(location, "r") as f:
        return json.loads(f.read())


def write_json_file(*, location, content):
    # Writes a json file
    with open(location, "w") as f:
        f.write(json.dumps(content, indent=4))


def load_image_file(*, location):
    # Use SimpleITK to read a file
    input_files = (
        glob(str(location / "*.tif"))
        + glob(str(location / "*.tiff"))
        + glob(str(location / "*.mha"))
    )
    return SimpleITK.ReadImage(input_files[0])


if __name__ == "__main__":
    raise SystemExit(run())
