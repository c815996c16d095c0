"""object-CXR parsing (docs/metrics/object-cxr.md §1, §5): what froc.py accepts is accepted and scored the same;
what it crashes on or silently misreads fails with one line naming the file and line."""

import numpy as np
import pytest

from medchallenge.errors import InputError
from medchallenge.formats.object_cxr import (ELLIPSE, POLYGON, RECTANGLE, UNKNOWN_TYPE, read_classification,
                                             read_ground_truth, read_localization)


def write(tmp_path, name, text, newline="\n"):
    path = tmp_path / name
    path.write_bytes(text.replace("\n", newline).encode())
    return path


GT = "image_path,annotation\na.jpg,0 10 10 50 50;1 100 100 140 120\nb.jpg,2 200 200 260 200 260 260\nc.jpg,\n"
LOC = "image_path,prediction\na.jpg,0.9 30 30;0.85 31 31\nb.jpg,\nz.jpg,0.1 -5.5 7\n"




def test_ground_truth_parsed(tmp_path):
    gt = read_ground_truth(write(tmp_path, "gt.csv", GT))
    assert gt.image_paths == ["a.jpg", "b.jpg", "c.jpg"] and gt.num_image == 3 and gt.num_object == 3
    assert gt.object_type.tolist() == [RECTANGLE, ELLIPSE, POLYGON]
    assert gt.object_image.tolist() == [0, 0, 1]
    assert gt.boxes[0].tolist() == [10, 10, 50, 50] and gt.boxes[1].tolist() == [100, 100, 140, 120]
    assert gt.vertex_start.tolist() == [0, 0, 0, 3]
    assert gt.vertices_x.tolist() == [200, 260, 260] and gt.vertices_y.tolist() == [200, 200, 260]


@pytest.mark.parametrize("newline", ["\r\n", "\r"])
def test_crlf_and_cr_read_like_lf(tmp_path, newline):
    lf = read_localization(write(tmp_path, "lf.csv", LOC))
    other = read_localization(write(tmp_path, "crlf.csv", LOC, newline))
    assert other.line_image_paths == lf.line_image_paths
    assert np.array_equal(other.probability, lf.probability) and np.array_equal(other.x, lf.x)
    gt = read_ground_truth(write(tmp_path, "gt.csv", GT, newline))
    assert gt.num_object == 3 and gt.boxes[1].tolist() == [100, 100, 140, 120]


def test_localization_parsed(tmp_path):
    loc = read_localization(write(tmp_path, "loc.csv", LOC.rstrip("\n")))  # no final newline
    assert loc.line_image_paths == ["a.jpg", "b.jpg", "z.jpg"] and loc.line_numbers == [2, 3, 4]
    assert loc.triples_per_line.tolist() == [2, 0, 1]
    assert loc.probability.tolist() == [0.9, 0.85, 0.1]
    assert loc.x.tolist() == [30, 31, -5.5] and loc.y.tolist() == [30, 31, 7]


def test_blank_lines_are_skipped_with_a_note(tmp_path):
    loc = read_localization(write(tmp_path, "loc.csv", LOC.replace("b.jpg,\n", "\nb.jpg,\n  \n") + "\n\n"))
    assert loc.line_image_paths == ["a.jpg", "b.jpg", "z.jpg"] and loc.line_numbers == [2, 4, 6]
    assert "skipped 4 blank line(s) (line 3, 5, 7, 8)" in loc.notes[0]
    gt = read_ground_truth(write(tmp_path, "gt.csv", GT + "\n"))
    assert gt.num_image == 3 and "blank" in gt.notes[0]


def test_numbers_parse_exactly_as_float(tmp_path):
    tokens = ["0.1", "-0", "5.", ".5", "-.5", "1e3", "+5", "1_0", "0.30000000000000004", "123456789012345678",
              "\t7", "2.5e-3", "0.1234567890123456789", "007", "1E+2", "-1234.5678"]
    text = "image_path,prediction\n" + "a.jpg," + ";".join(f"0.5 {t} 1" for t in tokens) + "\n"
    loc = read_localization(write(tmp_path, "loc.csv", text))
    expected = [float(t) for t in tokens]
    assert [v.hex() for v in loc.x.tolist()] == [v.hex() for v in expected]  # bit for bit, -0.0 included


