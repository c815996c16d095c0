"""A job's output values checked by their declared socket kind, as grand-challenge validates a job's outputs
(components/backends/base.py `get_outputs` -> `ComponentInterface.create_instance` -> `ComponentInterfaceValue.clean`).

- JSON kinds (String, Float, ..., the annotation kinds, Choice, Anything): the kind's JSON schema, grand-challenge's
  `INTERFACE_VALUE_SCHEMA` of components/schemas.py as data below (`SCHEMAS`), validated as grand-challenge's
  JSONValidator validates it: with jsonschema (its Draft 7 validator; the version of grand-challenge's uv.lock),
  the error reported the one jsonschema's `best_match` picks, in jsonschema's words with the value itself replaced
  by where it is ("the value at points[2].probability"), since a container's output is never echoed.
- Image kinds: what `ComponentInterfaceValue.clean` checks of the image panimg imported (a Segmentation's segments,
  a Displacement field's shape, DICOM image sets), in grand-challenge's words.
- File kinds: grand-challenge's MimeTypeValidator of a socket value's file: the type libmagic reads from the
  file's first 2048 bytes must be one of `ALLOWED_FILE_TYPES` (one list for every file kind, as grand-challenge
  has it). libmagic is not among the project's libraries: `file_type` tells the types by their signatures.

Not checked here, and why: a socket's own JSON schema and a Segmentation's `overlay_segments` (a socket here
declares neither, so a Segmentation's voxel values are only checked to be determinable); a Chart's Vega-Lite
schema (grand-challenge fetches it from vega.github.io; here only that the chart is a JSON object, which every
Vega-Lite spec is); the content of Newick and BIOM files (grand-challenge parses them, with Bio.Phylo and
biom-format, only when a user uploads one, never for an algorithm's output); libmagic's guesses at the language of
a text file (C, Python: types outside the allowed list, refused by grand-challenge, taken for text/plain here).
"""

from __future__ import annotations

import codecs
from typing import Any

from jsonschema import Draft7Validator, ValidationError
from jsonschema.exceptions import best_match

# ----- grand-challenge's value schemas (components/schemas.py), as data -----

NUMBER: dict[str, Any] = {"type": "number"}
STRING: dict[str, Any] = {"type": "string"}
PROBABILITY = {"type": "number", "minimum": 0, "maximum": 1}
WHOLE = {"type": "number", "minimum": 0, "multipleOf": 1.0}
VERSION = {"type": "object", "properties": {"major": WHOLE, "minor": WHOLE}, "required": ["major", "minor"],
           "additionalProperties": False}


def vectors(items: dict[str, Any], count: int | None = None) -> dict[str, Any]:
    """An array of `items` (exactly `count` of them where given)."""
    schema: dict[str, Any] = {"type": "array", "items": items}
    return schema if count is None else {**schema, "minItems": count, "maxItems": count}


POINT = vectors(NUMBER, 3)  # [x, y, z] in mm
POINTS = vectors(POINT)


def annotation(type_name: str, fields: dict[str, Any], required: tuple[str, ...], *, versioned: bool,
               probability: bool = True, const: bool = False) -> dict[str, Any]:
    """One annotation object: an optional name, its `type` (enum, or const for the three-point angles), its
    fields, a version object where `versioned` (the kind's top level), a probability in [0, 1]; nothing else."""
    properties: dict[str, Any] = {"name": STRING, "type": {"const": type_name} if const else {"enum": [type_name]},
                                  **fields}
    if versioned:
        properties["version"] = VERSION
    if probability:
        properties["probability"] = PROBABILITY
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


def collection(type_name: str, key: str, element: dict[str, Any], required: tuple[str, ...]) -> dict[str, Any]:
    """A `Multiple ...` kind: a versioned object whose `key` lists elements (which carry no version)."""
    return annotation(type_name, {key: vectors(element)}, required, versioned=True, probability=False)


BOX_FIELDS = {"corners": vectors(POINT, 4)}
LINE_FIELDS = {"start": POINT, "end": POINT}
POLYGON_FIELDS = {"seed_point": POINT, "path_points": POINTS, "sub_type": STRING, "groups": vectors(STRING)}
SPLINE_FIELDS = {"seed_points": POINTS, "path_point_lists": vectors(POINTS)}
ANGLE_FIELDS = {"lines": vectors(vectors(POINT, 2), 2)}
ELLIPSE_FIELDS = {"major_axis": vectors(POINT, 2), "minor_axis": vectors(POINT, 2)}
THREE_POINT_FIELDS = {"angle": vectors(POINT, 3)}
POLYGON_REQUIRED = ("seed_point", "path_points", "sub_type", "groups")
SPLINE_REQUIRED = ("seed_points", "path_point_lists")

