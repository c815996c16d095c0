"""The brightest voxel of the ct-image input as a grand-challenge `Multiple points` output: its centre in world
coordinates (mm), from the .mha header's Offset, ElementSpacing and TransformMatrix, as grand-challenge's viewer
and algorithms place points. The standard library only: the header is text, the voxels zlib-compressed or raw."""

import array
import json
import zlib
from pathlib import Path

TYPES = {"MET_SHORT": "h", "MET_USHORT": "H", "MET_INT": "i", "MET_FLOAT": "f", "MET_DOUBLE": "d"}

inputs = json.loads(Path("/input/inputs.json").read_text())
(path,) = Path("/input", inputs[0]["interface"]["relative_path"]).glob("*.mha")
data = path.read_bytes()
header = {}
offset = 0
while "ElementDataFile" not in header:
    end = data.index(b"\n", offset)
    key, _, value = data[offset:end].decode("ascii").partition(" = ")
    header[key.strip()] = value.strip()
    offset = end + 1
body = data[offset:]
if header.get("CompressedData") == "True":
    body = zlib.decompress(body)
voxels = array.array(TYPES[header["ElementType"]], body)
nx, ny, nz = (int(v) for v in header["DimSize"].split())
brightest = max(range(len(voxels)), key=voxels.__getitem__)
index = (brightest % nx, brightest // nx % ny, brightest // (nx * ny))
origin = [float(v) for v in header["Offset"].split()]
spacing = [float(v) for v in header["ElementSpacing"].split()]
axes = [float(v) for v in header["TransformMatrix"].split()]  # MetaIO: axis i's direction, then j's, then k's
world = [origin[r] + sum(axes[3 * c + r] * spacing[c] * index[c] for c in range(3)) for r in range(3)]
points = {"name": "brightest", "type": "Multiple points", "version": {"major": 1, "minor": 0},
          "points": [{"name": "brightest voxel", "point": world, "probability": 0.75}]}
Path("/output/nodules.json").write_text(json.dumps(points))
print(f"brightest voxel {index} -> {world}")