def test_many_random_decimals_bit_exact(tmp_path):
    rng = np.random.default_rng(4)
    values = [f"{v:.{d}f}" for v, d in zip(rng.uniform(-3000, 3000, 3000), rng.integers(0, 12, 3000))]
    text = "h,p\n" + "\n".join(f"i{k}.jpg,{v} {v} 0" for k, v in enumerate(values)) + "\n"
    loc = read_localization(write(tmp_path, "loc.csv", text))
    assert loc.probability.tolist() == [float(v) for v in values]


@pytest.mark.parametrize("line, message", [
    ("a.jpg,0.5  10 20", "line 2: empty field"),  # double space: float('') in froc.py
    ("a.jpg,0.5 10 20 ", "line 2: empty field"),  # trailing space
    ("a.jpg, 0.5 10 20", "line 2: empty field"),
    ("a.jpg,0.5 10 20;", "line 2: empty field"),
    ("a.jpg,0.5 10 20;;0.4 1 1", "line 2: empty field"),
    ("a.jpg,;0.5 10 20", "line 2: empty field in the second column (a double, leading or trailing space, or ';;' / "
                         "a trailing ';'); froc.py fails on float('')"),  # float(''): unlike the ground truth
    ("a.jpg,0.5 10", "line 2: prediction 1 must be 'probability x y'"),
    ("a.jpg,0.5 10 20;0.4 1 2 3", "line 2: prediction 2 must be 'probability x y' separated by single spaces, found 4"),
    ("a.jpg,0.5 10 abc", "line 2: 'abc' in prediction 1 is not a number"),
    ("a.jpg", "line 2: expected 2 comma-separated fields (image_path,prediction), found 1"),
    ("a,b.jpg,0.5 1 1", "line 2: expected 2 comma-separated fields (image_path,prediction), found 3"),
])
def test_localization_errors_name_the_line(tmp_path, line, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)").replace("'", ".")):
        read_localization(write(tmp_path, "loc.csv", f"image_path,prediction\n{line}\n"))


def test_localization_keeps_nan_and_infinities_as_float_reads_them(tmp_path):
    loc = read_localization(write(tmp_path, "loc.csv", "image_path,prediction\na.jpg,nan 10 20;0.5 1e999 -inf\n"))
    assert np.isnan(loc.probability[0]) and loc.probability[1] == 0.5
    assert loc.x.tolist() == [10.0, np.inf] and loc.y.tolist() == [20.0, -np.inf]


def test_missing_header_is_refused(tmp_path):
    # froc.py would silently drop this first data line
    with pytest.raises(InputError, match="line 1: looks like data"):
        read_localization(write(tmp_path, "loc.csv", "a.jpg,0.5 10 20\nb.jpg,\n"))
    with pytest.raises(InputError, match="line 1: looks like data"):
        read_ground_truth(write(tmp_path, "gt.csv", "a.jpg,0 1 2 3 4\n"))
    with pytest.raises(InputError, match="line 1: looks like data"):
        read_classification(write(tmp_path, "cls.csv", "a.jpg,0.5\n"))
    with pytest.raises(InputError, match="empty file"):
        read_ground_truth(write(tmp_path, "gt.csv", ""))


@pytest.mark.parametrize("annotation, message", [
    ("0 1 1 2 2 ", "empty field after a space"),  # trailing space: float('') in froc.py
    ("0 1  1 2 2", "empty field after a space"),
    ("0 1 1 2 2 ;0 1 1 2 2", "empty field after a space"),
    (" ", "empty field after a space"),  # the object ' ' has the fields '', ''
    ("  0 1 1 2 2", "empty field after a space"),
    ("0 1 1 2 x", "'x' in object 1 is not a number"),
    (";0 1 1 2 2; x", "'x' in object 3 is not a number"),  # type '' but its fields still go through float()
    ("0 1 1 2 nan", "'nan' in object 1 is not a finite number"),
    ("2 0 0 1 1 inf 0", "'inf' in object 1 is not a finite number"),
])
def test_ground_truth_errors_name_the_line(tmp_path, annotation, message):
    with pytest.raises(InputError, match=f"gt.csv: line 3: {message}"):
        read_ground_truth(write(tmp_path, "gt.csv", f"image_path,annotation\nok.jpg,\nbad.jpg,{annotation}\n"))