# the element objects of the `Multiple ...` kinds (schemas.py's point-object, 2D-bounding-box-object, ...)
POINT_ELEMENT = annotation("Point", {"point": POINT}, ("point",), versioned=False)
BOX_ELEMENT = annotation("2D bounding box", BOX_FIELDS, ("corners",), versioned=False)
LINE_ELEMENT = annotation("Distance measurement", LINE_FIELDS, ("start", "end"), versioned=False)
POLYGON_ELEMENT = annotation("Polygon", POLYGON_FIELDS, POLYGON_REQUIRED, versioned=False)
SPLINE_ELEMENT = annotation("Line", SPLINE_FIELDS, SPLINE_REQUIRED, versioned=False)
ANGLE_ELEMENT = annotation("Angle", ANGLE_FIELDS, ("lines",), versioned=False)
ELLIPSE_ELEMENT = annotation("Ellipse", ELLIPSE_FIELDS, ("major_axis", "minor_axis"), versioned=False)
THREE_POINT_ELEMENT = annotation("Three-point angle", THREE_POINT_FIELDS, ("angle",), versioned=False, const=True)

# kind (grand-challenge's display label) -> the schema its values must fulfil
SCHEMAS: dict[str, dict[str, Any]] = {
    "String": STRING, "Integer": {"type": "integer"}, "Float": NUMBER, "Bool": {"type": "boolean"}, "Anything": {},
    "Choice": STRING, "Multiple choice": vectors(STRING),
    "Chart": {"type": "object"},  # Vega-Lite's schema, fetched by grand-challenge: every spec is an object
    "2D bounding box": annotation("2D bounding box", BOX_FIELDS, ("version", "type", "corners"), versioned=True),
    "Multiple 2D bounding boxes": collection("Multiple 2D bounding boxes", "boxes", BOX_ELEMENT,
                                             ("version", "type", "boxes")),
    "Distance measurement": annotation("Distance measurement", LINE_FIELDS, ("version", "type", "start", "end"),
                                       versioned=True),
    "Multiple distance measurements": collection("Multiple distance measurements", "lines", LINE_ELEMENT,
                                                 ("version", "type", "lines")),
    "Point": annotation("Point", {"point": POINT}, ("version", "type", "point"), versioned=True),
    "Multiple points": collection("Multiple points", "points", POINT_ELEMENT, ("version", "type", "points")),
    "Polygon": annotation("Polygon", POLYGON_FIELDS, (*POLYGON_REQUIRED, "type", "version"), versioned=True),
    "Multiple polygons": collection("Multiple polygons", "polygons", POLYGON_ELEMENT, ("type", "version", "polygons")),
    "Line": annotation("Line", SPLINE_FIELDS, (*SPLINE_REQUIRED, "type", "version"), versioned=True),
    "Multiple lines": collection("Multiple lines", "lines", SPLINE_ELEMENT, ("type", "version", "lines")),
    "Angle": annotation("Angle", ANGLE_FIELDS, ("lines", "version", "type"), versioned=True),
    "Multiple angles": collection("Multiple angles", "angles", ANGLE_ELEMENT, ("type", "version", "angles")),
    "Ellipse": annotation("Ellipse", ELLIPSE_FIELDS, ("version", "type", "major_axis", "minor_axis"), versioned=True),
    "Multiple ellipses": collection("Multiple ellipses", "ellipses", ELLIPSE_ELEMENT, ("version", "type", "ellipses")),
    "Three-point angle": annotation("Three-point angle", THREE_POINT_FIELDS, ("version", "type", "angle"),
                                    versioned=True, const=True),
    "Multiple three-point angles": collection("Multiple three-point angles", "angles", THREE_POINT_ELEMENT,
                                              ("version", "type", "angles")),
    "Affine transform registration": {
        "type": "object", "properties": {"3d_affine_transform": vectors(vectors(NUMBER, 4), 4)},
        "required": ["3d_affine_transform"]},
}

# ----- every kind a socket may declare, and the super kinds grand-challenge gives it -----

# grand-challenge's image kinds (components/models.py InterfaceKind.interface_type_image): super kind Image
IMAGE_KINDS = ("Image", "Segmentation", "Heat Map", "Displacement field", "DICOM Image Set")
# its file kinds (interface_type_file): super kind File
FILE_KINDS = ("CSV", "ZIP", "PDF", "SQREG", "Thumbnail JPG", "Thumbnail PNG", "OBJ", "MP4", "Newick", "BIOM")


def super_kinds(kind: str) -> tuple[str, ...]:
    """The super kinds a socket of `kind` may have: Image for an image kind, File for a file kind, Value or File
    for a JSON kind (grand-challenge stores a JSON value in its database or, `store_in_database` off, as a file);
    () for a kind grand-challenge does not have."""
    if kind in IMAGE_KINDS:
        return ("Image",)
    if kind in FILE_KINDS:
        return ("File",)
    return ("Value", "File") if kind in SCHEMAS else ()


