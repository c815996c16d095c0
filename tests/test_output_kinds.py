"""A job's outputs checked by their declared kind as grand-challenge validates them (issue 39 section 2): every JSON
kind's schema (components/schemas.py, validated with jsonschema as grand-challenge validates it), the image kinds'
rules and the file types of file kinds, each failure one line in grand-challenge's words that never holds the value."""

from __future__ import annotations

import copy
import itertools
import json
import random
from pathlib import Path

import jsonschema
import numpy as np
import pytest
import SimpleITK as sitk

from medchallenge.algorithms.object_cxr import ForeignObjectPrediction, gc_outputs
from medchallenge.jobs.kinds import (MAX_ERROR_CHARACTERS, SCHEMAS, VALIDATORS, error_line, file_error, file_type,
                                     image_error, value_error)
from medchallenge.jobs.outputs import read_outputs
from medchallenge.sockets import FOREIGN_OBJECT_LIKELIHOOD, FOREIGN_OBJECTS, Socket

V = {"major": 1, "minor": 0}
P3 = [1.5, -2.0, 0.5]
BOX = [[0, 0, 0.5], [4, 0, 0.5], [4, 3, 0.5], [0, 3, 0.5]]
POLYGON = {"seed_point": P3, "path_points": [P3, [2, 3, 0.5]], "sub_type": "poly", "groups": []}
SPLINE = {"seed_points": [P3], "path_point_lists": [[P3, [3, 4, 0.5]]]}
ANGLE = {"lines": [[P3, P3], [P3, [0, 0, 0]]]}
ELLIPSE = {"major_axis": [[0, 0, 0], [4, 0, 0]], "minor_axis": [[2, -1, 0], [2, 1, 0]]}
# one valid value of every JSON kind (grand-challenge's INTERFACE_KIND_JSON_EXAMPLES, shortened)
VALID = {
    "String": "text", "Integer": 42, "Float": 0.5, "Bool": True, "Anything": {"key": [1, None]}, "Choice": "Choice 1",
    "Multiple choice": ["Choice 1", "Choice 2"], "Chart": {"mark": "bar", "data": {"values": []}},
    "2D bounding box": {"name": "roi", "type": "2D bounding box", "corners": BOX, "probability": 0.9, "version": V},
    "Multiple 2D bounding boxes": {"type": "Multiple 2D bounding boxes", "boxes": [{"corners": BOX}], "version": V},
    "Distance measurement": {"type": "Distance measurement", "start": P3, "end": P3, "version": V},
    "Multiple distance measurements": {"type": "Multiple distance measurements", "lines": [{"start": P3, "end": P3}],
                                       "version": V},
    "Point": {"type": "Point", "point": P3, "probability": 0.2, "version": V},
    "Multiple points": {"name": "nodules", "type": "Multiple points", "version": V,
                        "points": [{"name": "p1", "point": P3, "probability": 0.9}, {"point": [0, 0, 0]}]},
    "Polygon": {"type": "Polygon", **POLYGON, "version": V},
    "Multiple polygons": {"type": "Multiple polygons", "polygons": [POLYGON], "version": V},
    "Line": {"type": "Line", **SPLINE, "version": V},
    "Multiple lines": {"type": "Multiple lines", "lines": [SPLINE], "version": V},
    "Angle": {"type": "Angle", **ANGLE, "version": V},
    "Multiple angles": {"type": "Multiple angles", "angles": [ANGLE], "version": V},
    "Ellipse": {"type": "Ellipse", **ELLIPSE, "version": V},
    "Multiple ellipses": {"type": "Multiple ellipses", "ellipses": [ELLIPSE], "version": V},
    "Three-point angle": {"type": "Three-point angle", "angle": [P3, P3, P3], "version": V},
    "Multiple three-point angles": {"type": "Multiple three-point angles", "angles": [{"angle": [P3, P3, P3]}],
                                    "version": V},
    "Affine transform registration": {"3d_affine_transform": np.eye(4).tolist()},
}


def test_every_json_kind_has_a_valid_draft_7_schema_and_a_valid_value_passes():
    assert set(VALID) == set(SCHEMAS) == set(VALIDATORS)
    for kind, value in VALID.items():
        jsonschema.Draft7Validator.check_schema(VALIDATORS[kind].schema)  # as grand-challenge's `validate` checks it
        assert value_error(kind, value) is None, kind