def test_empty_objects_are_objects_of_type_empty_as_in_froc_py(tmp_path):
    # froc.py: annotation.split(';') then object.split(' '), type = fields[0]: '' for an empty object or a leading
    # space; its other fields go through float() (NaN and inf too) and are never used
    text = ("image_path,annotation\na.jpg,0 1 1 2 2;;2 0 0 1 1 1 0\nb.jpg,;\nc.jpg, 0 1 1 2 2\n"
            "d.jpg,0 5 5 6 6;\ne.jpg, nan inf\nf.jpg,\n")
    gt = read_ground_truth(write(tmp_path, "gt.csv", text))
    assert gt.num_image == 6 and gt.num_object == 9
    assert gt.object_type.tolist() == [RECTANGLE, UNKNOWN_TYPE, POLYGON, UNKNOWN_TYPE, UNKNOWN_TYPE,
                                       UNKNOWN_TYPE, RECTANGLE, UNKNOWN_TYPE, UNKNOWN_TYPE]
    assert gt.object_image.tolist() == [0, 0, 0, 1, 1, 2, 3, 3, 4]
    assert gt.boxes[6].tolist() == [5, 5, 6, 6] and np.isnan(gt.boxes[5]).all()
    assert gt.vertex_start.tolist() == [0, 0, 0, 3, 3, 3, 3, 3, 3, 3] and gt.vertices_y.tolist() == [0, 1, 0]
    assert gt.malformed == {}
    assert ("gt.csv: 6 empty object(s) (';;', a leading or trailing ';', or a leading space) on 5 image(s) "
            "(a.jpg, b.jpg, c.jpg, d.jpg, e.jpg): froc.py reads each as an object of type '' that is never hit"
            in gt.notes[0])
    with pytest.raises(InputError, match="gt.csv: line 2: object 2 is empty or starts with a space .*--strict"):
        read_ground_truth(write(tmp_path, "gt.csv", text), strict=True)


def test_malformed_objects_are_kept_for_the_walk_to_decide(tmp_path):
    # froc.py fails on these only when a point is tested against them (evaluator); read, they are never hit
    text = "image_path,annotation\na.jpg,0 10 10 50;1 1 1 2 2\nb.jpg,2 1 1 2 2 3;1 nan\nc.jpg,0\n"
    gt = read_ground_truth(write(tmp_path, "gt.csv", text))
    assert gt.num_object == 5 and gt.object_type.tolist() == [UNKNOWN_TYPE, ELLIPSE, UNKNOWN_TYPE, UNKNOWN_TYPE,
                                                               UNKNOWN_TYPE]
    assert gt.malformed == {
        0: "line 2: object 1 (rectangle) needs 4 coordinates x1 y1 x2 y2, found 3",
        2: "line 3: object 1 (polygon) has an odd number of coordinates (5)",
        3: "line 3: object 2 (ellipse) needs 4 coordinates x1 y1 x2 y2, found 1",
        4: "line 4: object 1 (rectangle) needs 4 coordinates x1 y1 x2 y2, found 0",
    }
    assert gt.boxes[1].tolist() == [1, 1, 2, 2] and len(gt.vertices_x) == 0
    with pytest.raises(InputError, match=r"gt.csv: line 2: object 1 \(rectangle\) needs 4 .*--strict refuses it"):
        read_ground_truth(write(tmp_path, "gt.csv", text), strict=True)