# ----- the schemas applied as grand-challenge applies them: jsonschema's Draft 7 validator and its best_match -----

# grand-challenge's schema of a socket of each kind (components/models.py `validate_against_schema`):
# INTERFACE_VALUE_SCHEMA with `"anyOf": [{"$ref": "#/definitions/<kind>"}]`, the kind's definition inlined here (the
# errors, their paths and so best_match's choice are those of the reference); compiled once per kind
VALIDATORS: dict[str, Draft7Validator] = {
    kind: Draft7Validator({"$schema": "http://json-schema.org/draft-07/schema#", "anyOf": [schema]})
    for kind, schema in SCHEMAS.items()}
MAX_ERROR_CHARACTERS = 160  # of one error line (the paths and rules of these schemas fit in some 90)
ITEMS_BOUNDS = {"minItems": ("is too short", "at least"), "maxItems": ("is too long", "at most")}
Path = tuple[str | int, ...]


def path_text(path: Path) -> str:
    """`points[2].probability`: property names of the schema and list indices, never the value's own keys."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else ("." if text else "") + str(part)
    return text


def error_line(error: ValidationError) -> str:
    """jsonschema's message of `error`, the value it names replaced by where it sits ("the value at
    points[2].probability is greater than the maximum of 1"), in at most MAX_ERROR_CHARACTERS: the rest of each
    message these schemas' keywords make is the schema's own (a rule, a property name), except the unexpected
    properties, which are counted; a too short or too long array is told its bound."""
    path = tuple(error.absolute_path)
    where = "the value" + (f" at {path_text(path)}" if path else "")
    at = f" (at {path_text(path)})" if path else ""
    keyword, rule, message = error.validator, error.validator_value, error.message
    if keyword == "additionalProperties":
        extra = len(set(error.instance) - set(error.schema.get("properties", {})))
        line = f"Additional properties are not allowed{at} ({extra} {'was' if extra == 1 else 'were'} unexpected)"
    elif keyword in ("required", "const"):  # "'point' is a required property", "'Angle' was expected"
        line = message + at
    elif message.startswith(value := repr(error.instance)):
        line = where + message[len(value):]
        words, bound = ITEMS_BOUNDS.get(str(keyword), ("", ""))
        if words and line.endswith(words):
            line += f" ({bound} {rule} items)"
    else:  # a keyword these schemas do not use
        line = f"{where} does not fulfill the schema's {keyword!r}"
    return line if len(line) <= MAX_ERROR_CHARACTERS else line[:MAX_ERROR_CHARACTERS - 3] + "..."


def value_error(kind: str, value: object) -> str | None:
    """Why grand-challenge's schema of `kind` refuses `value` (parsed as it parses an output: NaN and infinities
    written as such already null), in one line without the value: the error jsonschema's `best_match` reports, as
    grand-challenge's JSONValidator reports it; None where it fulfils it, and for kinds that have no schema here."""
    validator = VALIDATORS.get(kind)
    if validator is None:
        return None
    try:
        error = best_match(validator.iter_errors(value))
    except OverflowError:  # multipleOf on a number beyond a double (1e400 reads as infinity): jsonschema raises
        return ("the value holds a number too large for a double where a whole number is asked for (jsonschema, "
                "and so grand-challenge's validation, fails on it)")
    return None if error is None else error_line(error)


# ----- image kinds: ComponentInterfaceValue.clean on the image panimg imported -----

MAXIMUM_SEGMENTS_LENGTH = 64  # panimg.models.MAXIMUM_SEGMENTS_LENGTH (0.15.2)
COLOR_COMPONENTS = {"GRAY": 1, "RGB": 3, "RGBA": 4, "YCBCR": 3}  # cases.models.Image.COLOR_SPACE_COMPONENTS


def image_error(kind: str, segments: frozenset[int] | None, shape_without_color: tuple[int, ...],
                color_space: str) -> str | None:
    """Why grand-challenge would refuse an image output of `kind`, given what panimg read of it (its segments,
    `[(t), (z), y, x]` and its colour space); None where it accepts it."""
    if kind == "DICOM Image Set":
        return "Image must be DICOM"  # an output is imported by the MHA and TIFF builders only
    if kind == "Segmentation" and segments is None:
        return ("Image segments could not be determined, ensure the voxel values are integers and that it contains "
                f"no more than {MAXIMUM_SEGMENTS_LENGTH} segments. Ensure the image has the minimum and maximum voxel "
                "values set as tags if the image is a TIFF file. (panimg determines the segments of single-channel "
                "8-bit images only: write the mask as uint8 or int8)")
    if kind == "Displacement field":
        components = COLOR_COMPONENTS.get(color_space, 1)
        shape = (*shape_without_color, *((components,) if components > 1 else ()))
        if len(shape) != 4:
            return "Deformation and displacement must be 4D images."
        if components > 1:
            return "Deformation and displacement fields cannot have a color component."
        if shape[0] != 3:
            return "Deformation and displacement field's 4th dimension must be a 3-component vector."
    return None


