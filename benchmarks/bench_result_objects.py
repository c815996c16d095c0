"""Benchmark: the CPU seconds of the gateway's result objects (what the job runner spends on each study's DICOM result,
beside the conversion and the container, issue 31 section 3).

`run()` makes the object-CXR SR (`sr.point_report`) of $RESULT_OBJECT_POINTS (20) points on a CR radiograph of 2,048
px, $RESULT_OBJECT_REPEATS (10) times, and reports the CPU seconds of making one (highdicom) and of writing it (pydicom,
atomically), and the file's size. CPU seconds (`time.process_time`) depend little on other work on the machine; the
1-minute load average is reported all the same.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

SEED = 3131


def run() -> dict:
    import numpy as np

    from medchallenge.dicom.detectors import FOREIGN_OBJECT
    from medchallenge.dicom.series import read_headers
    from medchallenge.dicom.sr import PointFinding, point_report
    from medchallenge.dicom.synthetic import SyntheticStudy, radiograph_dataset
    from medchallenge.io import write_dicom_atomic

    count = int(os.environ.get("RESULT_OBJECT_POINTS", "20"))
    repeats = int(os.environ.get("RESULT_OBJECT_REPEATS", "10"))
    rng = np.random.default_rng(SEED)
    points = [PointFinding(float(x), float(y), float(p)) for x, y, p in rng.uniform(0, 1, (count, 3)) * [2047, 2047, 1]]
    with tempfile.TemporaryDirectory(prefix="bench_result_objects_") as tmp:
        tmp = Path(tmp)
        image = write_dicom_atomic(tmp / "cxr.dcm", radiograph_dataset(
            np.zeros((2048, 2048), dtype=np.uint16), SyntheticStudy("bench-result-objects", "BENCH_SR")))
        (series,) = read_headers([image])
        write_dicom_atomic(tmp / "sr.dcm", point_report(series, 0.5, points, FOREIGN_OBJECT))  # imports, caches
        making = writing = 0.0
        for _ in range(repeats):
            started = time.process_time()
            report = point_report(series, 0.5, points, FOREIGN_OBJECT)
            made = time.process_time()
            path = write_dicom_atomic(tmp / "sr.dcm", report)
            making, writing = making + made - started, writing + time.process_time() - made
        size = path.stat().st_size
    return {"result_objects_points": count,
            "result_objects_point_sr_make_cpu_seconds": round(making / repeats, 3),
            "result_objects_point_sr_write_cpu_seconds": round(writing / repeats, 3),
            "result_objects_point_sr_bytes": size,
            "result_objects_load_average_1min": round(os.getloadavg()[0], 2)}


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