@pytest.mark.parametrize(("kind", "value", "error"), [
    ("Float", "0.5", "the value is not of type 'number'"),
    ("Float", None, "the value is not of type 'number'"),  # NaN, as grand-challenge parses it
    ("Float", True, "the value is not of type 'number'"),
    ("Integer", 1.5, "the value is not of type 'integer'"),
    ("Bool", 0, "the value is not of type 'boolean'"),
    ("String", ["secret text"], "the value is not of type 'string'"),
    ("Multiple choice", ["a", 3], "the value at [1] is not of type 'string'"),
    ("Chart", [], "the value is not of type 'object'"),
    ("Multiple points", {"type": "Multiple points", "points": []}, "'version' is a required property"),
    # two errors as relevant as each other: best_match reports the socket's anyOf, as grand-challenge does
    ("Multiple points", {"points": []}, "the value is not valid under any of the given schemas"),
    ("Multiple choice", "a", "the value is not of type 'array'"),
    ("Multiple points", {**VALID["Multiple points"], "type": "Multiple Points"},
     "the value at type is not one of ['Multiple points']"),
    ("Multiple points", {**VALID["Multiple points"], "points": [{"point": [1, 2]}]},
     "the value at points[0].point is too short (at least 3 items)"),
    ("Multiple points", {**VALID["Multiple points"], "points": [{"point": P3, "probability": 1.5}]},
     "the value at points[0].probability is greater than the maximum of 1"),
    ("Multiple points", {**VALID["Multiple points"], "points": [{"point": P3, "score": 0.5, "colour": "red"}]},
     "Additional properties are not allowed (at points[0]) (2 were unexpected)"),
    ("Multiple points", {**VALID["Multiple points"], "points": [{"probability": 0.5}]},
     "'point' is a required property (at points[0])"),
    ("Multiple points", {**VALID["Multiple points"], "version": {"major": 1.5, "minor": 0}},
     "the value at version.major is not a multiple of 1.0"),
    ("Multiple points", {**VALID["Multiple points"], "version": {"major": -1, "minor": 0}},
     "the value at version.major is less than the minimum of 0"),
    ("2D bounding box", {**VALID["2D bounding box"], "corners": BOX[:3]},
     "the value at corners is too short (at least 4 items)"),
    ("Multiple 2D bounding boxes", {**VALID["Multiple 2D bounding boxes"], "boxes": [{"corners": [*BOX, P3]}]},
     "the value at boxes[0].corners is too long (at most 4 items)"),
    ("Polygon", {**VALID["Polygon"], "groups": "g"}, "the value at groups is not of type 'array'"),
    ("Multiple polygons", {**VALID["Multiple polygons"], "polygons": [{**POLYGON, "path_points": [[1, "x", 2]]}]},
     "the value at polygons[0].path_points[0][1] is not of type 'number'"),
    ("Line", {key: value for key, value in VALID["Line"].items() if key != "seed_points"},
     "'seed_points' is a required property"),
    ("Three-point angle", {**VALID["Three-point angle"], "type": "Angle"},
     "'Three-point angle' was expected (at type)"),
    ("Affine transform registration", {"3d_affine_transform": [[1, 0, 0, 0]] * 3},
     "the value at 3d_affine_transform is too short (at least 4 items)"),
])
def test_an_invalid_value_fails_with_jsonschema_s_words_and_never_holds_the_value(kind, value, error):
    assert value_error(kind, value) == error


SECRET = "do-not-echo"
SECRET_NUMBER = 98765.4321


def mutated(value: object, rng: random.Random) -> object:
    """`value` with one thing changed somewhere in it: a key dropped or added, an item dropped or repeated, a
    leaf replaced by another JSON value (some of them marked, to be found if an error line echoes them)."""
    draw = rng.random()
    if isinstance(value, dict):
        value = dict(value)
        if value and draw < 0.3:
            del value[rng.choice(list(value))]
        elif draw < 0.4:
            value[f"{SECRET}-key"] = 1
        elif value:
            key = rng.choice(list(value))
            value[key] = mutated(value[key], rng)
        return value
    if isinstance(value, list):
        value = list(value)
        if value and draw < 0.25:
            value.pop()
        elif draw < 0.4:
            value.append(value[0] if value else 1)
        elif value:
            index = rng.randrange(len(value))
            value[index] = mutated(value[index], rng)
        return value
    return rng.choice([None, SECRET, SECRET_NUMBER, -SECRET_NUMBER, -1, 2, 2.0, True, [], {SECRET: SECRET}, 0.5,
                       "Point"])