# ----- file kinds: grand-challenge's MimeTypeValidator on the first 2048 bytes -----

MIME_BYTES = 2048  # core/validators.py get_file_mimetype: what libmagic reads
ALLOWED_FILE_TYPES = ("application/json", "application/zip", "text/plain", "application/csv", "text/csv",
                      "application/pdf", "image/png", "image/jpeg", "application/octet-stream",
                      "application/x-sqlite3", "application/vnd.sqlite3", "video/mp4")
# (offset, signature, libmagic's type) of the types libmagic tells by their first bytes
SIGNATURES: tuple[tuple[int, bytes, str], ...] = (
    (0, b"%PDF-", "application/pdf"), (0, b"\x89PNG\r\n\x1a\n", "image/png"), (0, b"\xff\xd8\xff", "image/jpeg"),
    (0, b"PK\x03\x04", "application/zip"), (0, b"PK\x05\x06", "application/zip"),
    (0, b"SQLite format 3\x00", "application/vnd.sqlite3"), (0, b"GIF87a", "image/gif"), (0, b"GIF89a", "image/gif"),
    (0, b"II*\x00", "image/tiff"), (0, b"MM\x00*", "image/tiff"), (0, b"II+\x00", "image/tiff"),
    (0, b"\x1f\x8b", "application/gzip"),
    (0, b"BZh", "application/x-bzip2"), (0, b"\xfd7zXZ\x00", "application/x-xz"),
    (0, b"7z\xbc\xaf\x27\x1c", "application/x-7z-compressed"), (0, b"\x7fELF", "application/x-executable"),
    (0, b"\x89HDF\r\n\x1a\n", "application/x-hdf5"), (0, b"\x1aE\xdf\xa3", "video/webm"),
    (257, b"ustar", "application/x-tar"), (0, b"%!PS", "application/postscript"), (0, b"{\\rtf", "text/rtf"),
)
RIFF_TYPES = {b"WEBP": "image/webp", b"AVI ": "video/x-msvideo", b"WAVE": "audio/x-wav"}
# ISO media brands (bytes 8-12 after `ftyp`) libmagic names other than video/mp4
FTYP_TYPES = {b"qt  ": "video/quicktime", b"M4A ": "audio/x-m4a", b"heic": "image/heic", b"heix": "image/heic",
              b"mif1": "image/heif", b"avif": "image/avif", b"crx ": "image/x-canon-cr3"}
TEXT_MARKUP = ((b"<?xml", "text/xml"), (b"<svg", "image/svg+xml"), (b"<!doctype html", "text/html"),
               (b"<html", "text/html"), (b"#!", "text/x-shellscript"))
TEXT_CONTROLS = set(range(32)) - {7, 8, 9, 10, 11, 12, 13, 27}  # what libmagic's text test does not allow


def file_type(head: bytes) -> str:
    """The MIME type libmagic reports for a file starting with `head` (its first MIME_BYTES), as far as the
    signatures tell: an empty file, the signed binary types, RIFF and ISO media containers, marked-up text, text,
    else application/octet-stream."""
    if not head:
        return "application/x-empty"
    for offset, signature, mime in SIGNATURES:
        if head[offset:offset + len(signature)] == signature:
            return mime
    if head[:4] == b"RIFF" and head[8:12] in RIFF_TYPES:
        return RIFF_TYPES[head[8:12]]
    if head[4:8] == b"ftyp":
        return "video/3gpp" if head[8:11] == b"3gp" else FTYP_TYPES.get(head[8:12], "video/mp4")
    stripped = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    try:  # a character cut by the 2048 bytes read is not an error
        text = codecs.getincrementaldecoder("utf-8")().decode(head, final=len(head) < MIME_BYTES)
    except UnicodeDecodeError:
        text = None
    if text is None or any(ord(c) in TEXT_CONTROLS for c in text):
        return "application/octet-stream"
    for start, mime in TEXT_MARKUP:
        if stripped.startswith(start):
            return mime
    return "text/plain"


def file_error(head: bytes) -> str | None:
    """Grand-challenge's MimeTypeValidator error for a file output starting with `head`, or None."""
    mime = file_type(head[:MIME_BYTES])
    if mime in ALLOWED_FILE_TYPES:
        return None
    return f"File of type {mime} is not supported. Allowed types are {', '.join(ALLOWED_FILE_TYPES)}."