def test_unknown_types_and_duplicate_images_follow_froc_py(tmp_path):
    text = "image_path,annotation\na.jpg,3 1 1 2 2;0 1 1 2 2\nb.jpg,\na.jpg,0.0 5 5 6 6\n"
    gt = read_ground_truth(write(tmp_path, "gt.csv", text))
    # 3 lines = 3 images for num_image; a.jpg's objects merged; '3' and '0.0' are objects never hit
    assert gt.num_image == 3 and gt.image_paths == ["a.jpg", "b.jpg"] and gt.num_object == 3
    assert gt.object_type.tolist() == [UNKNOWN_TYPE, RECTANGLE, UNKNOWN_TYPE]
    assert gt.object_image.tolist() == [0, 0, 0]
    assert any("several lines" in n for n in gt.notes)
    assert any("'0.0' (1), '3' (1)" in n for n in gt.notes)
    with pytest.raises(InputError, match="gt.csv: line 2: object 1 has the type '3'; --strict refuses it"):
        read_ground_truth(write(tmp_path, "gt.csv", text), strict=True)


def test_polygon_without_coordinates_is_an_object(tmp_path):
    gt = read_ground_truth(write(tmp_path, "gt.csv", "image_path,annotation\na.jpg,2\n"))
    assert gt.num_object == 1 and gt.vertex_start.tolist() == [0, 0]


def test_classification(tmp_path):
    cls = read_classification(write(tmp_path, "cls.csv", "image_path,prediction\na.jpg,0.9\nb.jpg,1e-3\n"))
    assert cls.probability == {"a.jpg": 0.9, "b.jpg": 0.001} and cls.line_numbers == {"a.jpg": 2, "b.jpg": 3}
    with pytest.raises(InputError, match="line 3: 'a.jpg' already has a probability on line 2"):
        read_classification(write(tmp_path, "cls.csv", "image_path,prediction\na.jpg,0.9\na.jpg,0.1\n"))
    with pytest.raises(InputError, match="line 2: no probability"):
        read_classification(write(tmp_path, "cls.csv", "image_path,prediction\na.jpg,\n"))


# Decimal digits that froc.py's Python 3.7 (Unicode 11.0) does not know: segmented digits (Unicode 13.0), Nyiakeng
# Puachue Hmong and Wancho (12.0), Tangsa (14.0). Python 3.11's float() reads them all.
DIGITS_AFTER_UNICODE_11 = ["\U0001fbf5", "\U0001e145", "\U0001e2f5", "\U00016ac5"]


@pytest.mark.parametrize("digit", DIGITS_AFTER_UNICODE_11)
def test_digits_after_unicode_11_are_no_numbers_as_in_python_3_7(tmp_path, digit):
    with pytest.raises(InputError, match=r"line 2: '.*' in prediction 1 is not a number"):
        read_localization(write(tmp_path, "loc.csv", f"image_path,prediction\na.jpg,0.5 1{digit} 2\n"))
    with pytest.raises(InputError, match=r"gt.csv: line 2: '.*' in object 1 is not a number"):
        read_ground_truth(write(tmp_path, "gt.csv", f"image_path,annotation\na.jpg,0 1 1 {digit} 2\n"))
    with pytest.raises(InputError, match=r"line 2: '.*' in the probability is not a number"):
        read_classification(write(tmp_path, "cls.csv", f"image_path,prediction\na.jpg,0.{digit}\n"))
    # froc.py skips line 1 whatever it holds: for Python 3.7 this one is no data, so it is the header
    cls = read_classification(write(tmp_path, "cls.csv", f"a.jpg,0.{digit}\nb.jpg,0.5\n"))
    assert cls.probability == {"b.jpg": 0.5}


def test_unicode_11_digits_and_spaces_are_numbers_as_in_python_3_7(tmp_path):
    # ARABIC-INDIC DIGIT FIVE, FULLWIDTH DIGIT TWO, MATHEMATICAL BOLD DIGIT ONE; NO-BREAK SPACE, IDEOGRAPHIC SPACE
    loc = read_localization(write(tmp_path, "loc.csv", "image_path,prediction\n"
                                  "a.jpg,0.\u0665 \uff12\u00a0 \u3000\U0001d7cf\n"))
    assert (loc.probability.tolist(), loc.x.tolist(), loc.y.tolist()) == ([0.5], [2.0], [1.0])
    gt = read_ground_truth(write(tmp_path, "gt.csv", "image_path,annotation\na.jpg,0 \u0661 1 \uff15 5\n"))
    assert gt.boxes[0].tolist() == [1, 1, 5, 5]