def test_a_mutated_value_fails_in_one_bounded_line_that_names_where_and_never_echoes_it():
    """80 mutants of each kind's valid value: refused exactly where jsonschema's Draft 7 validator refuses it, each
    refusal one line of jsonschema's words for the error best_match picks, without any of the value's text."""
    rng = random.Random(39)
    refused = set()
    for kind, valid in VALID.items():
        for _ in range(80):
            value = copy.deepcopy(valid)
            for _ in range(rng.randint(1, 3)):
                value = mutated(value, rng)
            error = value_error(kind, value)
            assert (error is None) == VALIDATORS[kind].is_valid(value), (kind, value)
            if error is None:
                continue
            assert SECRET not in error and "98765" not in error and "\n" not in error, (kind, error)
            assert len(error) <= MAX_ERROR_CHARACTERS
            assert error.startswith(("the value ", "Additional properties are not allowed", "'")), error
            refused.add(error)
    assert len(refused) > 100  # of many kinds of error


@pytest.mark.parametrize(("keyword", "message", "line"), [
    ("pattern", f"{SECRET!r} does not match '^x'", "the value at points[0].name does not match '^x'"),
    # a message that names the value other than at its start: not echoed but told by its keyword
    ("dependencies", f"'name' is a dependency of '{SECRET}'",
     "the value at points[0].name does not fulfill the schema's 'dependencies'"),
])
def test_an_error_of_a_keyword_the_schemas_do_not_use_is_worded_without_the_value(keyword, message, line):
    error = jsonschema.ValidationError(message, validator=keyword, validator_value="^x", instance=SECRET,
                                       path=["points", 0, "name"])
    assert error_line(error) == line


def test_an_error_line_is_cut_to_its_bound():
    rule = [f"choice {index}" for index in range(100)]  # a socket's enum of a hundred choices
    error = jsonschema.ValidationError(f"'x' is not one of {rule!r}", validator="enum", validator_value=rule,
                                       instance="x", path=["type"])
    line = error_line(error)
    assert len(line) == MAX_ERROR_CHARACTERS and line.startswith("the value at type is not one of ['choice 0'")
    assert line.endswith("...")


def test_a_version_too_large_for_a_double_fails_in_one_line_not_an_exception():
    version = {"major": float("inf"), "minor": 0}  # 1e400 reads as infinity: jsonschema's multipleOf raises on it
    assert value_error("Multiple points", {**VALID["Multiple points"], "version": version}).startswith(
        "the value holds a number too large for a double where a whole number is asked for")


def test_the_built_in_object_cxr_algorithm_s_outputs_fulfil_their_kinds():
    outputs = gc_outputs(ForeignObjectPrediction(0.73, [(0.9, 10.0, 20.0), (0.4, 30.5, 2.0)]))
    assert value_error(FOREIGN_OBJECT_LIKELIHOOD.kind, outputs[FOREIGN_OBJECT_LIKELIHOOD.slug]) is None
    assert value_error(FOREIGN_OBJECTS.kind, outputs[FOREIGN_OBJECTS.slug]) is None


def read_one(tmp_path: Path, socket: Socket, write) -> str | None:
    output = tmp_path / "output"
    output.mkdir(parents=True)
    write(output / socket.relative_path)
    (result,) = read_outputs(output, (socket,), itertools.count(1), tmp_path / "stored")
    assert (result.value is None) == (result.error is not None)
    return result.error


NODULES = Socket("nodules", "Multiple points", "File", "nodules.json")


def test_a_json_output_is_checked_by_its_kind_when_the_job_s_outputs_are_read(tmp_path):
    secret = "do not echo this"
    value = {**VALID["Multiple points"], "points": [{"point": P3, secret: 1}]}
    error = read_one(tmp_path, NODULES, lambda path: path.write_text(json.dumps(value)))
    assert error == ("The output file 'nodules.json' does not fulfill the schema of 'Multiple points': Additional "
                     "properties are not allowed (at points[0]) (1 was unexpected)")
    assert secret not in error


def test_a_huge_invalid_output_fails_in_one_bounded_line(tmp_path):
    points = [{"point": P3, "probability": 0.5}] * 20_000 + [{"point": P3, "probability": 2}]
    error = read_one(tmp_path, NODULES, lambda path: path.write_text(json.dumps({**VALID["Multiple points"],
                                                                                 "points": points})))
    assert error.endswith("the value at points[20000].probability is greater than the maximum of 1")
    assert len(error) < 200 and "\n" not in error


def mask_writer(pixel_type: int, values: list[int]):
    def write(folder: Path) -> None:
        folder.mkdir(parents=True)
        array = np.zeros((4, 6, 8), np.int64)
        array.flat[: len(values)] = values
        image = sitk.Cast(sitk.GetImageFromArray(array), pixel_type)
        sitk.WriteImage(image, str(folder / "mask.mha"))
    return write


@pytest.mark.parametrize(("kind", "pixel_type", "values", "error"), [
    ("Segmentation", sitk.sitkUInt8, [1, 2], None),
    ("Segmentation", sitk.sitkUInt16, [1, 2], "Image segments could not be determined, ensure the voxel values"),
    ("Segmentation", sitk.sitkUInt8, list(range(1, 70)), "Image segments could not be determined"),  # > 64 values
    ("Heat Map", sitk.sitkFloat32, [1, 2], None),
    ("Image", sitk.sitkUInt16, [1, 2], None),
    ("Displacement field", sitk.sitkFloat32, [1], "Deformation and displacement must be 4D images."),
])
def test_an_image_output_is_checked_by_its_kind_after_panimg_imports_it(tmp_path, kind, pixel_type, values, error):
    socket = Socket("lesions", kind, "Image", "images/lesions")
    found = read_one(tmp_path, socket, mask_writer(pixel_type, values))
    if error is None:
        assert found is None
    else:
        assert found.startswith(f"The image produced in 'images/lesions' is not valid. {error}")


def test_a_displacement_field_is_three_components_over_a_volume_without_colour():
    assert image_error("Displacement field", None, (3, 4, 5, 6), "GRAY") is None
    assert image_error("Displacement field", None, (2, 4, 5, 6), "GRAY") == \
        "Deformation and displacement field's 4th dimension must be a 3-component vector."
    assert image_error("Displacement field", None, (4, 5, 6), "RGB") == \
        "Deformation and displacement fields cannot have a color component."
    assert image_error("DICOM Image Set", None, (4, 5, 6), "GRAY") == "Image must be DICOM"


@pytest.mark.parametrize(("head", "mime"), [
    (b"%PDF-1.7\n", "application/pdf"), (b"\x89PNG\r\n\x1a\n....", "image/png"), (b"\xff\xd8\xff\xe0", "image/jpeg"),
    (b"PK\x03\x04rest", "application/zip"), (b"SQLite format 3\x00", "application/vnd.sqlite3"),
    (b"\x00\x00\x00\x18ftypmp42", "video/mp4"), (b"\x00\x00\x00\x14ftypqt  ", "video/quicktime"),
    (b"case,score\nA,0.5\n", "text/plain"), (b"v 0 0 0\nf 1 2 3\n", "text/plain"), (b"((A,B),C);", "text/plain"),
    (b"", "application/x-empty"), (b"GIF89a", "image/gif"), (b"\x1f\x8b\x08", "application/gzip"),
    (b"\x7fELF\x02", "application/x-executable"), (b"<?xml version='1.0'?>", "text/xml"),
    (b"\x89HDF\r\n\x1a\n", "application/x-hdf5"), (bytes(range(256)), "application/octet-stream"),
    ("é".encode() * 1024, "text/plain"),  # 2048 bytes of two-byte characters
    (b"a" * 2047 + "é".encode(), "text/plain"),  # a character cut by the 2048 bytes read
])
def test_a_file_s_type_is_told_by_its_first_bytes_as_libmagic_tells_it(head, mime):
    assert file_type(head[:2048]) == mime


def test_a_file_output_of_a_type_grand_challenge_does_not_store_fails(tmp_path):
    report = Socket("report", "PDF file", "File", "report.pdf")
    assert read_one(tmp_path / "pdf", report, lambda path: path.write_bytes(b"%PDF-1.4\n%\xe2\xe3\n")) is None
    assert read_one(tmp_path / "gif", report, lambda path: path.write_bytes(b"GIF89a" + bytes(100))) == (
        "The output file 'report.pdf' is not valid. File of type image/gif is not supported. Allowed types are "
        "application/json, application/zip, text/plain, application/csv, text/csv, application/pdf, image/png, "
        "image/jpeg, application/octet-stream, application/x-sqlite3, application/vnd.sqlite3, video/mp4.")
    assert file_error(b"").startswith("File of type application/x-empty is not supported.")
